//! The log's write buffer handed to the operating system on a thread of its own:
//! [`LogWriter`].
//!
//! Why: the `pwrite` of each full write buffer (1 MiB by default) was ~5 % of the frontier's
//! thread in the scale bench at 1e7 URLs (the kernel copying the bytes into the page cache and
//! ext4 preparing its pages), time in which that thread, the crawl's one serial owner of the
//! frontier, admitted nothing. A buffer is now sent to this thread and the owner goes on
//! filling the next one.
//!
//! What stays exact:
//! - One buffer at most is being written: handing over the next one first waits for it, so
//!   buffers reach their files in log order, as before (replay after a crash still finds a
//!   prefix of the log, cut at its first torn record).
//! - Until its write returns, the buffer stays readable by the owner ([`LogWriter::bytes_at`]):
//!   a pop of a group in it reads it from memory, never a file region not yet written.
//! - Links into a group in it are deferred (the owner's `patches` map, as for any group no
//!   longer in the write buffer); whoever writes such links to the file
//!   (`apply_patches_now`, a sync's write) runs only after [`LogWriter::wait`], so an older
//!   `next` field in the buffer can never land on top of a newer one.
//! - Whatever must be with the operating system when a call returns (`QueueStore::flush`,
//!   a sync's pause, dropping the store) waits for the write: the promises about `kill -9`
//!   are unchanged. A write's error comes back, with its file, from the next wait or hand-over.
//!
//! The thread is started on the first hand-over (a store that never fills its buffer starts
//! none) and ends when the store is dropped.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::StoreError;
use crate::durable::At;

/// A buffer to write at `at` of `file` (the segment file at `path`).
struct Job {
    file: File,
    path: PathBuf,
    at: u64,
    bytes: Arc<Vec<u8>>,
}

/// The thread writing the log's full buffers; see the module doc.
#[derive(Default)]
pub(super) struct LogWriter {
    jobs: Option<Sender<Job>>,
    done: Option<Receiver<Result<(), StoreError>>>,
    thread: Option<JoinHandle<()>>,
    /// The buffer being written: its segment, its offset there, and its bytes.
    in_flight: Option<(u32, u64, Arc<Vec<u8>>, PathBuf)>,
    /// The last buffer written, emptied, for the next hand-over to return.
    spare: Vec<u8>,
}

impl LogWriter {
    /// Hands `bytes` over to be written at `at` of segment `segment` (`file`, at `path`),
    /// after the buffer handed over before it is written; returns an empty buffer (the
    /// previous one's, with its capacity) for the owner to fill next.
    pub(super) fn hand_over(
        &mut self,
        segment: u32,
        file: File,
        path: PathBuf,
        at: u64,
        bytes: Vec<u8>,
    ) -> Result<Vec<u8>, StoreError> {
        self.wait()?;
        if self.jobs.is_none() && !self.start() {
            // No thread could be started: the write is made here, as before this module.
            file.write_all_at(&bytes, at).at("write", &path)?;
            let mut bytes = bytes;
            bytes.clear();
            return Ok(bytes);
        }
        let bytes = Arc::new(bytes);
        let job = Job {
            file,
            path: path.clone(),
            at,
            bytes: bytes.clone(),
        };
        if self
            .jobs
            .as_ref()
            .is_none_or(|jobs| jobs.send(job).is_err())
        {
            return Err(gone(&path));
        }
        self.in_flight = Some((segment, at, bytes, path));
        Ok(std::mem::take(&mut self.spare))
    }

    /// Starts the thread; false if the system would not.
    fn start(&mut self) -> bool {
        let (jobs, incoming) = channel::<Job>();
        let (report, done) = channel();
        let thread = std::thread::Builder::new()
            .name("frontier-log".into())
            .spawn(move || {
                for job in incoming {
                    let written = job
                        .file
                        .write_all_at(&job.bytes, job.at)
                        .at("write", &job.path)
                        .map_err(StoreError::from);
                    // The owner takes the buffer back once this is reported: drop our share
                    // first.
                    drop(job);
                    if report.send(written).is_err() {
                        break;
                    }
                }
            });
        let Ok(thread) = thread else {
            return false;
        };
        self.thread = Some(thread);
        self.done = Some(done);
        self.jobs = Some(jobs);
        true
    }

    /// Waits until the buffer handed over last (if any) is with the operating system.
    pub(super) fn wait(&mut self) -> Result<(), StoreError> {
        let Some((_, _, bytes, path)) = self.in_flight.take() else {
            return Ok(());
        };
        let written = match &self.done {
            Some(done) => done.recv().unwrap_or_else(|_| Err(gone(&path))),
            None => Err(gone(&path)),
        };
        if let Ok(mut buffer) = Arc::try_unwrap(bytes) {
            buffer.clear();
            self.spare = buffer;
        }
        written
    }

    /// The bytes of segment `segment` from offset `at` to the end of the buffer being
    /// written, if that buffer holds them.
    pub(super) fn bytes_at(&self, segment: u32, at: u64) -> Option<&[u8]> {
        let (s, start, bytes, _) = self.in_flight.as_ref()?;
        if *s != segment || at < *start || at >= start + bytes.len() as u64 {
            return None;
        }
        Some(&bytes[(at - start) as usize..])
    }

    /// Bytes held: the buffer being written and the spare one.
    pub(super) fn memory_bytes(&self) -> u64 {
        (self
            .in_flight
            .as_ref()
            .map_or(0, |(_, _, b, _)| b.capacity())
            + self.spare.capacity()) as u64
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        // A store dropped after its last flush must find its bytes in the file when it is
        // reopened: the write in flight is finished first.
        let _ = self.wait();
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The error of a write whose thread is gone (it cannot be known whether it was made).
fn gone(path: &std::path::Path) -> StoreError {
    crate::durable::IoAt {
        action: "write",
        path: path.to_path_buf(),
        source: std::io::Error::other("the log's writer thread ended"),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_readable_until_written_then_in_its_file_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seg");
        let file = File::create(&path).expect("create");
        let mut writer = LogWriter::default();
        let clone = || file.try_clone().expect("clone");
        let spare = writer
            .hand_over(7, clone(), path.clone(), 0, b"abcdef".to_vec())
            .expect("hand over");
        assert!(spare.is_empty());
        assert_eq!(writer.bytes_at(7, 2), Some(&b"cdef"[..]));
        assert_eq!(writer.bytes_at(7, 6), None);
        assert_eq!(writer.bytes_at(8, 2), None);
        // The second waits for the first: both land, in order, and the first's buffer comes
        // back for reuse.
        let spare = writer
            .hand_over(7, clone(), path.clone(), 6, b"ghij".to_vec())
            .expect("hand over");
        assert!(spare.is_empty() && spare.capacity() >= 6);
        assert_eq!(writer.bytes_at(7, 2), None);
        writer.wait().expect("wait");
        assert_eq!(writer.bytes_at(7, 6), None);
        assert_eq!(std::fs::read(&path).expect("read"), b"abcdefghij");
    }

    #[test]
    fn a_failed_write_is_reported_with_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("seg");
        std::fs::write(&path, b"x").expect("write");
        // Opened read-only: the write fails.
        let file = File::open(&path).expect("open");
        let mut writer = LogWriter::default();
        writer
            .hand_over(1, file, path.clone(), 0, b"abc".to_vec())
            .expect("hand over");
        let err = writer.wait().expect_err("a read-only file");
        assert!(err.to_string().contains("seg"), "{err}");
    }
}
