//! Threads of idle priority that deflate response records while the output thread holds
//! them (`output.warc_deflate = "spare-cpu"`, see [`super`] for the figures behind it).
//!
//! What it guarantees: the crawl never waits for it, and it takes only CPU nobody else
//! wants. Its threads run under `SCHED_IDLE` (where the kernel refuses that, nice 19): the
//! scheduler gives them a core only when no thread of normal priority wants it, and takes it
//! back as soon as one does. A record the output thread must write before a thread got to
//! it is written stored ([`super::record::Member::Stored`]), and is withdrawn from the queue
//! so that nothing deflates it in vain.
//!
//! Why newest first: when the threads keep up, order does not matter; when they do not, the
//! oldest records are the next to be written, stored, whatever happens. A thread that takes
//! the newest has the whole wait of that record to finish it, where one taking the oldest
//! would mostly deflate records that are written stored while it works.
//!
//! Why one queue under a mutex rather than a channel: the output thread must withdraw the
//! oldest record when it writes it, which a channel cannot do, and the queue is touched once
//! per burst of records and once per record deflated (~20 µs of work each): contention is
//! nil.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

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
    /// Records to deflate, oldest first (the output thread's order).
    records: VecDeque<Arc<ResponseRecord>>,
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

    /// Queues records to deflate, and wakes as many idle threads as there are records.
    pub(crate) fn submit(&self, records: impl Iterator<Item = Arc<ResponseRecord>>) {
        let mut queue = self.shared.lock();
        let before = queue.records.len();
        queue.records.extend(records);
        let wake = (queue.records.len() - before).min(queue.idle);
        // Counted as woken here, so that the next burst does not wake them again before
        // they run (at idle priority that may take a while).
        queue.idle -= wake;
        queue.woken += wake;
        drop(queue);
        for _ in 0..wake {
            self.shared.wake.notify_one();
        }
    }

    /// Takes `record` out of the queue if no thread has taken it yet: it is being written
    /// as it is. Records are written oldest first, so a record still queued is the oldest.
    pub(crate) fn withdraw(&self, record: &Arc<ResponseRecord>) {
        let mut queue = self.shared.lock();
        if queue
            .records
            .front()
            .is_some_and(|first| Arc::ptr_eq(first, record))
        {
            queue.records.pop_front();
        }
    }

    /// Records queued and not taken by a thread.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.shared.lock().records.len()
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

/// A deflate thread: the newest record queued, deflated, until the pool stops.
fn work(shared: &Shared) {
    loop {
        let record = {
            let mut queue = shared.lock();
            loop {
                if queue.stop {
                    return;
                }
                if let Some(record) = queue.records.pop_back() {
                    break record;
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
        record.deflate();
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
    use crate::warc::record::{prepare, Member};

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
        // No threads: what is queued stays queued until withdrawn, oldest first.
        let pool = DeflatePool::start(0).unwrap();
        let records: Vec<_> = (0..3).map(|i| record(&page(i))).collect();
        pool.submit(records.iter().cloned());
        assert_eq!(pool.queued(), 3);
        // Not the oldest: a thread would have it, or it is written later; left alone.
        pool.withdraw(&records[1]);
        assert_eq!(pool.queued(), 3);
        for (i, r) in records.iter().enumerate() {
            pool.withdraw(r);
            assert_eq!(pool.queued(), 2 - i);
            assert!(!r.made());
            assert!(matches!(r.member(), Member::Stored(_)));
        }
    }
}
