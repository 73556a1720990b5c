//! Sealing the output of dead processes. A process's id is never reused, so nobody resumes
//! the files of a process killed with `kill -9`: its `pages-<id>.jsonl` may end with a torn
//! line, and its last WARC file with records whose line was lost (or a torn one). A process
//! seals them when it starts and when it sees the crawl finished: the pages file is cut after
//! its last complete line and the archive cut back to what the kept lines point to
//! ([`crate::warc::recovery::seal`], the resume's recovery applied to one process's files),
//! and its local frontier (`work-<id>/`) removed.
//! Their URLs are not lost: a line that was lost was never acknowledged, so its URL went back
//! to its host's queue when the lease expired and another process recorded it.
//!
//! # Who is dead (never a live process)
//!
//! Only processes of this crawl whose files are in this output directory, and all three of:
//! - **Silent in Redis**: its last heartbeat (`procs`, written every `lease_secs / 3`) is
//!   older than `lease_secs` by Redis's clock: the same rule by which its leases are already
//!   taken over, and it has not ended itself (`ended`: a process that finishes or stops
//!   writes `finished` or `stopped` there after its files are closed).
//! - **Not holding its files**: every process holds an exclusive `flock` on its pages file
//!   from before its first byte of output until it exits; the kernel releases it when the
//!   process dies however it dies. A process that is only paused (SIGSTOP, a frozen VM) is
//!   silent in Redis but still holds the lock, and is left alone. (On a shared filesystem
//!   without working `flock`, the heartbeat rule alone decides.)
//! - **Not being sealed by another**: a lock in Redis (`seal:<id>`, `SET NX` with an expiry)
//!   lets one process seal a dead one's files at a time; the others skip it. Once sealed, the
//!   process is marked `sealed by <id>` in `ended` and never looked at again.
//!
//! Why a process registers before it creates any file: files whose id Redis does not know
//! belong to no process of this crawl (another crawl, or one that is just starting), and
//! are left alone.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{DistributedError, Redis};
use crate::durable::{At, IoAt};

/// How long the sealing lock lasts if its holder dies while sealing.
const SEAL_LOCK: Duration = Duration::from_secs(120);

/// How soon to look again at a dead process another process is sealing.
pub(crate) const SEALING_BY_ANOTHER: Duration = Duration::from_millis(50);

/// The exclusive `flock` a live process holds on its pages file (created if missing);
/// released when dropped, or by the kernel when the process dies.
pub(crate) struct OutputLock {
    _file: File,
}

impl OutputLock {
    pub(crate) fn acquire(path: &Path) -> Result<OutputLock, IoAt> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .at("open", path)?;
        if !try_lock(&file).at("lock", path)? {
            return Err(std::io::Error::other(
                "another process holds it (two processes with one id?)",
            ))
            .at("lock", path);
        }
        Ok(OutputLock { _file: file })
    }
}

/// An exclusive `flock` without waiting: false if another open file description holds one.
fn try_lock(file: &File) -> std::io::Result<bool> {
    crate::output_lock::try_flock(file, crate::output_lock::Holding::Exclusive)
}

/// Where a crawl's processes write, and how this one is named.
pub(crate) struct SealScope<'a> {
    pub(crate) redis: &'a Redis,
    /// The crawl's key prefix.
    pub(crate) prefix: &'a str,
    /// This process's id: never sealed by itself.
    pub(crate) process: &'a str,
    pub(crate) out: &'a Path,
    /// `output.warc_prefix`: a process's WARC files start with `PREFIX-<its id>`.
    pub(crate) warc_prefix: &'a str,
    /// Silence after which a process is taken for dead: `lease_secs`.
    pub(crate) silence: Duration,
}

/// The ids of the processes whose pages files are in `out` (`pages-<id>.jsonl`).
fn processes_in(out: &Path) -> Result<Vec<(String, PathBuf)>, IoAt> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(out).at("list", out)? {
        let entry = entry.at("list", out)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = name
            .strip_prefix("pages-")
            .and_then(|n| n.strip_suffix(".jsonl"))
        {
            found.push((id.to_string(), entry.path()));
        }
    }
    Ok(found)
}

/// What [`seal_dead`] did.
#[derive(Debug, Default)]
pub(crate) struct Sealing {
    /// The processes whose output it sealed.
    pub(crate) sealed: Vec<String>,
    /// Processes that do not hold their pages file and have not ended, but whose last
    /// heartbeat is recent: dead (or not started yet) and not yet silent for `lease_secs`.
    /// How long until the last of them is; or, for a dead process another process is
    /// sealing right now, [`SEALING_BY_ANOTHER`] (look again then: it is ended once sealed).
    pub(crate) silent_soon: Option<Duration>,
}

/// Seals the output of every dead process of the crawl found in `scope.out` (see the module
/// doc).
pub(crate) async fn seal_dead(scope: &SealScope<'_>) -> Result<Sealing, DistributedError> {
    let out = scope.out.to_path_buf();
    let candidates = tokio::task::spawn_blocking(move || processes_in(&out))
        .await
        .map_err(|e| joined("list the output", e))?
        .map_err(|source| DistributedError::Seal {
            process: "(listing)".into(),
            source,
        })?;
    let candidates: Vec<_> = candidates
        .into_iter()
        .filter(|(id, _)| id != scope.process)
        .collect();
    if candidates.is_empty() {
        return Ok(Sealing::default());
    }
    let p = scope.prefix;
    let mut pipe = super::client::Group::default();
    pipe.cmd("HGETALL").arg(format!("{p}procs"));
    pipe.cmd("HGETALL").arg(format!("{p}ended"));
    pipe.cmd("TIME");
    let replies = scope.redis.run(&pipe).await?;
    let [procs, ended, time] = replies.as_slice() else {
        return Err(super::bad("seal", &redis::Value::Nil));
    };
    let procs = super::status::pairs(procs)?;
    let ended = super::status::pairs(ended)?;
    let now_ms = super::status::time_ms(time)?;
    let silence_ms = scope.silence.as_millis() as i64;
    let mut sealing = Sealing::default();
    for (id, pages) in candidates {
        if ended.contains_key(&id) {
            continue;
        }
        let Some(beat) = procs.get(&id).and_then(|b| b.parse::<i64>().ok()) else {
            continue;
        };
        if now_ms - beat < silence_ms {
            let path = pages.clone();
            let held = tokio::task::spawn_blocking(move || is_held(&path))
                .await
                .map_err(|e| joined("lock", e))?
                .map_err(|source| DistributedError::Seal {
                    process: id.clone(),
                    source,
                })?;
            if !held {
                let left = Duration::from_millis((silence_ms - (now_ms - beat)) as u64);
                sealing.silent_soon = sealing.silent_soon.max(Some(left));
            }
            continue;
        }
        let lock = format!("{p}seal:{id}");
        let mut pipe = super::client::Group::default();
        pipe.cmd("SET")
            .arg(&lock)
            .arg(scope.process)
            .arg("NX")
            .arg("PX")
            .arg(SEAL_LOCK.as_millis() as u64);
        let got = scope.redis.run(&pipe).await?;
        if !matches!(got.first(), Some(redis::Value::Okay))
            && !matches!(got.first(), Some(redis::Value::SimpleString(s)) if s == "OK")
        {
            // Another process is sealing it: at the crawl's end, wait for it to finish, so
            // that the crawl-wide summary names the process as sealed.
            sealing.silent_soon = sealing.silent_soon.max(Some(SEALING_BY_ANOTHER));
            continue;
        }
        let warc_dir = scope.out.join("warc");
        let owner = format!("{}-{id}", scope.warc_prefix);
        let result = tokio::task::spawn_blocking(move || seal_files(&pages, &warc_dir, &owner))
            .await
            .map_err(|e| joined("seal", e))?;
        let mut pipe = super::client::Group::default();
        match result {
            Ok(Some(notes)) => {
                for note in &notes {
                    tracing::warn!("sealing dead process {id}: {note}");
                }
                tracing::info!("sealed the output of dead process {id}");
                pipe.cmd("HSETNX")
                    .arg(format!("{p}ended"))
                    .arg(&id)
                    .arg(format!("sealed by {}", scope.process));
                sealing.sealed.push(id.clone());
            }
            Ok(None) => tracing::info!(
                "process {id} is silent in Redis but still holds its pages file: left alone"
            ),
            Err(source) => {
                return Err(DistributedError::Seal {
                    process: id,
                    source,
                })
            }
        }
        // The lock is dropped only if it is still ours.
        pipe.cmd("EVAL")
            .arg("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0")
            .arg(1)
            .arg(&lock)
            .arg(scope.process);
        scope.redis.run(&pipe).await?;
    }
    Ok(sealing)
}

/// Whether a live process holds the lock of the pages file `path`.
fn is_held(path: &Path) -> Result<bool, IoAt> {
    let file = File::open(path).at("open", path)?;
    Ok(!try_lock(&file).at("lock", path)?)
}

/// Seals one process's files unless it still holds its pages file (`None` then).
fn seal_files(pages: &Path, warc_dir: &Path, owner: &str) -> Result<Option<Vec<String>>, IoAt> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .open(pages)
        .at("open", pages)?;
    // Held while sealing: the lock is free only if the process is gone, and holding it keeps
    // a sealer on this machine that ignored Redis's lock out.
    if !try_lock(&file).at("lock", pages)? {
        return Ok(None);
    }
    let owned = |name: &str| crate::warc::writer::written_with_prefix(name, owner);
    let notes = crate::warc::recovery::seal(pages, warc_dir, &owned)?;
    // Its local frontier (`work-<id>/`, a cache of its leased URLs, which Redis gave back to
    // the queues when the leases expired) is of no use to anyone.
    if let (Some(out), Some(id)) = (
        pages.parent(),
        pages
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("pages-"))
            .and_then(|n| n.strip_suffix(".jsonl")),
    ) {
        let work = out.join(format!("work-{id}"));
        if let Err(e) = std::fs::remove_dir_all(&work) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove {}: {e}", work.display());
            }
        }
    }
    drop(file);
    Ok(Some(notes))
}

fn joined(what: &str, e: tokio::task::JoinError) -> DistributedError {
    DistributedError::Reply {
        what: "seal",
        detail: format!("{what}: its task ended: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::warc::fixture;
    use std::collections::BTreeMap;
    use std::io::Write as _;

    #[test]
    fn a_held_pages_file_cannot_be_locked_again_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages-a.jsonl");
        let held = OutputLock::acquire(&path).unwrap();
        assert!(OutputLock::acquire(&path).is_err());
        let other = File::open(&path).unwrap();
        assert!(!try_lock(&other).unwrap());
        drop(held);
        // Another test of this binary may be spawning a redis-server: between its fork and
        // exec the child shares every open file description, this lock's too, for a few
        // milliseconds (CLOEXEC only closes them at exec). So the release is awaited,
        // within a bound.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut released = try_lock(&other).unwrap();
        while !released && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            released = try_lock(&other).unwrap();
        }
        assert!(released);
    }

    /// What a process `id` killed mid-write leaves in `out`: 4 fetches with their lines, a
    /// fifth whose records reached the archive and whose line is torn. Returns the pages
    /// file, its WARC file, and the lengths sealing must cut them back to.
    fn killed_process(out: &Path, id: &str) -> (PathBuf, PathBuf, u64, u64) {
        let pages_path = out.join(format!("pages-{id}.jsonl"));
        let mut pages = File::create(&pages_path).unwrap();
        let mut writer = fixture::writer(out, &format!("crawler-{id}"), pages_path.clone());
        let (mut at, mut warc_end) = (0, 0);
        for i in 0..5 {
            let url = format!("http://{id}.test/{i}");
            let payload = format!("page {i} of {id}").into_bytes();
            let (record, line) = fixture::archive_fetch(&mut writer, &url, &payload, at);
            if i == 4 {
                // Killed in the middle of the line.
                pages.write_all(&line[..line.len() / 2]).unwrap();
            } else {
                pages.write_all(&line).unwrap();
                at += line.len() as u64;
                let w = record.warc.unwrap();
                warc_end = w.offset + w.length;
            }
        }
        let warc = writer.current().path().0.unwrap();
        writer.finish().unwrap();
        (pages_path, warc, at, warc_end)
    }

    fn lengths(files: &[&Path]) -> Vec<u64> {
        files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .collect()
    }

    /// Against a real `redis-server`: of five processes' files, only those of the one that
    /// is silent in Redis, not holding its pages file, not ended and not being sealed by
    /// another are sealed (torn line and excess records cut), once.
    #[test]
    fn only_dead_processes_are_sealed_and_only_once() {
        let server = super::super::script_tests::Server::start();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let mut files = BTreeMap::new();
        for id in ["dead", "live", "paused", "locked", "stranger"] {
            files.insert(id, killed_process(out, id));
            std::fs::create_dir_all(out.join(format!("work-{id}/queues"))).unwrap();
        }
        // "paused" still holds its pages file (a process stopped, not dead).
        let _paused = OutputLock::acquire(&files["paused"].0).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let redis = Redis::connect(&server.url(), Duration::from_secs(10))
                .await
                .unwrap();
            let p = super::super::prefix("seal-test");
            let mut pipe = crate::distributed::client::Group::default();
            pipe.cmd("TIME");
            let now = super::super::status::time_ms(&redis.run(&pipe).await.unwrap()[0]).unwrap();
            let mut pipe = crate::distributed::client::Group::default();
            // Heartbeats: 10 s old, except "live"'s; "stranger" is not of this crawl.
            for (id, age) in [
                ("dead", 10_000),
                ("live", 0),
                ("paused", 10_000),
                ("locked", 10_000),
            ] {
                pipe.cmd("HSET")
                    .arg(format!("{p}procs"))
                    .arg(id)
                    .arg(now - age);
            }
            // Another process is sealing "locked".
            pipe.cmd("SET").arg(format!("{p}seal:locked")).arg("other");
            redis.run(&pipe).await.unwrap();
            let scope = SealScope {
                redis: &redis,
                prefix: &p,
                process: "me",
                out,
                warc_prefix: "crawler",
                silence: Duration::from_secs(5),
            };
            let before: BTreeMap<_, _> = files
                .iter()
                .map(|(id, f)| (*id, lengths(&[&f.0, &f.1])))
                .collect();
            let sealing = seal_dead(&scope).await.unwrap();
            assert_eq!(sealing.sealed, vec!["dead".to_string()]);
            // "live" has a fresh heartbeat but holds no lock (it died a moment ago): silent
            // for the whole 5 s soon.
            let soon = sealing.silent_soon.unwrap();
            assert!(
                soon > Duration::from_secs(3) && soon <= Duration::from_secs(5),
                "{soon:?}"
            );
            for (id, (pages, warc, pages_end, warc_end)) in &files {
                let now = lengths(&[pages, warc]);
                if *id == "dead" {
                    assert_eq!(now, vec![*pages_end, *warc_end], "dead: cut back");
                    assert!(now[0] < before[id][0] && now[1] < before[id][1]);
                } else {
                    assert_eq!(now, before[id], "{id}: untouched");
                }
            }
            // Its local frontier is gone; the others' are not.
            assert!(!out.join("work-dead").exists());
            assert!(out.join("work-live").exists() && out.join("work-paused").exists());
            // Every member of the sealed file reads back whole.
            let members: Vec<_> = crate::warc::reader::Members::open(&files["dead"].1)
                .unwrap()
                .collect();
            assert!(members.iter().all(Result::is_ok));
            assert_eq!(members.len(), 1 + 4 * 2);
            // And warcio reads it, every digest right.
            use crate::warc::warcio_check::{check, Brotli};
            assert_eq!(check(&[files["dead"].1.clone()], Brotli::AsInstalled), [9]);
            let mut pipe = crate::distributed::client::Group::default();
            pipe.cmd("HGET").arg(format!("{p}ended")).arg("dead");
            pipe.cmd("EXISTS").arg(format!("{p}seal:dead"));
            let replies = redis.run(&pipe).await.unwrap();
            assert_eq!(
                super::super::text(&replies[0], "ended").unwrap(),
                "sealed by me"
            );
            assert_eq!(
                super::super::int(&replies[1], "lock").unwrap(),
                0,
                "lock released"
            );
            // Sealed once: nothing more to do.
            assert!(seal_dead(&scope).await.unwrap().sealed.is_empty());
            // A live process holding its lock is not waited for; one another process is
            // sealing is looked at again shortly, until that one has ended it.
            let _live = OutputLock::acquire(&files["live"].0).unwrap();
            assert_eq!(
                seal_dead(&scope).await.unwrap().silent_soon,
                Some(SEALING_BY_ANOTHER)
            );
            let mut pipe = crate::distributed::client::Group::default();
            pipe.cmd("HSET")
                .arg(format!("{p}ended"))
                .arg("locked")
                .arg("sealed by other");
            redis.run(&pipe).await.unwrap();
            assert_eq!(seal_dead(&scope).await.unwrap().silent_soon, None);
        });
    }
}
