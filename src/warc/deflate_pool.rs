//! Threads of idle priority that compute the digests of response records and deflate them
//! while the output thread holds them (`output.warc_deflate = "spare-cpu"`, see [`super`]
//! for the figures behind it).
//!
//! What it guarantees: the crawl never waits for it, and it takes only CPU nobody else
//! wants. Its threads run under `SCHED_IDLE` (where the kernel refuses that, nice 19): the
//! scheduler gives them a core only when no thread of normal priority wants it, and takes it
//! back as soon as one does. A record the output thread must write before a thread got to
//! it is digested there and written stored ([`super::record::Member::Stored`]); it is
//! withdrawn, so that no thread works on it in vain.
//!
//! Why digests before any deflate: a record's digests are needed whatever happens (the
//! output thread computes them if no thread did), so each µs of idle CPU spent on them
//! saves the crawl a µs; deflating saves the crawl only the writing of the bytes it takes
//! off (about a third of its cost, see [`super`]). So a thread digests every record
//! waiting before it deflates one, and takes up to [`MANY`] of them at once
//! ([`ResponseRecord::seal_many`]: on a CPU with AVX-512 their streams side by side, 7.1 µs
//! a 16 KiB page against 17.2 for two records' four SHA-NI streams, the choice the output
//! thread makes; a thread preempted with eight records costs nothing more than with two,
//! since the output thread digests whatever is due and not digested). Which of the two
//! ways is the faster is timed once when the pool starts, at normal priority (see
//! [`super::digest::settle_lanes`]).
//!
//! Why newest first: when the threads keep up, order does not matter; when they do not, the
//! oldest records are the next to be written, stored, whatever happens. A thread that takes
//! the newest has the whole wait of that record to finish it, where one taking the oldest
//! would mostly work on records that are written while it works.
//!
//! Why queues under a mutex rather than a channel: the threads take the newest of two
//! kinds of work, which a channel cannot offer, and the queues are touched once per burst
//! of records and twice per record worked on (~10-20 µs of work each): contention is nil.
//! A withdrawn record is only marked (no lock on the output thread's path); the queues'
//! oldest marked records are dropped at the next burst, and a thread skips one it finds.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::digest::MANY;
use super::record::ResponseRecord;

/// CPU time of the deflate threads that have ended, in this process: what the crawl bench
/// takes out of the crawler's CPU, since these threads only run on CPU nobody else wanted.
pub(crate) static THREADS_CPU_NS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// The deflate threads and their queue.
pub(crate) struct DeflatePool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// The priority the threads got ("SCHED_IDLE", "nice 19", or "normal").
    priority: &'static str,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    /// Records whose digests are not computed yet, oldest first (the output thread's order).
    to_digest: VecDeque<Arc<ResponseRecord>>,
    /// Records digested, to deflate, in the order they were digested.
    to_deflate: VecDeque<Arc<ResponseRecord>>,
    /// Threads waiting for a record and not yet woken for one.
    idle: usize,
    /// Wake-ups sent and not yet taken: `idle + woken` threads are inside the wait.
    woken: usize,
    stop: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl DeflatePool {
    /// Starts `threads` deflate threads (none: records are all written stored).
    pub(crate) fn start(threads: usize) -> std::io::Result<DeflatePool> {
        super::digest::settle_lanes();
        let shared = Arc::new(Shared::default());
        let (told, priority) = std::sync::mpsc::channel();
        let mut pool = DeflatePool {
            shared: shared.clone(),
            threads: Vec::with_capacity(threads),
            priority: "normal",
        };
        for i in 0..threads {
            let shared = shared.clone();
            let told = told.clone();
            let thread = std::thread::Builder::new()
                .name(format!("warc-deflate-{i}"))
                .spawn(move || {
                    let _ = told.send(lower_priority());
                    work(&shared);
                    THREADS_CPU_NS.fetch_add(
                        crate::cpu_time::thread_cpu_ns(),
                        std::sync::atomic::Ordering::Relaxed,
                    );
                })?;
            pool.threads.push(thread);
        }
        drop(told);
        if let Ok(got) = priority.recv() {
            pool.priority = got;
        }
        Ok(pool)
    }

    /// The threads' priority: "SCHED_IDLE", else "nice 19", else "normal".
    pub(crate) fn priority(&self) -> &'static str {
        self.priority
    }

    /// Queues records to digest and deflate, and wakes as many idle threads as there are
    /// records. Records withdrawn meanwhile leave the queues here.
    pub(crate) fn submit(&self, records: impl Iterator<Item = Arc<ResponseRecord>>) {
        let mut guard = self.shared.lock();
        let queue = &mut *guard;
        for waiting in [&mut queue.to_digest, &mut queue.to_deflate] {
            while waiting.front().is_some_and(|r| r.withdrawn()) {
                waiting.pop_front();
            }
        }
        let mut added = 0;
        for record in records {
            added += 1;
            if record.is_sealed() {
                queue.to_deflate.push_back(record);
            } else {
                queue.to_digest.push_back(record);
            }
        }
        let wake = added.min(queue.idle);
        // Counted as woken here, so that the next burst does not wake them again before
        // they run (at idle priority that may take a while).
        queue.idle -= wake;
        queue.woken += wake;
        drop(guard);
        for _ in 0..wake {
            self.shared.wake.notify_one();
        }
    }

    /// Tells the threads that `record` is being written as it is: none starts on it any
    /// more (one at work on it finishes in vain), and it leaves the queues at the next
    /// [`DeflatePool::submit`].
    pub(crate) fn withdraw(&self, record: &ResponseRecord) {
        record.withdraw();
    }

    /// Records queued, not withdrawn, and not taken by a thread.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        let queue = self.shared.lock();
        queue
            .to_digest
            .iter()
            .chain(&queue.to_deflate)
            .filter(|r| !r.withdrawn())
            .count()
    }
}

impl Drop for DeflatePool {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// What a thread does with the records it took.
enum Work {
    /// The digests of up to [`MANY`] records at once, newest first (see
    /// [`ResponseRecord::seal_many`]).
    Digest(Vec<Arc<ResponseRecord>>),
    Deflate(Arc<ResponseRecord>),
}

/// A deflate thread: the newest record to digest, else the newest to deflate, until the
/// pool stops.
fn work(shared: &Shared) {
    loop {
        let work = {
            let mut queue = shared.lock();
            loop {
                if queue.stop {
                    return;
                }
                if let Some(work) = queue.next() {
                    break work;
                }
                queue.idle += 1;
                queue = shared.wake.wait(queue).unwrap_or_else(|e| e.into_inner());
                // Out of the wait: one wake-up sent is taken, or, woken spuriously with none
                // sent, this thread is no longer idle. Either way the two counts again add
                // up to the threads inside the wait.
                if queue.woken > 0 {
                    queue.woken -= 1;
                } else {
                    queue.idle = queue.idle.saturating_sub(1);
                }
            }
        };
        perform(shared, work);
    }
}

impl Queue {
    /// The next records to work on: the newest to digest, up to [`MANY`] of them (digested
    /// together), else the newest to deflate.
    fn next(&mut self) -> Option<Work> {
        let mut batch = Vec::new();
        while batch.len() < MANY {
            let Some(record) = self.to_digest.pop_back() else {
                break;
            };
            if !record.withdrawn() {
                batch.push(record);
            }
        }
        if !batch.is_empty() {
            return Some(Work::Digest(batch));
        }
        self.to_deflate.pop_back().map(Work::Deflate)
    }
}

/// Does `work`, unless its record was withdrawn; a record digested that still needs its
/// deflate goes back into the queues for it.
fn perform(shared: &Shared, work: Work) {
    match work {
        Work::Digest(mut batch) => {
            batch.retain(|r| !r.withdrawn());
            let records: Vec<&ResponseRecord> = batch.iter().map(|r| &**r).collect();
            ResponseRecord::seal_many(&records);
            let mut queue = None;
            for record in batch.into_iter().filter(|r| !r.made()) {
                queue
                    .get_or_insert_with(|| shared.lock())
                    .to_deflate
                    .push_back(record);
            }
        }
        Work::Deflate(record) if !record.withdrawn() => record.deflate(),
        Work::Deflate(_) => {}
    }
}

/// Puts the calling thread at idle priority: `SCHED_IDLE`, else nice 19. What it got.
fn lower_priority() -> &'static str {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler(2) on the calling thread (pid 0) with a valid policy and
        // a parameter that outlives the call; lowering a thread's priority needs no
        // privilege.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0 {
            return "SCHED_IDLE";
        }
    }
    // SAFETY: setpriority(2) on the calling thread (who = 0; Linux threads have a nice value
    // of their own), raising the nice value, which needs no privilege.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) } == 0 {
        return "nice 19";
    }
    "normal"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::fixture::fetch_parts;
    use crate::warc::record::{digest_label, prepare, sha1_of, Member};

    fn record(payload: &[u8]) -> Arc<ResponseRecord> {
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        let prepared = prepare(&fetch_parts("http://a.test/x", head, payload), 1);
        prepared
            .with_block((head.to_vec(), payload.to_vec()))
            .response
    }

    fn page(i: usize) -> Vec<u8> {
        format!("<p>page {i}</p> <a href=\"/p/{i}\">link</a>\n")
            .repeat(400)
            .into_bytes()
    }

    #[test]
    fn the_threads_deflate_what_they_are_given_at_idle_priority() {
        let pool = DeflatePool::start(2).unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(pool.priority(), "SCHED_IDLE");
        let records: Vec<_> = (0..50).map(|i| record(&page(i))).collect();
        assert!(records.iter().all(|r| !r.made()));
        pool.submit(records.iter().cloned());
        // Nothing else wants the CPU for long in a test: they get to every record. (The
        // deadline only keeps a broken pool from hanging the suite.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !records.iter().all(|r| r.made()) {
            assert!(
                std::time::Instant::now() < deadline,
                "records left undeflated"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        for (i, record) in records.iter().enumerate() {
            let Member::Made(member) = record.member() else {
                panic!("record {i} is not deflated");
            };
            assert!(member.len() < page(i).len() / 4, "deflated, not stored");
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(member), &mut text)
                .unwrap();
            assert!(text.starts_with(b"WARC/1.1\r\nWARC-Type: response\r\n"));
            assert!(text.ends_with(&[&page(i)[..], b"\r\n\r\n"].concat()));
        }
        assert_eq!(pool.queued(), 0);
    }

    #[test]
    fn a_record_withdrawn_is_not_deflated_and_leaves_the_queue() {
        // No threads: what is queued stays queued until withdrawn.
        let pool = DeflatePool::start(0).unwrap();
        let records: Vec<_> = (0..3).map(|i| record(&page(i))).collect();
        pool.submit(records.iter().cloned());
        assert_eq!(pool.queued(), 3);
        for (i, r) in records.iter().enumerate() {
            pool.withdraw(r);
            assert_eq!(pool.queued(), 2 - i);
            assert!(!r.made());
            assert!(matches!(r.member(), Member::Stored(..)));
        }
        // Dropped from the queues at the next burst; the new records stay.
        let later: Vec<_> = (3..5).map(|i| record(&page(i))).collect();
        pool.submit(later.iter().cloned());
        let queue = pool.shared.lock();
        assert_eq!(queue.to_digest.len(), 2);
        assert!(queue.to_digest.iter().all(|r| !r.withdrawn()));
    }

    #[test]
    fn the_threads_digest_every_record_waiting_before_they_deflate_one() {
        // Ten records waiting, then one thread: it computes every digest first (each saves
        // the output thread as much), the newest eight at once, then the other two, then
        // deflates, newest first.
        let pool = DeflatePool::start(0).unwrap();
        let records: Vec<_> = (0..10).map(|i| record(&page(i))).collect();
        pool.submit(records.iter().cloned());
        // One step at a time, as a thread does, noting what each record got.
        let mut order = Vec::new();
        let mut digested_together = Vec::new();
        loop {
            // The lock let go before the work, as a thread does.
            let next = pool.shared.lock().next();
            let Some(work) = next else { break };
            let (kind, worked_on): (_, Vec<&Arc<ResponseRecord>>) = match &work {
                Work::Digest(batch) => {
                    digested_together.push(batch.len());
                    ("digest", batch.iter().collect())
                }
                Work::Deflate(r) => ("deflate", vec![r]),
            };
            for record in worked_on {
                let index = records.iter().position(|r| Arc::ptr_eq(r, record));
                order.push((kind, index.unwrap()));
            }
            perform(&pool.shared, work);
        }
        assert_eq!(order.len(), 20, "{order:?}");
        // As many at once as the lanes take, as long as that many are waiting.
        assert_eq!(digested_together, [MANY, 10 - MANY], "{order:?}");
        assert!(
            order[..10].iter().all(|(kind, _)| *kind == "digest"),
            "{order:?}"
        );
        assert_eq!(order[0].1, 9, "newest first: {order:?}");
        assert!(
            order[10..].iter().all(|(kind, _)| *kind == "deflate"),
            "{order:?}"
        );
        assert!(records.iter().all(|r| r.made()));
        // Digested together, each record's digests are its own, as the `sha1` crate has them.
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        for (i, record) in records.iter().enumerate() {
            let payload = page(i);
            assert_eq!(record.seal().payload_digest, sha1_of(&[&payload]));
            let Member::Made(member) = record.member() else {
                panic!("record {i} is not deflated");
            };
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(member), &mut text)
                .unwrap();
            let block = digest_label(&sha1_of(&[head, &payload]));
            let field = format!("WARC-Block-Digest: {block}\r\n");
            assert!(
                text.windows(field.len()).any(|w| w == field.as_bytes()),
                "record {i}"
            );
        }
    }
}
