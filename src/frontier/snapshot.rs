//! The frontier's part of a checkpoint: taken in the crawl's pause
//! ([`Frontier::begin_checkpoint`](super::Frontier::begin_checkpoint)), written on another
//! thread ([`FrontierSnapshot::write`]), and read back and checked before a resume
//! ([`SavedFrontier::check`]).
//!
//! Guarantees: a snapshot is one consistent state of the frontier, with every URL handed
//! out and not yet given back recorded at the front of its host's queue (in the order it
//! was handed out), so a resume fetches it again first; `hosts.bin` is fsynced before
//! [`FrontierSnapshot::write`] returns; [`SavedFrontier::check`] refuses, naming the file, a
//! `hosts.bin` of the wrong length, checksum, magic, version or counts, or a store without
//! this position's table: nothing is used unless all of it is sound.
//!
//! Why the pause is short: the queued URLs are already on disk in the store, so only the
//! store's tails and table, and a 12-byte record per host (`hosts.bin`'s own bytes, so that
//! nothing else is held for the write), are copied in it (figures in the module doc of
//! [`super`]).
//!
//! # `hosts.bin`
//!
//! Little-endian: magic `CRWLHOST`, `u32` version 1, `u32` zero, `u64` host count `H`, `u64`
//! done count `D`, `H` × (`u64` host id, `u32` URLs ever queued), `D` × `u64` XXH3-64 of a
//! URL recorded but still in the store, then the XXH3-64 of every byte before it.

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use crate::durable::{self, checksum_of, At, Cursor};
use serde::{Deserialize, Serialize};

use super::store::{PendingSync, QueueStore, StorePosition};
use super::{Frontier, FrontierError, HostId, QueuedUrl};

/// `hosts.bin` as encoded in the pause, its checksum trailer not yet computed.
type HostsFile = Vec<u8>;

/// The `hosts.bin` buffers going round: a written snapshot hands its buffer back for the next
/// checkpoint to fill without faulting in fresh pages (12 bytes per host).
pub(crate) struct TallyBuffers {
    give_back: Sender<HostsFile>,
    returned: Receiver<HostsFile>,
}

impl TallyBuffers {
    pub(crate) fn new() -> Self {
        let (give_back, returned) = channel();
        TallyBuffers {
            give_back,
            returned,
        }
    }
}

/// The part of a checkpoint that the frontier writes, taken by
/// [`Frontier::begin_checkpoint`](super::Frontier::begin_checkpoint).
pub struct FrontierSnapshot {
    /// How long the store's part of the pause took (tails written, table encoded), and
    /// the copy of the host tallies.
    pub store_pause: Duration,
    pub tallies_pause: Duration,
    pending: PendingSync,
    /// `hosts.bin` but its trailer, encoded in the pause straight from the live tallies: a
    /// copy of them as (host, count) pairs and then the file's bytes made from it held both at
    /// once in the background write (16 + 12 bytes per host, ~27 MB + 12 MB at 1e6 hosts
    /// with the copy's amortized growth, measured with heaptrack), where this is 12.
    hosts_file: HostsFile,
    hosts: u64,
    /// Where the buffer goes back once written.
    recycle: Sender<HostsFile>,
    queued: u64,
}

/// What a checkpoint's manifest records of the frontier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedFrontier {
    /// The store's position (`OUT/frontier/queues/`).
    pub store: StorePosition,
    /// URLs queued or in flight at the checkpoint.
    pub queued: u64,
    /// Hosts in `hosts.bin`, its length and checksum.
    pub(crate) hosts: u64,
    pub(crate) hosts_bytes: u64,
    pub(crate) hosts_xxh3: u64,
}

/// `hosts.bin` read back and checked.
#[derive(Debug, Default)]
pub struct SavedHosts {
    /// (host, URLs ever queued).
    pub(crate) tallies: Vec<(HostId, u32)>,
    /// Hashes of URLs recorded before the checkpoint but still in the store.
    pub(crate) done: Vec<u64>,
}

const HOSTS_MAGIC: [u8; 8] = *b"CRWLHOST";
const HOSTS_VERSION: u32 = 1;
pub(crate) const HOSTS_FILE: &str = "hosts.bin";

impl Frontier {
    /// The body of [`Frontier::begin_checkpoint`]: the store's tails and table with the
    /// URLs in flight at the front of their queues, and a copy of the tallies.
    pub(crate) fn snapshot(&mut self) -> Result<FrontierSnapshot, FrontierError> {
        let started = std::time::Instant::now();
        // In the order they were handed out: the store puts them before the queue's front.
        let in_flight: Vec<(HostId, QueuedUrl)> = self.dispatched.items().collect();
        let pending = self.store.begin_sync_with(&in_flight)?;
        let store_pause = started.elapsed();
        let hosts = self.store.tally_count();
        let done = self.already_done.len();
        let len = 32 + hosts * 12 + done * 8;
        let mut file = self.tally_buffers.returned.try_recv().unwrap_or_default();
        if file.capacity() > 2 * len + (1 << 20) {
            // Far more hosts at a previous checkpoint: not kept for ever.
            file = Vec::new();
        }
        file.clear();
        // Exactly, and with room for the trailer: `reserve` could double it.
        file.reserve_exact(len + 8);
        file.extend_from_slice(&HOSTS_MAGIC);
        file.extend_from_slice(&HOSTS_VERSION.to_le_bytes());
        file.extend_from_slice(&0u32.to_le_bytes());
        file.extend_from_slice(&(hosts as u64).to_le_bytes());
        file.extend_from_slice(&(done as u64).to_le_bytes());
        for (host, tally) in self.store.tallies() {
            let mut record = [0u8; 12];
            record[..8].copy_from_slice(&host.to_le_bytes());
            record[8..].copy_from_slice(&tally.queued_ever.to_le_bytes());
            file.extend_from_slice(&record);
        }
        for &hash in &self.already_done {
            file.extend_from_slice(&hash.to_le_bytes());
        }
        debug_assert_eq!(file.len(), len);
        let tallies_pause = started.elapsed() - store_pause;
        Ok(FrontierSnapshot {
            store_pause,
            tallies_pause,
            pending,
            hosts_file: file,
            hosts: hosts as u64,
            recycle: self.tally_buffers.give_back.clone(),
            queued: self.store.total() + in_flight.len() as u64,
        })
    }
}

impl FrontierSnapshot {
    /// Writes the frontier's part of a checkpoint into `dir` (a checkpoint's directory):
    /// makes the store's state durable and writes `hosts.bin`, fsynced.
    pub fn write(self, dir: &Path) -> Result<SavedFrontier, FrontierError> {
        let position = self.pending.write()?;
        let mut bytes = self.hosts_file;
        let checksum = checksum_of(&[&bytes]);
        bytes.extend_from_slice(&checksum.to_le_bytes());
        let path = dir.join(HOSTS_FILE);
        let written = durable::replace(&path, dir.join(format!("{HOSTS_FILE}.tmp")), &bytes);
        let hosts_bytes = bytes.len() as u64;
        bytes.clear();
        let _ = self.recycle.send(bytes);
        written?;
        Ok(SavedFrontier {
            store: position,
            queued: self.queued,
            hosts: self.hosts,
            hosts_bytes,
            hosts_xxh3: checksum,
        })
    }
}

impl SavedFrontier {
    /// Reads and checks `hosts.bin` of the checkpoint in `dir`, and checks that the store
    /// still has this position's table, whole: nothing is used unless all of it is sound.
    pub(crate) fn check(
        &self,
        dir: &Path,
        frontier_dir: &Path,
    ) -> Result<SavedHosts, FrontierError> {
        let path = dir.join(HOSTS_FILE);
        let bytes = std::fs::read(&path).at("read", &path)?;
        let corrupt = |what: String| FrontierError::Corrupt {
            path: path.clone(),
            what,
        };
        if bytes.len() as u64 != self.hosts_bytes {
            return Err(corrupt(format!(
                "{} bytes, the manifest says {} (truncated or overwritten)",
                bytes.len(),
                self.hosts_bytes
            )));
        }
        let trailer = match durable::split_trailer(&bytes) {
            Some(trailer) if bytes.len() >= 40 => trailer,
            _ => return Err(corrupt("too short for a hosts file".into())),
        };
        if !trailer.matches() || trailer.stored != self.hosts_xxh3 {
            return Err(corrupt("checksum mismatch; the file was damaged".into()));
        }
        let body = trailer.body;
        let mut header = Cursor::new(body, 0);
        let fields = (|| -> Result<_, String> {
            let magic = header.take(8)?;
            let version = header.u32()?;
            let _reserved = header.u32()?;
            Ok((magic, version, header.u64()?, header.u64()?))
        })();
        let (magic, version, hosts, done) = fields.map_err(corrupt)?;
        if magic != HOSTS_MAGIC {
            return Err(corrupt("not a hosts file (bad magic)".into()));
        }
        if version != HOSTS_VERSION {
            return Err(corrupt(format!(
                "format version {version}, this crawler reads {HOSTS_VERSION}"
            )));
        }
        let expected = 32u64
            .checked_add(hosts.saturating_mul(12))
            .and_then(|n| n.checked_add(done.saturating_mul(8)));
        if expected != Some(body.len() as u64) || hosts != self.hosts {
            return Err(corrupt(format!(
                "{hosts} hosts and {done} done URLs do not fit its {} bytes (manifest: {} hosts)",
                body.len(),
                self.hosts
            )));
        }
        let mut saved = SavedHosts {
            tallies: Vec::with_capacity(hosts as usize),
            done: Vec::with_capacity(done as usize),
        };
        // The lengths were checked against the file's size: the reads below cannot run out,
        // and would say so (not panic) if they did.
        let mut entries = Cursor::new(body, 32);
        for _ in 0..hosts {
            let host = entries.u64().map_err(corrupt)?;
            let count = entries.u32().map_err(corrupt)?;
            saved.tallies.push((host, count));
        }
        for _ in 0..done {
            saved.done.push(entries.u64().map_err(corrupt)?);
        }
        QueueStore::check_position(&frontier_dir.join("queues"), self.store)?;
        Ok(saved)
    }
}
