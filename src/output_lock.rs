//! One crawl per output directory: every process that writes an `--out` holds a `flock` on
//! `OUT/lock` for its whole life, taken before anything in the directory is read or written.
//!
//! Two crawls on one directory destroy each other (both append to `pages.jsonl`, one deletes
//! the frontier files the other reads, `--fresh` wipes a live crawl's checkpoint), so a
//! second process is refused at once, with the directory and the holder's pid, and touches
//! nothing. What it guarantees and why it is built so:
//!
//! - **Released on any death.** A `flock` belongs to the open file description; the kernel
//!   drops it when the last descriptor closes, so a crawl killed with `kill -9` or by the
//!   OOM killer leaves no stale lock and `--resume` just works. A pid file alone could not
//!   tell a dead holder from a live one (pids are reused); the pid written in the file is
//!   only for the message.
//! - **Not inherited by children.** The file is opened by `std::fs`, which sets `O_CLOEXEC`:
//!   a child the process spawns (a `redis-server` in tests) does not keep the lock alive
//!   after its parent dies. (Between `fork` and `exec` a child shares the description for a
//!   moment; see commit 75fc0c7.)
//! - **Kinds of holders.** A single-process crawl and `crawler demo` hold it exclusively.
//!   The processes of one distributed crawl may share an output directory (each writes files
//!   named after its own process id, each holding its own pages file's lock, see
//!   `crate::distributed::seal`), so they hold it shared: they exclude a local crawl and it
//!   excludes them, but not each other.
//! - **The file stays.** `OUT/lock` is never removed: unlinking it while another process
//!   opens it would let two processes lock two different files of the same name.
//!
//! On a filesystem without working `flock` (some network filesystems) the lock does not
//! exclude anything; nothing else in the crawler depends on it.
//!
//! Built on `libc::flock` rather than `File::try_lock`: the latter needs Rust 1.89, the
//! crate's minimum is 1.85. The same call serves the distributed seal's per-process locks.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::durable::{At, IoAt};

/// The lock file's name inside the output directory.
pub const LOCK_FILE: &str = "lock";

/// How the directory is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// A single-process crawl or the demo: no other process at all.
    Exclusive,
    /// A process of a distributed crawl: other such processes, no local crawl.
    Shared,
}

impl Holding {
    fn word(self) -> &'static str {
        match self {
            Holding::Exclusive => "crawl",
            Holding::Shared => "distributed",
        }
    }
}

/// The lock on an output directory; dropping it (or dying) releases it.
#[derive(Debug)]
pub struct DirectoryLock {
    _file: File,
}

/// Why an output directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum OutputLockError {
    #[error("{}: cannot create output directory", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] IoAt),
    #[error("{}: {holder} is using this output directory; two crawls on one directory destroy each other: wait for it to end (or stop it), or use another --out", dir.display())]
    Held { dir: PathBuf, holder: Holder },
}

/// Who holds a directory, as far as its lock file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// None when the file names nobody (a holder between its lock and its write).
    pub pid: Option<u32>,
    pub holding: Holding,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pid = match self.pid {
            Some(pid) => format!("pid {pid}"),
            None => "pid unknown".to_string(),
        };
        match self.holding {
            Holding::Exclusive => write!(f, "another crawler ({pid})"),
            Holding::Shared => write!(
                f,
                "a process of a distributed crawl ({pid}, maybe with others)"
            ),
        }
    }
}

/// One record in the lock file, of fixed length so that shared holders overwrite it whole.
fn record(pid: u32, holding: Holding) -> String {
    format!("{pid:<10} {:<11}\n", holding.word())
}

fn parse_record(text: &str) -> Option<Holder> {
    let mut words = text.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    let holding = match words.next()? {
        "crawl" => Holding::Exclusive,
        "distributed" => Holding::Shared,
        _ => return None,
    };
    Some(Holder {
        pid: Some(pid),
        holding,
    })
}

impl DirectoryLock {
    /// Creates `dir` if needed and locks it, or says who holds it. Never waits.
    pub fn acquire(dir: &Path, holding: Holding) -> Result<DirectoryLock, OutputLockError> {
        std::fs::create_dir_all(dir).map_err(|source| OutputLockError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .at("open", &path)?;
        if !try_flock(&file, holding).at("lock", &path)? {
            return Err(OutputLockError::Held {
                dir: dir.to_path_buf(),
                holder: read_holder(&file),
            });
        }
        let line = record(std::process::id(), holding);
        file.write_all_at(line.as_bytes(), 0).at("write", &path)?;
        file.set_len(line.len() as u64).at("truncate", &path)?;
        Ok(DirectoryLock { _file: file })
    }
}

/// The holder named in the lock file. A holder writes its pid right after locking; a reader
/// that comes in between waits a moment for it rather than print "pid unknown".
fn read_holder(file: &File) -> Holder {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let mut buffer = [0u8; 64];
        let read = file
            .read_at(&mut buffer, 0)
            .ok()
            .and_then(|n| parse_record(&String::from_utf8_lossy(&buffer[..n])));
        if let Some(holder) = read {
            return holder;
        }
        if Instant::now() >= deadline {
            // Either kind of lock is refused by a local crawl's; it is the likelier.
            return Holder {
                pid: None,
                holding: Holding::Exclusive,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `flock` without waiting: false if another open file description holds a conflicting
/// one (an exclusive lock conflicts with any other, a shared one with an exclusive one).
pub(crate) fn try_flock(file: &File, holding: Holding) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let operation = match holding {
        Holding::Exclusive => libc::LOCK_EX,
        Holding::Shared => libc::LOCK_SH,
    };
    // SAFETY: flock on a descriptor this `File` owns; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), operation | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock is released within a bound, not at once: another test of this binary may be
    /// between `fork` and `exec` of a child, which shares every open file description.
    fn free_within(dir: &Path, holding: Holding) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match DirectoryLock::acquire(dir, holding) {
                Ok(_) => return true,
                Err(OutputLockError::Held { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => return false,
            }
        }
    }

    #[test]
    fn a_second_exclusive_holder_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let held = DirectoryLock::acquire(&out, Holding::Exclusive).unwrap();
        for holding in [Holding::Exclusive, Holding::Shared] {
            let e = DirectoryLock::acquire(&out, holding).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "{}: another crawler (pid {}) is using this output directory; two crawls on one directory destroy each other: wait for it to end (or stop it), or use another --out",
                    out.display(),
                    std::process::id()
                )
            );
        }
        drop(held);
        assert!(free_within(&out, Holding::Exclusive));
    }

    #[test]
    fn distributed_processes_share_and_exclude_a_local_crawl() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let first = DirectoryLock::acquire(out, Holding::Shared).unwrap();
        let second = DirectoryLock::acquire(out, Holding::Shared).unwrap();
        let e = DirectoryLock::acquire(out, Holding::Exclusive).unwrap_err();
        match e {
            OutputLockError::Held { holder, .. } => assert_eq!(
                holder,
                Holder {
                    pid: Some(std::process::id()),
                    holding: Holding::Shared
                }
            ),
            other => panic!("{other}"),
        }
        drop(first);
        assert!(DirectoryLock::acquire(out, Holding::Exclusive).is_err());
        drop(second);
        assert!(free_within(out, Holding::Exclusive));
    }

    #[test]
    fn a_child_process_does_not_keep_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let held = DirectoryLock::acquire(dir.path(), Holding::Exclusive).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        drop(held);
        let free = free_within(dir.path(), Holding::Exclusive);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(free, "the child inherited the lock");
    }

    #[test]
    fn a_lock_file_left_behind_does_not_lock() {
        let dir = tempfile::tempdir().unwrap();
        // What a killed holder leaves: the file with its pid, no lock.
        std::fs::write(dir.path().join(LOCK_FILE), record(1, Holding::Exclusive)).unwrap();
        let _held = DirectoryLock::acquire(dir.path(), Holding::Exclusive).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(
            parse_record(&text).unwrap().pid,
            Some(std::process::id()),
            "{text:?}"
        );
    }

    #[test]
    fn an_unwritable_place_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let e = DirectoryLock::acquire(&dir.path().join("file/x"), Holding::Exclusive).unwrap_err();
        assert!(
            matches!(e, OutputLockError::CreateDir { .. }) && e.to_string().contains("file/x"),
            "{e}"
        );
    }
}
