//! The engine under both stores: a memtable in RAM, frozen memtables being written, and
//! immutable sorted runs on disk ([`super::run`]), merged in the background; a manifest
//! names the runs that make one durable state.
//!
//! Why this and not an embedded LSM crate: what the crawl stores is keyed by a uniform 64-bit
//! fingerprint and written in bursts by one writer, read in batches by several, and made
//! durable only at points the crawl chooses (its checkpoints): that is the sorted-runs
//! scheme of IRLbot's DRUM and Heritrix's disk fingerprint filter, without a write-ahead log
//! (the crawl's own journal, `pages.jsonl`, and queue logs are the log: what a manifest does
//! not cover is re-applied from them). A keys-only run costs exactly 8 bytes per URL plus
//! 1/32 of that in fence, which no general-purpose store with per-entry headers and block
//! trailers reaches; and the engine is ~600 lines, where fjall brings its own journal,
//! compaction threads and a dozen crates. What is given up: deletes (not needed: a URL's
//! state is replaced, never removed; a retired URL keeps a state that says so) and range
//! scans other than a whole pass in key order.
//!
//! # Guarantees
//! - **Reads see every write that returned**: a key is in the memtable, in a frozen memtable
//!   still being written, or in a run, at every instant (a run is swapped in under the same
//!   lock that drops its frozen memtable).
//! - **Newest wins**: a key written again is answered with its last value; merges keep it.
//! - **Durable points are whole**: [`Table::persist`] returns once every write made before it
//!   was called is in fsynced runs named by a fsynced manifest (written atomically); a crash
//!   leaves the previous manifest or the new one. A run named by one of the last
//!   [`KEEP_MANIFESTS`] manifests written (or the one opened) is not deleted.
//! - **Readers never wait for the disk while holding the lock**: lookups take the read lock
//!   for the memtable only; frozen memtables and runs are searched through `Arc`s taken under
//!   it. Writers hold the write lock to insert a batch, to freeze, or to swap runs.
//!
//! Merge policy: while two adjacent runs have the newer at least half the size of the older,
//! they are merged (a binary counter: at most log2(n / memtable) runs, each entry rewritten
//! about that many times; for 10^8 URLs at 10^6 per memtable, 7 runs and 7 writes). Merges
//! run on the writer thread between its jobs, one at a time, never while a job waits.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

use super::run::{Run, RunWriter};
use super::StateStoreError;
use crate::durable::At;

/// Manifests whose runs are kept (besides the live ones): a crawl keeps its current and
/// previous checkpoint, and one more covers a checkpoint prepared but never published.
pub(crate) const KEEP_MANIFESTS: usize = 3;

/// Fingerprints are uniform already: hashing them again only costs time. Also the hasher of
/// admission's map keyed by keyed-SipHash values (`crawl::admission`), for the same reason.
#[derive(Default, Clone, Copy)]
pub(crate) struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Build = BuildHasherDefault<FingerprintHasher>;

enum Memtable {
    Keys(HashSet<u64, Build>),
    Values(HashMap<u64, Box<[u8]>, Build>),
}

impl Memtable {
    fn new(values: bool) -> Memtable {
        if values {
            Memtable::Values(HashMap::default())
        } else {
            Memtable::Keys(HashSet::default())
        }
    }

    fn len(&self) -> usize {
        match self {
            Memtable::Keys(s) => s.len(),
            Memtable::Values(m) => m.len(),
        }
    }

    fn get(&self, key: u64) -> Option<&[u8]> {
        match self {
            Memtable::Keys(s) => s.contains(&key).then_some(&[][..]),
            Memtable::Values(m) => m.get(&key).map(|v| &v[..]),
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Memtable::Keys(s) => s.capacity() as u64 * 9,
            Memtable::Values(m) => {
                m.capacity() as u64 * 25 + m.values().map(|v| v.len() as u64).sum::<u64>()
            }
        }
    }
}

/// A memtable taken out of service until its run is in place: still a hash table (sorting
/// it is the writer thread's work, so that freezing under the lock is a pointer swap).
pub(crate) struct Frozen(Memtable);

impl Frozen {
    fn get(&self, key: u64) -> Option<&[u8]> {
        self.0.get(key)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn bytes(&self) -> u64 {
        self.0.bytes()
    }

    /// The entries in key order.
    fn sorted(&self) -> Vec<(u64, &[u8])> {
        let mut entries: Vec<(u64, &[u8])> = match &self.0 {
            Memtable::Keys(s) => s.iter().map(|&k| (k, &[][..])).collect(),
            Memtable::Values(m) => m.iter().map(|(&k, v)| (k, &v[..])).collect(),
        };
        entries.sort_unstable_by_key(|(k, _)| *k);
        entries
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (u64, &[u8])> + '_> {
        match &self.0 {
            Memtable::Keys(s) => Box::new(s.iter().map(|&k| (k, &[][..]))),
            Memtable::Values(m) => Box::new(m.iter().map(|(&k, v)| (k, &v[..]))),
        }
    }
}

struct TableState {
    memtable: Memtable,
    /// Newest first.
    frozen: Vec<Arc<Frozen>>,
    /// Newest first.
    runs: Vec<Arc<Run>>,
}

/// What a manifest says: the runs of one durable state, newest first, and how far into the
/// crawl's journal that state goes (`covers`, the caller's business).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct TableManifest {
    pub(crate) version: u32,
    pub(crate) runs: Vec<String>,
    pub(crate) covers: u64,
}

enum Job {
    Write(Arc<Frozen>),
    /// Merge until the policy is met, then answer.
    Compact(mpsc::Sender<Result<(), StateStoreError>>),
    Persist {
        frozen: Option<Arc<Frozen>>,
        manifest: PathBuf,
        covers: u64,
        done: mpsc::Sender<Result<(), StateStoreError>>,
    },
}

/// What the table and its writer thread share.
struct Shared {
    dir: PathBuf,
    values: bool,
    state: RwLock<TableState>,
    next_run: AtomicU64,
    /// The first error of the writer thread, reported by the next write or persist.
    failed: Mutex<Option<String>>,
    /// Runs named by the manifests kept (see [`KEEP_MANIFESTS`]).
    protected: Mutex<Vec<(PathBuf, Vec<String>)>>,
}

/// A table: see the module doc.
pub(crate) struct Table {
    shared: Arc<Shared>,
    flush_at: usize,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Figures of a table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    pub entries_in_memory: u64,
    pub runs: u64,
    /// Entries in runs (a key in two runs counts twice until they are merged).
    pub entries_on_disk: u64,
    pub bytes_on_disk: u64,
    /// RAM held besides the page cache: memtable estimate, frozen memtables, fence indexes.
    pub memory: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, TableState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, TableState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    fn new_run_path(&self) -> PathBuf {
        let id = self.next_run.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{id:010}.run"))
    }

    /// Writes a frozen memtable as a run and swaps it in for the frozen one.
    fn write_frozen(&self, frozen: &Arc<Frozen>) -> Result<(), StateStoreError> {
        let mut writer = RunWriter::create(&self.new_run_path(), self.values)?;
        for (k, v) in frozen.sorted() {
            writer.push(k, v)?;
        }
        let run = Arc::new(writer.finish()?);
        let mut state = self.write();
        state.frozen.retain(|f| !Arc::ptr_eq(f, frozen));
        state.runs.insert(0, run);
        Ok(())
    }

    /// Merges the newest two adjacent runs of which the newer is at least half the older;
    /// whether there were any.
    fn merge_step(&self) -> Result<bool, StateStoreError> {
        {
            let (newer, older) = {
                let state = self.read();
                // Adjacent runs only, so that newer still shadows older after the merge.
                match state
                    .runs
                    .windows(2)
                    .find(|pair| pair[0].len() * 2 >= pair[1].len())
                {
                    Some(pair) => (pair[0].clone(), pair[1].clone()),
                    None => return Ok(false),
                }
            };
            let mut writer = RunWriter::create(&self.new_run_path(), self.values)?;
            let (mut a, mut b) = (newer.iter().peekable(), older.iter().peekable());
            loop {
                let next = match (a.peek(), b.peek()) {
                    (None, None) => break,
                    (Some(_), None) => a.next(),
                    (None, Some(_)) => b.next(),
                    (Some(&(ka, _)), Some(&(kb, _))) => {
                        if ka == kb {
                            b.next();
                            a.next()
                        } else if ka < kb {
                            a.next()
                        } else {
                            b.next()
                        }
                    }
                };
                if let Some((k, v)) = next {
                    writer.push(k, v)?;
                }
            }
            let merged = Arc::new(writer.finish()?);
            {
                // Only this thread changes the list of runs, so the two are still side by
                // side: the merged run takes their place.
                let mut state = self.write();
                if let Some(at) = state.runs.iter().position(|r| Arc::ptr_eq(r, &newer)) {
                    state.runs[at] = merged;
                    state.runs.retain(|r| !Arc::ptr_eq(r, &older));
                }
            }
            self.collect_garbage(&[newer.path(), older.path()]);
        }
        Ok(true)
    }

    /// Deletes `candidates` unless live or named by a kept manifest.
    fn collect_garbage(&self, candidates: &[&Path]) {
        let live: HashSet<PathBuf> = self
            .read()
            .runs
            .iter()
            .map(|r| r.path().to_path_buf())
            .collect();
        let protected = lock(&self.protected);
        for path in candidates {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let kept = protected
                .iter()
                .any(|(_, runs)| name.as_ref().is_some_and(|n| runs.contains(n)));
            if !live.contains(*path) && !kept {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Writes the manifest of the runs now live.
    fn write_manifest(&self, path: &Path, covers: u64) -> Result<(), StateStoreError> {
        let runs: Vec<String> = self
            .read()
            .runs
            .iter()
            .filter_map(|r| {
                r.path()
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .collect();
        let manifest = TableManifest {
            version: 1,
            runs: runs.clone(),
            covers,
        };
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(std::io::Error::other)
            .at("encode", path)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).at("create", parent)?;
        }
        crate::durable::replace(path, path.with_extension("json.tmp"), &json)?;
        let dropped = {
            let mut protected = lock(&self.protected);
            protected.retain(|(p, _)| p != path);
            protected.push((path.to_path_buf(), runs));
            let excess = protected.len().saturating_sub(KEEP_MANIFESTS);
            protected.drain(..excess).collect::<Vec<_>>()
        };
        let candidates: Vec<PathBuf> = dropped
            .iter()
            .flat_map(|(_, runs)| runs.iter().map(|r| self.dir.join(r)))
            .collect();
        let refs: Vec<&Path> = candidates.iter().map(|p| p.as_path()).collect();
        self.collect_garbage(&refs);
        Ok(())
    }

    fn fail(&self, error: &StateStoreError) {
        let mut failed = lock(&self.failed);
        if failed.is_none() {
            *failed = Some(error.to_string());
        }
    }
}

/// The writer thread: jobs in order, and merges between them, one merge at a time and only
/// while no job waits (a checkpoint's persist never waits for more than the merge under way).
fn writer_loop(shared: Arc<Shared>, jobs: mpsc::Receiver<Job>) {
    let mut merge_due = false;
    loop {
        let job = if merge_due {
            match jobs.try_recv() {
                Ok(job) => job,
                Err(mpsc::TryRecvError::Empty) => {
                    merge_due = match shared.merge_step() {
                        Ok(merged) => merged,
                        Err(e) => {
                            tracing::warn!("state store: {e}");
                            shared.fail(&e);
                            false
                        }
                    };
                    continue;
                }
                // Closed: runs left unmerged are merged after the next open.
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        } else {
            match jobs.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        match job {
            Job::Write(frozen) => {
                if let Err(e) = shared.write_frozen(&frozen) {
                    tracing::warn!("state store: {e}");
                    shared.fail(&e);
                }
            }
            Job::Persist {
                frozen,
                manifest,
                covers,
                done,
            } => {
                let result = frozen
                    .map_or(Ok(()), |f| shared.write_frozen(&f))
                    .and_then(|()| shared.write_manifest(&manifest, covers));
                if let Err(e) = &result {
                    shared.fail(e);
                }
                let _ = done.send(result);
            }
            Job::Compact(done) => {
                let mut result = Ok(());
                loop {
                    match shared.merge_step() {
                        Ok(true) => continue,
                        Ok(false) => break,
                        Err(e) => {
                            shared.fail(&e);
                            result = Err(e);
                            break;
                        }
                    }
                }
                let _ = done.send(result);
            }
        }
        merge_due = true;
    }
}

impl Table {
    /// Opens the table whose runs are in `dir`, in the state `manifest` names (empty when
    /// `None`, or when the manifest does not exist). `also_keep` are manifests whose runs
    /// must not be deleted; any other run file in `dir` is garbage and removed. Returns the
    /// table and the manifest's `covers`.
    pub(crate) fn open(
        dir: &Path,
        values: bool,
        flush_at: usize,
        manifest: Option<&Path>,
        also_keep: &[PathBuf],
    ) -> Result<(Table, u64), StateStoreError> {
        std::fs::create_dir_all(dir).at("create", dir)?;
        let read_manifest =
            |path: &Path| -> Result<Option<TableManifest>, StateStoreError> {
                match std::fs::read(path) {
                    Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                        StateStoreError::Corrupt {
                            path: path.to_path_buf(),
                            what: format!("not a store manifest: {e}"),
                        }
                    }),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(source) => Err(crate::durable::IoAt {
                        action: "read",
                        path: path.to_path_buf(),
                        source,
                    }
                    .into()),
                }
            };
        let opened = match manifest {
            Some(path) => read_manifest(path)?.map(|m| (path.to_path_buf(), m)),
            None => None,
        };
        let mut protected = Vec::new();
        for path in also_keep {
            if let Ok(Some(m)) = read_manifest(path) {
                protected.push((path.clone(), m.runs));
            }
        }
        let mut runs = Vec::new();
        let mut covers = 0;
        if let Some((path, m)) = &opened {
            for name in &m.runs {
                runs.push(Arc::new(Run::open(&dir.join(name), true)?));
            }
            covers = m.covers;
            protected.push((path.clone(), m.runs.clone()));
        }
        // Garbage: temporary files of a run or merge cut short, runs no manifest names.
        let mut highest = 0u64;
        for entry in std::fs::read_dir(dir).at("list", dir)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(id) = name
                .strip_suffix(".run")
                .or_else(|| name.strip_suffix(".tmp"))
                .and_then(|n| n.parse::<u64>().ok())
            {
                highest = highest.max(id + 1);
            }
            let named = protected.iter().any(|(_, r)| r.contains(&name));
            if name.ends_with(".tmp") || (name.ends_with(".run") && !named) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            values,
            state: RwLock::new(TableState {
                memtable: Memtable::new(values),
                frozen: Vec::new(),
                runs,
            }),
            next_run: AtomicU64::new(highest),
            failed: Mutex::new(None),
            protected: Mutex::new(protected),
        });
        let (tx, rx) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("state-store".into())
            .spawn({
                let shared = shared.clone();
                move || writer_loop(shared, rx)
            })
            .at("start the writer thread of", dir)?;
        Ok((
            Table {
                shared,
                flush_at: flush_at.max(1),
                jobs: Mutex::new(Some(tx)),
                writer: Mutex::new(Some(writer)),
            },
            covers,
        ))
    }

    fn check_failed(&self) -> Result<(), StateStoreError> {
        match lock(&self.shared.failed).as_ref() {
            Some(reason) => Err(StateStoreError::WriterFailed {
                dir: self.shared.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn send(&self, job: Job) -> Result<(), StateStoreError> {
        let jobs = lock(&self.jobs);
        let sent = jobs.as_ref().map(|tx| tx.send(job).is_ok());
        if sent != Some(true) {
            return Err(StateStoreError::WriterFailed {
                dir: self.shared.dir.clone(),
                reason: "the writer thread is gone".into(),
            });
        }
        Ok(())
    }

    /// Inserts keys (a keys-only table) or replaces their values.
    pub(crate) fn insert_batch<'a>(
        &self,
        entries: impl IntoIterator<Item = (u64, &'a [u8])>,
    ) -> Result<(), StateStoreError> {
        // Inserted even when the writer has failed: lookups stay right in this process, and
        // the error is reported below and by every durable point after.
        let frozen = {
            let mut state = self.shared.write();
            match &mut state.memtable {
                Memtable::Keys(set) => {
                    for (k, _) in entries {
                        set.insert(k);
                    }
                }
                Memtable::Values(map) => {
                    for (k, v) in entries {
                        map.insert(k, v.into());
                    }
                }
            }
            if state.memtable.len() >= self.flush_at {
                Some(Self::freeze(&mut state, self.shared.values))
            } else {
                None
            }
        };
        if let Some(frozen) = frozen {
            self.send(Job::Write(frozen))?;
        }
        self.check_failed()
    }

    fn freeze(state: &mut TableState, values: bool) -> Arc<Frozen> {
        let memtable = std::mem::replace(&mut state.memtable, Memtable::new(values));
        let frozen = Arc::new(Frozen(memtable));
        state.frozen.insert(0, frozen.clone());
        frozen
    }

    /// Makes every write made so far durable under `manifest` (see the module doc), with
    /// `covers` recorded in it. Blocks until done (call it off the crawl's path).
    pub(crate) fn persist(&self, manifest: &Path, covers: u64) -> Result<(), StateStoreError> {
        self.check_failed()?;
        let frozen = {
            let mut state = self.shared.write();
            (state.memtable.len() > 0).then(|| Self::freeze(&mut state, self.shared.values))
        };
        let (done, wait) = mpsc::channel();
        self.send(Job::Persist {
            frozen,
            manifest: manifest.to_path_buf(),
            covers,
            done,
        })?;
        wait.recv().unwrap_or_else(|_| {
            Err(StateStoreError::WriterFailed {
                dir: self.shared.dir.clone(),
                reason: "the writer thread is gone".into(),
            })
        })
    }

    /// [`Self::persist`] without waiting: the writer thread makes the writes so far durable
    /// in turn; its failure is reported by the next call.
    pub(crate) fn persist_in_background(
        &self,
        manifest: &Path,
        covers: u64,
    ) -> Result<(), StateStoreError> {
        self.check_failed()?;
        let frozen = {
            let mut state = self.shared.write();
            (state.memtable.len() > 0).then(|| Self::freeze(&mut state, self.shared.values))
        };
        let (done, _) = mpsc::channel();
        self.send(Job::Persist {
            frozen,
            manifest: manifest.to_path_buf(),
            covers,
            done,
        })
    }

    /// Waits until every merge the policy asks for is done (benches, and a store about to be
    /// read hard); the writes so far are written as runs first only if a persist asked.
    pub(crate) fn compact(&self) -> Result<(), StateStoreError> {
        let (done, wait) = mpsc::channel();
        self.send(Job::Compact(done))?;
        wait.recv().unwrap_or_else(|_| {
            Err(StateStoreError::WriterFailed {
                dir: self.shared.dir.clone(),
                reason: "the writer thread is gone".into(),
            })
        })
    }

    /// The frozen memtables and runs to search after the memtable, taken under the lock.
    fn layers(state: &TableState) -> (Vec<Arc<Frozen>>, Vec<Arc<Run>>) {
        (state.frozen.clone(), state.runs.clone())
    }

    /// For each key, whether the table holds it, into `out` (cleared first).
    pub(crate) fn contains_batch(&self, keys: &[u64], out: &mut Vec<bool>) {
        out.clear();
        let (frozen, runs) = {
            let state = self.shared.read();
            out.extend(keys.iter().map(|&k| state.memtable.get(k).is_some()));
            if out.iter().all(|&found| found) {
                return;
            }
            Self::layers(&state)
        };
        // Membership does not depend on which layer is newest: the largest run, which
        // holds most keys, is asked first.
        let mut runs = runs;
        runs.sort_by_key(|r| std::cmp::Reverse(r.len()));
        for (found, &key) in out.iter_mut().zip(keys) {
            if !*found {
                *found = frozen.iter().any(|f| f.get(key).is_some())
                    || runs.iter().any(|r| r.contains(key));
            }
        }
    }

    /// The value of each key, if held (newest first wins).
    pub(crate) fn get_batch(&self, keys: &[u64]) -> Vec<Option<Vec<u8>>> {
        let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
        let (frozen, runs) = {
            let state = self.shared.read();
            out.extend(
                keys.iter()
                    .map(|&k| state.memtable.get(k).map(|v| v.to_vec())),
            );
            Self::layers(&state)
        };
        for (value, &key) in out.iter_mut().zip(keys) {
            if value.is_none() {
                *value = frozen
                    .iter()
                    .find_map(|f| f.get(key))
                    .or_else(|| runs.iter().find_map(|r| r.get(key)))
                    .map(|v| v.to_vec());
            }
        }
        out
    }

    /// Every entry, newest value of each key, in no particular order across layers: the
    /// memtable's and frozen memtables' entries first, then each run's not shadowed by a
    /// newer layer. `f` returns false to stop.
    pub(crate) fn for_each(&self, mut f: impl FnMut(u64, &[u8]) -> bool) {
        let (memtable, frozen, runs): (Vec<(u64, Vec<u8>)>, _, _) = {
            let state = self.shared.read();
            let memtable = match &state.memtable {
                Memtable::Keys(s) => s.iter().map(|&k| (k, Vec::new())).collect(),
                Memtable::Values(m) => m.iter().map(|(&k, v)| (k, v.to_vec())).collect(),
            };
            let (frozen, runs) = Self::layers(&state);
            (memtable, frozen, runs)
        };
        let in_memtable: HashSet<u64, Build> = memtable.iter().map(|(k, _)| *k).collect();
        for (k, v) in &memtable {
            if !f(*k, v) {
                return;
            }
        }
        let shadowed = |k: u64, frozen_upto: usize, runs_upto: usize| {
            in_memtable.contains(&k)
                || frozen[..frozen_upto].iter().any(|f| f.get(k).is_some())
                || runs[..runs_upto].iter().any(|r| r.contains(k))
        };
        for (i, layer) in frozen.iter().enumerate() {
            let entries = layer.iter();
            for (k, v) in entries {
                if !shadowed(k, i, 0) && !f(k, v) {
                    return;
                }
            }
        }
        for (i, run) in runs.iter().enumerate() {
            for (k, v) in run.iter() {
                if !shadowed(k, frozen.len(), i) && !f(k, v) {
                    return;
                }
            }
        }
    }

    pub(crate) fn stats(&self) -> TableStats {
        let state = self.shared.read();
        let memtable = state.memtable.len() as u64;
        TableStats {
            entries_in_memory: memtable + state.frozen.iter().map(|f| f.len() as u64).sum::<u64>(),
            runs: state.runs.len() as u64,
            entries_on_disk: state.runs.iter().map(|r| r.len()).sum(),
            bytes_on_disk: state.runs.iter().map(|r| r.bytes()).sum(),
            memory: state.memtable.bytes()
                + state.frozen.iter().map(|f| f.bytes()).sum::<u64>()
                + state.runs.iter().map(|r| r.memory()).sum::<u64>(),
        }
    }

    /// Waits for the writer thread to finish what it was given, then stops it.
    pub(crate) fn close(&self) -> Result<(), StateStoreError> {
        drop(lock(&self.jobs).take());
        if let Some(handle) = lock(&self.writer).take() {
            let _ = handle.join();
        }
        self.check_failed()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(table: &Table, keys: &[u64]) -> Vec<bool> {
        let mut out = Vec::new();
        table.contains_batch(keys, &mut out);
        out
    }

    #[test]
    fn keys_survive_flushes_merges_and_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let manifest = dir.path().join("m.json");
        let (table, _) = Table::open(&runs, false, 100, None, &[]).unwrap();
        for chunk in (0..10_000u64).collect::<Vec<_>>().chunks(37) {
            table
                .insert_batch(chunk.iter().map(|&k| (k * 3, &[][..])))
                .unwrap();
        }
        table.persist(&manifest, 42).unwrap();
        table.compact().unwrap();
        let stats = table.stats();
        assert!(stats.runs <= 14, "merged: {stats:?}");
        assert_eq!(stats.entries_in_memory, 0);
        let probe: Vec<u64> = (0..30_000).collect();
        let expect: Vec<bool> = probe.iter().map(|k| k % 3 == 0).collect();
        assert_eq!(keys_of(&table, &probe), expect);
        // Written after the manifest: gone after a reopen from it.
        table.insert_batch([(1u64, &[][..])]).unwrap();
        assert_eq!(keys_of(&table, &[1]), vec![true]);
        table.close().unwrap();
        drop(table);
        let (table, covers) = Table::open(&runs, false, 100, Some(&manifest), &[]).unwrap();
        assert_eq!(covers, 42);
        assert_eq!(keys_of(&table, &probe), expect);
        let files = std::fs::read_dir(&runs).unwrap().count() as u64;
        assert_eq!(files, table.stats().runs, "garbage removed");
    }

    #[test]
    fn newest_value_wins_through_merges_and_iteration() {
        let dir = tempfile::tempdir().unwrap();
        let (table, _) = Table::open(dir.path(), true, 50, None, &[]).unwrap();
        for round in 0..5u8 {
            for k in 0..400u64 {
                table.insert_batch([(k, &[round][..])]).unwrap();
            }
        }
        table.persist(&dir.path().join("m.json"), 0).unwrap();
        table.insert_batch([(7u64, &[9u8][..])]).unwrap();
        let got = table.get_batch(&[0, 7, 399, 400]);
        assert_eq!(got, vec![Some(vec![4]), Some(vec![9]), Some(vec![4]), None]);
        let mut seen = HashMap::new();
        table.for_each(|k, v| {
            assert!(seen.insert(k, v.to_vec()).is_none(), "{k} twice");
            true
        });
        assert_eq!(seen.len(), 400);
        assert_eq!(seen[&7], vec![9]);
        assert!(seen.iter().all(|(k, v)| *k == 7 || v == &vec![4]));
    }

    #[test]
    fn runs_of_kept_manifests_are_not_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let (table, _) = Table::open(dir.path(), false, 10, None, &[]).unwrap();
        let mut manifests = Vec::new();
        for m in 0..6u64 {
            table
                .insert_batch((m * 100..m * 100 + 100).map(|k| (k, &[][..])))
                .unwrap();
            let path = dir.path().join(format!("m{m}.json"));
            table.persist(&path, m).unwrap();
            manifests.push(path);
        }
        table.close().unwrap();
        drop(table);
        // The last KEEP_MANIFESTS manifests open whole.
        for (m, path) in manifests.iter().enumerate().skip(6 - KEEP_MANIFESTS) {
            let (t, covers) = Table::open(dir.path(), false, 10, Some(path), &manifests).unwrap();
            assert_eq!(covers, m as u64);
            let keys: Vec<u64> = (0..(m as u64 + 1) * 100).collect();
            let mut out = Vec::new();
            t.contains_batch(&keys, &mut out);
            assert!(out.iter().all(|&b| b), "manifest {m}");
        }
    }
}
