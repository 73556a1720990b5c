//! Consistent snapshots of a crawl, and resuming from them.
//!
//! A checkpoint is taken by the dispatcher, the one task that owns the frontier and is the
//! only writer of the seen-set, so what it captures is one consistent state: the output
//! flushed to a known length, the seen-set's bits, every URL still queued *or in flight*
//! (a URL in flight belongs to the frontier until its record is written), and the
//! counters. The invariant it keeps: every URL marked in the checkpoint's seen-set is
//! recorded in `pages.jsonl`, listed in the checkpoint's frontier, or in a queue log that a
//! resume from it replays.
//!
//! # The seen-set is not copied
//!
//! At 1e8 URLs the seen-set is 187.5 MiB; copying it in the pause costs 30–70 ms (and
//! 187.5 MiB more memory). Instead the file is streamed from the live set in the background
//! ([`SeenSet::save`]) while the crawl goes on, so it may hold bits of URLs accepted after
//! the snapshot instant (bits are only ever added; a URL caught half-written reads as absent).
//! Each such URL was accepted by the dispatcher, which appends it to the queue log of the new
//! checkpoint in the same step, before the next `await`. So the checkpoint is written in two
//! phases: `prepare` writes and fsyncs the files; then the dispatcher flushes the queue log
//! (every URL whose bit the file may hold is in it from then on), the log is fsynced, and only
//! then `publish` makes the checkpoint current. A resume replays that log: every URL with a
//! bit in the file is in the frontier again or recorded. A crash before `publish` leaves the
//! previous checkpoint current.
//!
//! Resuming keeps the complete records of `pages.jsonl` past the checkpoint's length (their
//! URLs are dropped from the queues, not fetched again) and cuts what follows the last one
//! it can trust (`replay`). What a resume fetches again: the pages in flight at the crash,
//! and the pages whose record was still inside the process (in the output channel, up to its
//! 4096 records, or the writer's buffer, handed to the OS after each burst) — not only what
//! was in flight. Nothing discovered is forgotten, and no page is recorded twice.
//!
//! # The counters come out exact
//! The manifest's counters are exactly those of the records before `pages_bytes` (a URL's
//! counts reach the counters in the dispatcher's step that sends its record: see
//! `crate::crawl::counters`); `replay` adds the `counts` each kept record carries, so the
//! pages fetched again count once, when they are. One case needs memory across resumes: a
//! page whose new links reached the queue log while its record was lost. Fetched again, it
//! finds those links seen; the manifest keeps such pages ([`Manifest::orphans`]) until they
//! are, so that those links are not counted a second time as seen. The manifest also keeps
//! the crawl's runs and the seconds they crawled, a killed run's up to its last record.
//!
//! Layout under `OUT/checkpoint/`:
//! - `ckpt-<seq>/seen.bin`: the seen-set file (format in [`crate::seen`]);
//! - `ckpt-<seq>/hosts.bin`: per-host tallies (format in [`crate::frontier`]);
//! - `ckpt-<seq>/admitted.json`: with `[seen] exact`, the runs of the exact admitted set that
//!   make its state at this checkpoint (written right after `seen.bin`, under the same
//!   invariant; the runs live in `OUT/state/admitted/`, see [`crate::state_store`]);
//! - `manifest.json`: what the current checkpoint is: the counters, the length of
//!   `pages.jsonl`, the seen-set's parameters (m, k, hash seed) and the checksum trailer of
//!   its file, and the frontier's [`SavedFrontier`]: the position of the disk queues in
//!   `OUT/frontier/queues/` (their table file carries its own checksum), the length and
//!   xxh3-64 of `hosts.bin`. So a file damaged in place fails its own checksum, and one
//!   rewritten whole with a valid checksum (another seed, other bits) fails the manifest's;
//! - `seeds.txt`: the crawl's seed list, written when it starts, so that `--resume` needs no
//!   `--seeds` ([`seeds_path`]);
//! - `manifest.prev.json`: the previous checkpoint's manifest, kept with its directory (the
//!   queue store keeps the tables of its last two syncs, which are these two checkpoints).
//!
//! The frontier itself is not copied: its queues already live on disk, and a checkpoint
//! records where they stand ([`crate::frontier::Frontier::begin_checkpoint`]): the store
//! writes the newest URLs of each host as blocks and encodes its table (every host's head,
//! tail and count, with the in-flight URLs at the front), so the pause grows with the number
//! of hosts, not of queued URLs, and the table is written in the background with the rest.
//!
//! Publishing is a manifest swap: the new directory is written and fsynced first, then the
//! current manifest becomes `manifest.prev.json` and the new one is renamed into place
//! (rename is atomic), then the directory is fsynced and checkpoints older than the
//! previous one are deleted. A crash at any instant leaves a whole current checkpoint, or
//! a whole previous one. The previous one kept is always the one the crawl knows to be good
//! (resumed from, or last published): after a resume that fell back to `manifest.prev.json`,
//! the damaged current manifest is replaced and never moved over the good one (`publish`). Loading checks everything before using anything, and falls back
//! to the previous checkpoint, saying why, when the current one is damaged.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::durable::{self, At, IoAt};
use crate::frontier::{FrontierSnapshot, QueuedUrl, SavedFrontier, SavedHosts};
use crate::seen::{SeenError, SeenSet};

/// Version of the manifest and frontier file format written.
///
/// 4: records carry their `counts` (a resume adds those past the checkpoint, so its
/// counters come out exact) and the manifest the crawl's runs and time. Version 3 is still
/// read (same files): its records past the checkpoint are counted by what their fields say,
/// as that version did, and its runs' time is unknown; the crawler says so on resume.
pub const FORMAT_VERSION: u32 = 4;

/// Versions of the format this crawler resumes from.
pub const READS_VERSIONS: [u32; 2] = [3, 4];

/// What a checkpoint holds, apart from its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub seq: u64,
    pub created_at: String,
    /// The crawl reached its end (nothing queued, nothing in flight).
    pub finished: bool,
    /// Bytes and records of `pages.jsonl` covered by this checkpoint.
    pub pages_bytes: u64,
    pub pages_records: u64,
    /// Where the frontier stood (set when the checkpoint is written).
    pub frontier: Option<SavedFrontier>,
    /// What must match on resume.
    pub max_urls: u64,
    pub seen_m_bits: u64,
    pub seen_k: u32,
    /// The seen-set's hash seed: a filter read with another seed answers for other URLs.
    pub seen_seed: u32,
    /// The XXH3-64 trailer of `seen.bin` as written (set when the checkpoint is written): a
    /// file rewritten whole, its own checksum recomputed, is not this checkpoint's.
    pub seen_xxh3: u64,
    pub seeds_xxh3: u64,
    pub seeds: u64,
    /// The crawl's counters at the checkpoint: exactly those of the records it covers, plus
    /// the figures of the runs that are no URL's (see `crate::crawl::counters`).
    pub counters: BTreeMap<String, u64>,
    /// Runs of the crawl so far, the one that wrote this checkpoint included (absent in
    /// format 3: 0).
    #[serde(default)]
    pub runs: u64,
    /// Seconds the crawl's runs have spent crawling, up to this checkpoint (absent in format
    /// 3: 0).
    #[serde(default)]
    pub crawl_secs: f64,
    /// Pages whose new links a lost record had queued, not fetched again yet, with how many
    /// (see `Loaded::orphans`): kept from resume to resume until each is fetched.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub orphans: BTreeMap<String, u64>,
}

/// Why a checkpoint could not be written or used. Each names the file and the problem; an
/// I/O error's cause is its [`source`](std::error::Error::source), not part of its message.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("seen.exact: the admitted set")]
    Admitted(#[from] crate::state_store::StateStoreError),
    /// I/O on the checkpoint's files.
    #[error(transparent)]
    File(#[from] IoAt),
    /// I/O the crawl met while driving a checkpoint (a background task that failed, the
    /// queue log's fsync), named by its path only.
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The queue log could not be written. The crawl stops rather than go on with a URL
    /// that is in neither the checkpoint nor the log (a crash would forget it); the last
    /// checkpoint is intact.
    #[error("{}: cannot append to the queue log; the crawl stopped, its last checkpoint intact", path.display())]
    QueueLog {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a checkpoint manifest: {message}")]
    BadManifest { path: PathBuf, message: String },
    #[error("{path}: checkpoint format version {found}, this crawler reads versions 3 and 4; resume it with the crawler that wrote it, or start again with --fresh")]
    UnsupportedVersion { path: PathBuf, found: u32 },
    #[error("{path}: {what}")]
    Corrupt { path: PathBuf, what: String },
    #[error(transparent)]
    Seen(#[from] SeenError),
    #[error(transparent)]
    Frontier(#[from] crate::frontier::FrontierError),
    #[error("{dir}: no checkpoint to resume from")]
    Missing { dir: PathBuf },
    #[error("{}: the latest checkpoint is damaged ({latest}), and the previous checkpoint is not usable either ({previous}); the crawl cannot resume: start it again with --fresh", dir.display())]
    NoneUsable {
        dir: PathBuf,
        latest: String,
        previous: String,
    },
    #[error("--resume: this crawl is not the one checkpointed in {dir}: {differences}; use the same seeds and sizing, or --fresh to start again")]
    Incompatible { dir: PathBuf, differences: String },
    #[error("{path}: {found} bytes, shorter than the {expected} bytes the checkpoint covers; the output was damaged")]
    OutputTooShort {
        path: PathBuf,
        found: u64,
        expected: u64,
    },
}

/// What a resumed crawl must agree on with its checkpoint.
pub(crate) struct Expectation {
    pub(crate) max_urls: u64,
    pub(crate) seen_m_bits: u64,
    pub(crate) seen_k: u32,
    pub(crate) seen_seed: u32,
    pub(crate) seeds_xxh3: u64,
    pub(crate) seeds: u64,
}

impl Manifest {
    /// Says what differs between this checkpoint and the crawl about to resume it.
    pub(crate) fn check_compatible(
        &self,
        out: &Path,
        now: &Expectation,
    ) -> Result<(), CheckpointError> {
        let mut differences = Vec::new();
        // A crawl can be extended (its seen-set keeps its size, and its fpp grows), not shrunk
        // below what it may already have taken on.
        if now.max_urls < self.max_urls {
            differences.push(format!(
                "max_urls was {}, now {}: a crawl can be extended, not shrunk",
                self.max_urls, now.max_urls
            ));
        }
        if (self.seen_m_bits, self.seen_k) != (now.seen_m_bits, now.seen_k) {
            differences.push(format!(
                "seen-set was m = {} bits, k = {}; the configuration now gives m = {}, k = {} ([seen] fpp/memory changed)",
                self.seen_m_bits, self.seen_k, now.seen_m_bits, now.seen_k
            ));
        }
        if self.seen_seed != now.seen_seed {
            differences.push(format!(
                "the seen-set's hash seed was {}, this crawler uses {}",
                self.seen_seed, now.seen_seed
            ));
        }
        if self.seeds_xxh3 != now.seeds_xxh3 {
            differences.push(format!(
                "the seed list differs ({} seeds then, {} now)",
                self.seeds, now.seeds
            ));
        }
        if differences.is_empty() {
            Ok(())
        } else {
            Err(CheckpointError::Incompatible {
                dir: out.to_path_buf(),
                differences: differences.join("; "),
            })
        }
    }
}

/// Cuts `pages.jsonl` back to what the checkpoint covers; records written after it
/// belong to URLs the checkpoint still lists in its frontier.
pub(crate) fn truncate_output(out: &Path, keep: u64) -> Result<(), CheckpointError> {
    let path = crate::output::journal_path(out);
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .at("open", &path)?;
    let length = file.metadata().at("read metadata of", &path)?.len();
    if length < keep {
        return Err(CheckpointError::OutputTooShort {
            path,
            found: length,
            expected: keep,
        });
    }
    file.set_len(keep).at("truncate", &path)?;
    file.sync_all().at("fsync", &path)?;
    Ok(())
}

/// Removes a checkpoint directory (for `--fresh`).
pub fn remove(out: &Path) -> Result<(), CheckpointError> {
    let dir = checkpoint_dir(out);
    match fs::remove_dir_all(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        removed => Ok(removed.at("remove", &dir)?),
    }
}

/// The state a checkpoint captures: the frontier's part taken in the pause, the seen-set
/// streamed from the live set (see the module doc).
pub struct Snapshot {
    pub seen: std::sync::Arc<SeenSet>,
    pub frontier: FrontierSnapshot,
    pub manifest: Manifest,
}

/// A checkpoint whose files are written and fsynced, not yet published.
pub(crate) struct Prepared {
    root: PathBuf,
    manifest: Manifest,
}

/// A checkpoint read back and checked.
pub struct Loaded {
    pub manifest: Manifest,
    /// The seen-set, with the URLs of the queue log replayed into it.
    pub seen: SeenSet,
    /// Where its frontier stood, with its host tallies (checked): see
    /// [`crate::frontier::Frontier::resume`].
    pub frontier: SavedFrontier,
    pub hosts: SavedHosts,
    /// URLs queued after the checkpoint (from the queue log) and not recorded since.
    pub queued_after: Vec<QueuedUrl>,
    /// URLs queued after the checkpoint and recorded since: no longer queued, but counted
    /// for their host (`max_pages_per_host`) with [`crate::frontier::Frontier::count_queued`].
    pub(crate) recorded_from_log: Vec<String>,
    /// Hashes (`crate::frontier::url_hash`) of URLs recorded after the checkpoint that
    /// were queued before it: still in the frontier's store, to be dropped when popped.
    pub recorded_after: Vec<u64>,
    /// Set when the current checkpoint was damaged and the previous one was used.
    pub fell_back: Option<String>,
    /// Damage found in what is replayed after the checkpoint, each naming the file, the line
    /// and what it costs (see `replay`).
    pub damage: Vec<String>,
    /// Where `pages.jsonl` resumes: the end of its last complete record.
    pub output: crate::output::OutputPosition,
    /// The checkpoint's counters brought up to date with what was replayed.
    pub(crate) counters: BTreeMap<String, u64>,
    /// URLs replayed from the queue log, and records found after the checkpoint.
    pub replayed_urls: u64,
    pub replayed_records: u64,
    /// Pages whose new links are in the queue logs but whose record is not in
    /// `pages.jsonl` (lost in the crash, or cut): fetched again, they find those links
    /// seen. By page URL, how many links the logs hold for it.
    pub(crate) orphans: BTreeMap<String, u64>,
    /// Seconds the crashed run crawled after the checkpoint, as far as its records tell
    /// (the last one kept, after the checkpoint's time).
    pub crawled_after_secs: f64,
}

/// The checkpoint directory of an output directory.
pub fn checkpoint_dir(out: &Path) -> PathBuf {
    out.join("checkpoint")
}

/// `prepare` then `publish`, for a caller without a queue log (benchmarks): nothing is
/// accepted into its seen-set while this runs, or what is must not need to survive a crash.
pub fn write(out: &Path, snapshot: Snapshot) -> Result<Manifest, CheckpointError> {
    publish(prepare(out, snapshot)?, None)
}

/// Writes a checkpoint's files under `out/checkpoint/ckpt-<seq>/`, fsynced, without making
/// it current: see the module doc for what must happen before [`publish`].
pub(crate) fn prepare(out: &Path, snapshot: Snapshot) -> Result<Prepared, CheckpointError> {
    let root = checkpoint_dir(out);
    let Snapshot {
        seen,
        frontier,
        mut manifest,
    } = snapshot;
    let dir = root.join(format!("ckpt-{}", manifest.seq));
    fs::create_dir_all(&dir).at("create", &dir)?;
    let seen_path = dir.join("seen.bin");
    seen.save(&seen_path)?;
    if let Some(admitted) = seen.exact() {
        // After the filter's file, with the same invariant: everything admitted before the
        // snapshot, and perhaps some after it, which the queue log records.
        admitted.persist(&dir)?;
    }
    manifest.seen_seed = seen.plan().seed;
    manifest.seen_xxh3 = file_trailer(&seen_path)?;
    manifest.frontier = Some(frontier.write(&dir)?);
    durable::sync_dir(&dir)?;
    Ok(Prepared { root, manifest })
}

/// The last 8 bytes of a file, little-endian: the checksum trailer of the seen-set file.
fn file_trailer(path: &Path) -> Result<u64, CheckpointError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path).at("open", path)?;
    file.seek(SeekFrom::End(-8)).at("seek in", path)?;
    let mut trailer = [0u8; 8];
    file.read_exact(&mut trailer).at("read", path)?;
    Ok(u64::from_le_bytes(trailer))
}

/// Makes a prepared checkpoint the current one (manifest swap), keeps the previous one and
/// deletes older checkpoints and queue logs.
///
/// `good` is the checkpoint the crawl knows to be usable: the one it resumed from, then the
/// last one it published (`None`: whatever `manifest.json` names). It is the one kept as the
/// previous checkpoint. When `manifest.json` names another (the crawl resumed from
/// `manifest.prev.json` because the current checkpoint was damaged), the damaged one is
/// replaced and `manifest.prev.json` is left alone: moving the damaged manifest over it, or
/// deleting its directory, would leave no usable checkpoint at all if the crawl crashed
/// before the new manifest was in place.
pub(crate) fn publish(prepared: Prepared, good: Option<u64>) -> Result<Manifest, CheckpointError> {
    fault::crash_at("prepared");
    let Prepared { root, manifest } = prepared;

    let current = root.join("manifest.json");
    let previous = root.join("manifest.prev.json");
    let tmp = root.join("manifest.json.tmp");
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(std::io::Error::other)
        .at("encode", &current)?;
    let mut staged = durable::Staged::create(&current, tmp)?;
    staged.write_all(&json)?;
    let synced = staged.sync()?;
    let current_seq = read_manifest(&current).ok().map(|m| m.seq);
    let kept = match (current_seq, good) {
        (Some(seq), None) => Some(seq),
        (Some(seq), Some(good)) if seq == good => Some(good),
        // The current manifest is not the good one: manifest.prev.json is; it stays.
        (_, good) => good,
    };
    if current_seq.is_some() && current_seq == kept {
        fs::rename(&current, &previous).at("rename to", &previous)?;
    }
    fault::crash_at("manifest-moved");
    // The rename into place, then the fsync of the directory: both renames are durable.
    synced.install()?;
    // Keep the current and the previous checkpoint; older ones are garbage.
    let keep: Vec<String> = [Some(manifest.seq), kept]
        .into_iter()
        .flatten()
        .map(|seq| format!("ckpt-{seq}"))
        .collect();
    let oldest_kept = kept.map_or(manifest.seq, |seq| seq.min(manifest.seq));
    if let Ok(entries) = fs::read_dir(&root) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("ckpt-") && !keep.contains(&name) {
                let _ = fs::remove_dir_all(entry.path());
            }
            // Queue logs older than the oldest kept checkpoint are never replayed.
            let log_seq = name
                .strip_prefix("queued-")
                .and_then(|r| r.strip_suffix(".jsonl"))
                .and_then(|n| n.parse::<u64>().ok());
            if log_seq.is_some_and(|seq| seq < oldest_kept) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    Ok(manifest)
}

/// Reads a manifest file and checks its version.
pub(crate) fn read_manifest(path: &Path) -> Result<Manifest, CheckpointError> {
    let bytes = fs::read(path).at("read", path)?;
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| CheckpointError::BadManifest {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    if !READS_VERSIONS.contains(&manifest.format_version) {
        return Err(CheckpointError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: manifest.format_version,
        });
    }
    Ok(manifest)
}

/// The current manifest of `out`, if a checkpoint exists there (not checked further).
pub fn current_manifest(out: &Path) -> Option<Result<Manifest, CheckpointError>> {
    let path = checkpoint_dir(out).join("manifest.json");
    path.exists().then(|| read_manifest(&path))
}

/// Loads the newest whole checkpoint of `out`: the current one, or the previous one when
/// the current one is damaged (the reason is kept in [`Loaded::fell_back`]).
pub fn load(out: &Path) -> Result<Loaded, CheckpointError> {
    let root = checkpoint_dir(out);
    let current = root.join("manifest.json");
    let previous = root.join("manifest.prev.json");
    if !current.exists() && !previous.exists() {
        return Err(CheckpointError::Missing {
            dir: out.to_path_buf(),
        });
    }
    match load_from(&root, &current) {
        Ok(loaded) => Ok(loaded),
        Err(error) if previous.exists() => {
            let mut loaded =
                load_from(&root, &previous).map_err(|previous| CheckpointError::NoneUsable {
                    dir: root.clone(),
                    latest: with_causes(&error),
                    previous: with_causes(&previous),
                })?;
            loaded.fell_back = Some(with_causes(&error));
            Ok(loaded)
        }
        Err(error) => Err(error),
    }
}

/// `error`'s message followed by its causes, for a message that stands alone (it is not
/// the source of the error returned).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn load_from(root: &Path, manifest_path: &Path) -> Result<Loaded, CheckpointError> {
    let manifest = read_manifest(manifest_path)?;
    let dir = root.join(format!("ckpt-{}", manifest.seq));
    let seen_path = dir.join("seen.bin");
    let seen = SeenSet::load(&seen_path)?;
    // The file checked its own checksum; this checks it is the file this checkpoint wrote.
    let trailer = file_trailer(&seen_path)?;
    if trailer != manifest.seen_xxh3 || seen.plan().seed != manifest.seen_seed {
        return Err(CheckpointError::Corrupt {
            path: seen_path,
            what: format!(
                "checksum {trailer:016x} and hash seed {}, the manifest recorded {:016x} and {}: not the file this checkpoint wrote",
                seen.plan().seed,
                manifest.seen_xxh3,
                manifest.seen_seed
            ),
        });
    }
    if seen.plan().m_bits != manifest.seen_m_bits || seen.plan().k != manifest.seen_k {
        return Err(CheckpointError::Corrupt {
            path: dir.join("seen.bin"),
            what: format!(
                "filter is m = {}, k = {} but the manifest says m = {}, k = {}",
                seen.plan().m_bits,
                seen.plan().k,
                manifest.seen_m_bits,
                manifest.seen_k
            ),
        });
    }
    let Some(frontier) = manifest.frontier else {
        return Err(CheckpointError::BadManifest {
            path: manifest_path.to_path_buf(),
            message: "no frontier position".into(),
        });
    };
    let out = root.parent().unwrap_or(root);
    let hosts = frontier.check(&dir, &out.join("frontier"))?;
    let counters = manifest.counters.clone();
    let output = crate::output::OutputPosition {
        bytes: manifest.pages_bytes,
        records: manifest.pages_records,
    };
    let mut loaded = Loaded {
        manifest,
        seen,
        frontier,
        hosts,
        queued_after: Vec::new(),
        recorded_from_log: Vec::new(),
        recorded_after: Vec::new(),
        fell_back: None,
        damage: Vec::new(),
        output,
        counters,
        replayed_urls: 0,
        replayed_records: 0,
        orphans: BTreeMap::new(),
        crawled_after_secs: 0.0,
    };
    replay(root, &mut loaded)?;
    Ok(loaded)
}

/// The highest checkpoint sequence number used under `out`, published or not (`ckpt-N`
/// directories and `queued-N` logs). A resumed crawl numbers its checkpoints after it, so
/// that it never overwrites the queue log of a checkpoint an earlier run began but did not
/// publish: that log holds URLs a resume from an older checkpoint must still replay.
pub(crate) fn highest_seq(out: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(checkpoint_dir(out)) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let number = match name.strip_prefix("queued-") {
                Some(rest) => rest.strip_suffix(".jsonl")?.to_string(),
                None => name.strip_prefix("ckpt-")?.to_string(),
            };
            number.parse::<u64>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// The queue log of the checkpoint with sequence number `seq`: URLs accepted after it.
pub fn queue_log_path(out: &Path, seq: u64) -> PathBuf {
    checkpoint_dir(out).join(format!("queued-{seq}.jsonl"))
}

/// The log of URLs accepted since the last checkpoint. Together with the records written
/// to `pages.jsonl` since then, it lets a crawl killed between checkpoints resume without
/// forgetting a discovered URL: a page's new links are appended here (and handed to the
/// OS) before the page's own record is sent to the output.
pub(crate) struct QueueLog {
    path: PathBuf,
    file: BufWriter<File>,
    line: Vec<u8>,
}

impl QueueLog {
    /// Starts the log that follows checkpoint `seq`.
    pub(crate) fn create(out: &Path, seq: u64) -> Result<QueueLog, CheckpointError> {
        let path = queue_log_path(out, seq);
        let root = checkpoint_dir(out);
        fs::create_dir_all(&root).at("create", &root)?;
        let file = File::create(&path).at("create", &path)?;
        Ok(QueueLog {
            path,
            file: BufWriter::with_capacity(1 << 16, file),
            line: Vec::with_capacity(256),
        })
    }

    pub(crate) fn append(&mut self, item: &QueuedUrl) -> Result<(), CheckpointError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, item)
            .map_err(std::io::Error::other)
            .at("encode a URL for", &self.path)?;
        self.line.push(b'\n');
        let written = if fault::hit("queue-log") {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        } else {
            self.file.write_all(&self.line)
        };
        written.map_err(|source| self.failed(source))
    }

    /// Hands what was appended to the OS (enough to survive `kill -9`).
    pub(crate) fn flush(&mut self) -> Result<(), CheckpointError> {
        self.file.flush().map_err(|source| self.failed(source))
    }

    fn failed(&self, source: std::io::Error) -> CheckpointError {
        CheckpointError::QueueLog {
            path: self.path.clone(),
            source,
        }
    }

    /// Flushes, and returns a handle on the file with its path, to fsync it on another
    /// thread before a checkpoint is published.
    pub(crate) fn flushed_file(&mut self) -> Result<(PathBuf, File), CheckpointError> {
        self.flush()?;
        let file = self.file.get_ref().try_clone().at("open", &self.path)?;
        Ok((self.path.clone(), file))
    }
}

/// Replays what happened after `loaded`'s checkpoint: the queue logs of it and of any
/// later checkpoint that was never published, and the complete records of `pages.jsonl`
/// past the checkpoint's length.
///
/// What a crash can leave, and what damage costs (each damage is named in
/// [`Loaded::damage`]):
/// - a torn last line (the crash itself): cut, silently;
/// - a bad line elsewhere in a queue log: skipped, the lines after it used. Stopping there
///   would forget every URL after it; falling back would not help, since the previous
///   checkpoint replays the same logs. The page that found the skipped URL is fetched again
///   (its record no longer matches the log, below), so the URL is found again unless its bit
///   reached the checkpoint's seen-set file while that was written;
/// - a bad line in `pages.jsonl` past the checkpoint: the output is cut there, and the pages
///   recorded after it are fetched again (each is queued at the checkpoint or in its logs);
/// - a record past the checkpoint whose page's new links are not all in the queue logs
///   (`new_links` counts them; a power loss can keep the record and lose the log's tail): not
///   trusted, the output is cut there too and the page fetched again, so none of its links
///   is lost. After `kill -9` this never happens: the links reach the OS before the record.
fn replay(root: &Path, loaded: &mut Loaded) -> Result<(), CheckpointError> {
    let out = root.parent().unwrap_or(root);
    let mut logs: Vec<(u64, PathBuf)> = Vec::new();
    if let Ok(entries) = fs::read_dir(root) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(seq) = name
                .strip_prefix("queued-")
                .and_then(|r| r.strip_suffix(".jsonl"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                if seq >= loaded.manifest.seq {
                    logs.push((seq, entry.path()));
                }
            }
        }
    }
    logs.sort();
    let mut queued: Vec<QueuedUrl> = Vec::new();
    for (_, path) in &logs {
        let lines = read_lines::<QueuedUrl>(path, 0, AtDamage::Skip)?;
        queued.extend(lines.values);
        loaded.damage.extend(lines.damage);
    }
    let pages = crate::output::journal_path(out);
    let from = loaded.manifest.pages_bytes;
    let (mut records, mut ends, mut end) = (Vec::new(), Vec::new(), from);
    if pages.exists() {
        let lines = read_lines::<crate::output::PageRecord>(&pages, from, AtDamage::Stop)?;
        (records, ends, end) = (lines.values, lines.ends, lines.end);
        loaded.damage.extend(lines.damage);
    }
    // Each record's links must be in the logs (see above): cut at the first that is short.
    let mut logged_children: std::collections::HashMap<&str, u64> =
        std::collections::HashMap::new();
    for item in &queued {
        if let Some(parent) = &item.parent {
            *logged_children.entry(&**parent).or_insert(0) += 1;
        }
    }
    let short = records
        .iter()
        .position(|r| r.new_links > logged_children.get(r.url.as_str()).copied().unwrap_or(0));
    if let Some(at) = short {
        let r = &records[at];
        let start = if at == 0 { from } else { ends[at - 1] };
        loaded.damage.push(format!(
            "{}: the record of {} at byte {start} counts {} new links and the queue logs hold {} (the logs lost their end, as a power loss can do); the output is cut there and {} pages are fetched again",
            pages.display(),
            r.url,
            r.new_links,
            logged_children.get(r.url.as_str()).copied().unwrap_or(0),
            records.len() - at
        ));
        records.truncate(at);
        ends.truncate(at);
        end = start;
    }
    // robots.txt lines (written with the archive on) are fetches, not accepted URLs.
    let done: std::collections::HashSet<&str> = records
        .iter()
        .filter(|r| r.kind.is_page())
        .map(|r| r.url.as_str())
        .collect();
    // The checkpoint's own (not fetched again since an earlier crash), then this crash's.
    loaded.orphans = loaded.manifest.orphans.clone();
    for (parent, n) in logged_children {
        if !done.contains(parent) {
            *loaded.orphans.entry(parent.to_string()).or_insert(0) += n;
        }
    }
    for url in &done {
        loaded.orphans.remove(*url);
    }
    for item in &queued {
        loaded.seen.insert_new(item.url.as_bytes());
    }
    let logged: std::collections::HashSet<&str> = queued.iter().map(|q| q.url.as_str()).collect();
    loaded.recorded_after = done
        .iter()
        .filter(|url| !logged.contains(*url))
        .map(|url| crate::frontier::url_hash(url))
        .collect();
    drop(logged);
    loaded.replayed_urls = queued.len() as u64;
    let (recorded, queued): (Vec<QueuedUrl>, Vec<QueuedUrl>) = queued
        .into_iter()
        .partition(|item| done.contains(item.url.as_str()));
    loaded.queued_after = queued;
    loaded.recorded_from_log = recorded.into_iter().map(|item| item.url).collect();
    loaded.replayed_records = records.iter().filter(|r| r.kind.is_page()).count() as u64;
    loaded.output = crate::output::OutputPosition {
        bytes: end,
        records: loaded.manifest.pages_records + records.len() as u64,
    };
    loaded.crawled_after_secs = crawled_after(&loaded.manifest.created_at, &records);
    let legacy = loaded.manifest.format_version < 4;
    let counters = &mut loaded.counters;
    let mut bump = |name: &str, n: u64| *counters.entry(name.to_string()).or_insert(0) += n;
    bump("accepted", loaded.replayed_urls);
    bump("finished", loaded.replayed_records);
    for r in &records {
        if legacy {
            legacy_counts(r, &mut bump);
            continue;
        }
        for (name, n) in r.counts.nonzero() {
            bump(&name, n);
        }
    }
    Ok(())
}

/// Seconds from the checkpoint's time to the last of `records` (0 if none is later).
fn crawled_after(checkpoint_at: &str, records: &[crate::output::PageRecord]) -> f64 {
    let Ok(from) = humantime::parse_rfc3339(checkpoint_at) else {
        return 0.0;
    };
    records
        .iter()
        .filter_map(|r| humantime::parse_rfc3339(&r.fetched_at).ok())
        .filter_map(|at| at.duration_since(from).ok())
        .map(|after| after.as_secs_f64())
        .fold(0.0, f64::max)
}

/// What a record written by a format-3 crawler (no `counts`) tells of the counters: its
/// response class, bytes and archive records; the fate of its links is not known.
fn legacy_counts(r: &crate::output::PageRecord, bump: &mut impl FnMut(&str, u64)) {
    if let Some(location) = &r.warc {
        // The archive's figures that a line can tell: its two records, and a revisit.
        bump("warc_records", 2);
        if location.record == "revisit" {
            bump("warc_revisits", 1);
        }
    }
    if !r.kind.is_page() {
        return;
    }
    bump("bytes", r.bytes);
    let class = match (r.status, r.error.is_some()) {
        (Some(s), _) if (200..300).contains(&s) => "ok",
        (Some(s), _) if (300..400).contains(&s) => "redirects",
        (Some(s), _) if (400..500).contains(&s) && s != 429 => "client_errors",
        (Some(_), _) => "server_errors",
        (None, true) if r.attempts == 0 => "disallowed",
        (None, _) => "network_errors",
    };
    bump(class, 1);
}

/// What [`read_lines`] does with a bad line that is not the torn end of a crash.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AtDamage {
    /// Skip it and read on (a queue log: the lines after it are URLs to keep).
    Skip,
    /// Stop there (`pages.jsonl`: what follows is cut and fetched again).
    Stop,
}

/// JSON lines read from a byte offset.
struct Lines<T> {
    values: Vec<T>,
    /// The offset just past each value's line.
    ends: Vec<u64>,
    /// The offset just past the last line used.
    end: u64,
    /// The bad lines, named with their file, line and what they cost.
    damage: Vec<String>,
}

/// Reads JSON lines from byte `from` of `path`. An unparsable final line without its newline
/// is the torn end of a crash and is left out; any other bad line is damage, skipped or
/// stopped at as `at_damage` says.
fn read_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
    from: u64,
    at_damage: AtDamage,
) -> Result<Lines<T>, CheckpointError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = File::open(path).at("open", path)?;
    let length = file.metadata().at("read metadata of", path)?.len();
    if length < from {
        return Err(CheckpointError::OutputTooShort {
            path: path.to_path_buf(),
            found: length,
            expected: from,
        });
    }
    file.seek(SeekFrom::Start(from)).at("seek in", path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).at("read", path)?;
    let mut lines = Lines {
        values: Vec::new(),
        ends: Vec::new(),
        end: from,
        damage: Vec::new(),
    };
    let mut offset = 0usize;
    let mut number = 0usize;
    while offset < bytes.len() {
        number += 1;
        let Some(newline) = bytes[offset..].iter().position(|&b| b == b'\n') else {
            break; // torn last line: cut
        };
        let line = &bytes[offset..offset + newline];
        let start = from + offset as u64;
        offset += newline + 1;
        match serde_json::from_slice::<T>(line) {
            Ok(value) => {
                lines.values.push(value);
                lines.ends.push(from + offset as u64);
                lines.end = from + offset as u64;
            }
            Err(e) if at_damage == AtDamage::Skip => {
                lines.damage.push(format!(
                    "{}: line {number} (byte {start}) is damaged ({e}) and was skipped",
                    path.display()
                ));
                lines.end = from + offset as u64;
            }
            Err(e) => {
                lines.damage.push(format!(
                    "{}: line {number} after byte {from} (byte {start}) is damaged ({e}); the file is cut there and the pages recorded from there on are fetched again",
                    path.display()
                ));
                break;
            }
        }
    }
    Ok(lines)
}

/// Fault injection for the crash tests (`tests/e2e/`), through the environment:
/// `CRAWLER_FAULT=<point>[:<n>]` (the crawl's one fault switch; see also
/// `crate::crawl::faults` for its panic points) makes the crawl fail at `<point>` the `n`-th time it gets
/// there (the first by default) and every time after. Only debug builds read it (a release
/// build has no such switch); unset, each point costs one read of a cached value. It exists
/// because the instants that matter (a crash between two steps of a checkpoint, a full disk)
/// cannot be hit reliably from outside. The points:
///
/// - `prepared`: a checkpoint's files are written and fsynced, it is not published: the
///   process kills itself (`SIGKILL`, as `kill -9` would);
/// - `manifest-moved`: publishing, the current manifest is moved aside (renamed to
///   `manifest.prev.json`, when it is the one to keep) and the new one is not in place yet:
///   the process kills itself;
/// - `queue-log`: appending an accepted URL to the queue log fails with `ENOSPC`, as on a
///   full disk;
/// - `pages`: writing a record to `pages.jsonl` fails with `ENOSPC` (the output writer stops);
/// - `links-logged`: a page's new links are in the queue log (handed to the OS) and its
///   record is not sent yet: the process kills itself, and the resume finds links whose
///   page has no record (see `Loaded::orphans`).
pub mod fault {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    /// The variable that names the point.
    pub const VARIABLE: &str = "CRAWLER_FAULT";

    /// The crash points this module reads (the crawl's panic points are its own).
    pub(crate) const POINTS: [&str; 5] = [
        "prepared",
        "manifest-moved",
        "queue-log",
        "pages",
        "links-logged",
    ];

    fn configured() -> Option<&'static (String, u64)> {
        static CONFIGURED: OnceLock<Option<(String, u64)>> = OnceLock::new();
        CONFIGURED
            .get_or_init(|| {
                if !cfg!(debug_assertions) {
                    return None;
                }
                let value = std::env::var(VARIABLE).ok()?;
                let (point, n) = match value.split_once(':') {
                    Some((point, n)) => (point.to_string(), n.parse().ok()?),
                    None => (value, 1),
                };
                Some((point, n))
            })
            .as_ref()
    }

    /// Whether the fault at `point` happens now (counting this visit).
    pub(crate) fn hit(point: &str) -> bool {
        static VISITS: AtomicU64 = AtomicU64::new(0);
        match configured() {
            Some((name, n)) if name == point => VISITS.fetch_add(1, Ordering::Relaxed) + 1 >= *n,
            _ => false,
        }
    }

    /// Kills the process at `point` if the fault is set there: a crash at a chosen instant.
    pub(crate) fn crash_at(point: &str) {
        if hit(point) {
            eprintln!("{VARIABLE}: killed at {point}");
            // SAFETY: kill(2) on our own pid with a valid signal number; SIGKILL does not
            // return, like a `kill -9` from outside.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

/// The seed list of the crawl checkpointed under `out`: written once when a crawl starts
/// fresh, so that `--resume` needs no `--seeds` (the manifest's `seeds_xxh3` still checks
/// it). One URL per line, as normalized then: its bytes are what `seeds_hash` hashes.
pub fn seeds_path(out: &Path) -> PathBuf {
    checkpoint_dir(out).join("seeds.txt")
}

/// Writes the seed list of a crawl starting fresh (see [`seeds_path`]).
pub(crate) fn save_seeds(out: &Path, seeds: &[url::Url]) -> Result<(), CheckpointError> {
    let root = checkpoint_dir(out);
    fs::create_dir_all(&root).at("create", &root)?;
    let mut text = String::new();
    for seed in seeds {
        text.push_str(seed.as_str());
        text.push('\n');
    }
    let path = seeds_path(out);
    durable::replace(&path, path.with_extension("tmp"), text.as_bytes())?;
    Ok(())
}

/// The seed list saved by `save_seeds`; `None` when there is none (a crawl checkpointed
/// by a crawler from before it was saved).
pub fn load_seeds(out: &Path) -> Result<Option<Vec<url::Url>>, CheckpointError> {
    let path = seeds_path(out);
    let text = match fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        read => read.at("read", &path)?,
    };
    let mut seeds = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let url = url::Url::parse(line).map_err(|e| CheckpointError::Corrupt {
            path: path.clone(),
            what: format!("line {}: not a URL ({e})", index + 1),
        })?;
        seeds.push(url);
    }
    Ok(Some(seeds))
}

/// The hash of a seed list, for checking that a resume uses the same seeds.
pub(crate) fn seeds_hash(seeds: &[url::Url]) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for seed in seeds {
        hasher.update(seed.as_str().as_bytes());
        hasher.update(b"\n");
    }
    hasher.digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest_of_version(version: u32) -> String {
        format!(
            r#"{{"format_version": {version}, "seq": 2, "created_at": "2026-11-26T05:00:00.000Z",
            "finished": false, "pages_bytes": 0, "pages_records": 0, "frontier": null,
            "max_urls": 10, "seen_m_bits": 512, "seen_k": 3, "seen_seed": 0, "seen_xxh3": 0,
            "seeds_xxh3": 0, "seeds": 1, "counters": {{"parsed": 4}}}}"#
        )
    }

    #[test]
    fn a_format_3_manifest_is_read_and_an_older_one_refused_with_the_versions_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        fs::write(&path, manifest_of_version(3)).unwrap();
        let manifest = read_manifest(&path).unwrap();
        assert_eq!((manifest.runs, manifest.crawl_secs), (0, 0.0));
        assert!(manifest.orphans.is_empty());
        assert_eq!(manifest.counters.get("parsed"), Some(&4));
        fs::write(&path, manifest_of_version(2)).unwrap();
        let e = read_manifest(&path).expect_err("refused");
        assert_eq!(
            e.to_string(),
            format!(
                "{}: checkpoint format version 2, this crawler reads versions 3 and 4; resume it with the crawler that wrote it, or start again with --fresh",
                path.display()
            )
        );
    }

    #[test]
    fn crawled_after_is_the_last_record_past_the_checkpoint() {
        let at = |t: &str| crate::output::PageRecord {
            fetched_at: t.to_string(),
            ..Default::default()
        };
        let records = [
            at("2026-11-26T05:00:02.500Z"),
            at("2026-11-26T05:00:04.250Z"),
            at("2026-11-26T04:59:59.000Z"),
            at("not a time"),
        ];
        let secs = crawled_after("2026-11-26T05:00:00.000Z", &records);
        assert!((secs - 4.25).abs() < 1e-9, "{secs}");
        assert_eq!(
            crawled_after("2026-11-26T05:00:00.000Z", &records[2..]),
            0.0
        );
        assert_eq!(crawled_after("garbage", &records), 0.0);
    }

    #[test]
    fn the_seed_list_reads_back_as_saved_and_hashes_alike() {
        let out = tempfile::tempdir().unwrap();
        assert!(load_seeds(out.path()).unwrap().is_none());
        let seeds: Vec<url::Url> = ["http://a.test/", "https://b.test/x?y=1"]
            .iter()
            .map(|s| url::Url::parse(s).unwrap())
            .collect();
        save_seeds(out.path(), &seeds).unwrap();
        let back = load_seeds(out.path()).unwrap().unwrap();
        assert_eq!(back, seeds);
        assert_eq!(seeds_hash(&back), seeds_hash(&seeds));
        fs::write(seeds_path(out.path()), "http://a.test/\nnot a url\n").unwrap();
        let e = load_seeds(out.path()).unwrap_err().to_string();
        assert!(
            e.ends_with("seeds.txt: line 2: not a URL (relative URL without a base)"),
            "{e}"
        );
    }

    #[test]
    fn highest_seq_counts_unpublished_checkpoints_and_logs() {
        let out = tempfile::tempdir().unwrap();
        assert_eq!(highest_seq(out.path()), 0);
        let root = checkpoint_dir(out.path());
        fs::create_dir_all(root.join("ckpt-3")).unwrap();
        fs::write(root.join("queued-7.jsonl"), b"").unwrap();
        fs::write(root.join("queued-x.jsonl"), b"").unwrap();
        fs::write(root.join("manifest.json"), b"{}").unwrap();
        assert_eq!(highest_seq(out.path()), 7);
        fs::create_dir_all(root.join("ckpt-12")).unwrap();
        assert_eq!(highest_seq(out.path()), 12);
    }
}
