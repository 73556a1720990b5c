//! The disk-backed queue store: FIFO order across memory and disk, recovery, corruption,
//! disk reclaim. `cargo test store` runs these.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crawler::frontier::store::{QueueStore, StoreError, StoreOptions};
use crawler::frontier::QueuedUrl;

/// Bytes before the body of a group of one entry (format version 3: a 16-byte header, the
/// entry's `next` at 16..24, its host id at 24..32), which is what one host's full tail
/// makes.
const BLOCK_HEADER: u64 = 32;

fn item(host: u64, i: u64) -> QueuedUrl {
    QueuedUrl {
        url: format!("https://www.host{host}.example.com/path/to/article-{i}?id={i}"),
        depth: (i % 7) as u32,
        parent: (i % 3 != 0).then(|| format!("https://www.host{host}.example.com/").into()),
        redirect_hops: (i % 2) as u32,
        attempts: 0,
    }
}

/// Tiny sizes, so that a few hundred items cross every boundary: blocks, write buffer,
/// memory budget, segments.
fn tiny() -> StoreOptions {
    StoreOptions {
        memory: 16384,
        block_items: 4,
        segment_bytes: 2048,
        write_buffer: 256,
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    v.sort();
    v
}

fn drain(store: &mut QueueStore, host: u64) -> Vec<QueuedUrl> {
    let mut v = Vec::new();
    while let Some(i) = store.pop(host).unwrap() {
        v.push(i);
    }
    v
}

#[test]
fn store_fifo_across_memory_and_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    let mut next_pop = 0;
    for i in 0..600 {
        s.push(7, &item(7, i)).unwrap();
        if i % 3 == 2 {
            assert_eq!(s.pop(7).unwrap(), Some(item(7, next_pop)));
            next_pop += 1;
        }
        assert!(s.memory_bytes() < 64 * 1024, "{}", s.memory_bytes());
    }
    assert_eq!(s.len(7), 600 - next_pop);
    assert!(
        segments(dir.path()).len() > 3,
        "several segments were written"
    );
    for i in next_pop..600 {
        assert_eq!(s.pop(7).unwrap(), Some(item(7, i)));
    }
    assert_eq!(s.pop(7).unwrap(), None);
    assert_eq!(s.total(), 0);
    assert_eq!(s.host_count(), 0);
}

#[test]
fn store_many_hosts_interleaved() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    let hosts = 37u64;
    for i in 0..40 {
        for h in 0..hosts {
            s.push(h * 1_000_003, &item(h, i)).unwrap();
        }
    }
    assert_eq!(s.total(), 40 * hosts);
    for h in (0..hosts).rev() {
        let got = drain(&mut s, h * 1_000_003);
        let want: Vec<_> = (0..40).map(|i| item(h, i)).collect();
        assert_eq!(got, want, "host {h}");
    }
    assert!(s.is_empty());
}

#[test]
fn store_push_front_goes_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..20 {
        s.push(1, &item(1, i)).unwrap();
    }
    let a = s.pop(1).unwrap().unwrap();
    let b = s.pop(1).unwrap().unwrap();
    s.push_front(1, b.clone());
    s.push_front(1, a.clone());
    s.push_front(2, item(2, 0));
    assert_eq!(s.len(1), 20);
    // Survives a sync and a reopen too.
    s.sync().unwrap();
    drop(s);
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    assert_eq!(s.pop(1).unwrap(), Some(a));
    assert_eq!(s.pop(1).unwrap(), Some(b));
    assert_eq!(s.pop(1).unwrap(), Some(item(1, 2)));
    assert_eq!(s.pop(2).unwrap(), Some(item(2, 0)));
}

#[test]
fn store_reopen_after_sync_is_exact_and_in_flight_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..100 {
        s.push(i % 5, &item(i % 5, i)).unwrap();
    }
    for h in 0..5 {
        s.pop(h).unwrap();
    }
    let pos = s.sync().unwrap();
    // Popped after the sync: in flight at the crash, so queued again after it.
    for h in 0..5 {
        s.pop(h).unwrap();
    }
    drop(s);
    let mut s = QueueStore::reopen_at(dir.path(), tiny(), pos).unwrap();
    assert_eq!(s.total(), 95);
    for h in 0..5 {
        let got = drain(&mut s, h);
        let want: Vec<_> = (0..100)
            .filter(|i| i % 5 == h)
            .skip(1)
            .map(|i| item(h, i))
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn store_drop_without_sync_keeps_what_was_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..10 {
        s.push(1, &item(1, i)).unwrap();
    }
    let pos = s.sync().unwrap();
    // 10 more, flushed (tails written as blocks, handed to the OS): all survive a kill -9.
    for i in 10..20 {
        s.push(1, &item(1, i)).unwrap();
    }
    s.flush().unwrap();
    // 10 more, not flushed: some full blocks reached the OS, the rest is lost.
    for i in 20..30 {
        s.push(1, &item(1, i)).unwrap();
    }
    drop(s);
    let mut s = QueueStore::reopen_at(dir.path(), tiny(), pos).unwrap();
    assert_eq!(s.recovery().cut, None);
    let replayed = s.recovery().items_replayed;
    assert!((10..20).contains(&replayed), "{replayed}");
    let got = drain(&mut s, 1);
    assert_eq!(
        got,
        (0..10 + replayed).map(|i| item(1, i)).collect::<Vec<_>>()
    );
}

/// Items popped before a sync and still in flight are recorded with it: they come back first.
#[test]
fn store_in_flight_items_are_recorded_at_sync() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..10 {
        s.push(1, &item(1, i)).unwrap();
    }
    s.push(2, &item(2, 0)).unwrap();
    let a = s.pop(1).unwrap().unwrap();
    let b = s.pop(1).unwrap().unwrap();
    let c = s.pop(2).unwrap().unwrap();
    let flying = vec![(1, a.clone()), (1, b.clone()), (2, c.clone())];
    let pending = s.begin_sync_with(&flying).unwrap();
    let expected = pending.position();
    let pos = pending.write().unwrap();
    assert_eq!(pos, expected);
    s.finish_sync(pos).unwrap();
    assert_eq!(s.len(1), 8, "the live store is unchanged");
    assert_eq!(s.len(2), 0);
    drop(s);
    let mut s = QueueStore::reopen_at(dir.path(), tiny(), pos).unwrap();
    assert_eq!(s.total(), 11);
    let mut hosts: Vec<_> = s.hosts().collect();
    hosts.sort();
    assert_eq!(hosts, vec![(1, 10), (2, 1)]);
    assert_eq!(s.pop(2).unwrap(), Some(c));
    assert_eq!(
        drain(&mut s, 1),
        (0..10).map(|i| item(1, i)).collect::<Vec<_>>()
    );
}

#[test]
fn store_torn_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        segment_bytes: 1 << 20,
        ..tiny()
    };
    let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
    for i in 0..8 {
        s.push(1, &item(1, i)).unwrap();
    }
    let pos = s.sync().unwrap();
    for i in 8..16 {
        s.push(1, &item(1, i)).unwrap();
    }
    s.flush().unwrap();
    drop(s);
    // Tear the last block: drop its last 10 bytes.
    let seg = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - 10).unwrap();
    drop(f);
    let mut s = QueueStore::reopen_at(dir.path(), opts.clone(), pos).unwrap();
    let (path, offset, why) = s.recovery().cut.clone().expect("cut");
    assert_eq!(path, seg);
    assert!(offset < len - 10, "{offset} {why}");
    assert_eq!(s.recovery().blocks_replayed, 1);
    // Appending after the cut works, and the chain stays right.
    s.push(1, &item(1, 100)).unwrap();
    let pos = s.sync().unwrap();
    drop(s);
    let mut s = QueueStore::reopen_at(dir.path(), opts, pos).unwrap();
    let mut want: Vec<_> = (0..12).map(|i| item(1, i)).collect();
    want.push(item(1, 100));
    assert_eq!(drain(&mut s, 1), want);
}

/// A flipped byte in a block of the synced log: pop fails naming the file and the block.
#[test]
fn store_flipped_byte_in_synced_block_is_an_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        segment_bytes: 1 << 20,
        ..tiny()
    };
    let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
    for i in 0..12 {
        s.push(1, &item(1, i)).unwrap();
    }
    s.sync().unwrap();
    drop(s);
    let seg = segments(dir.path()).pop().unwrap();
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg)
        .unwrap();
    // The second block starts after the 16-byte header and the first block; flip a byte in
    // its body.
    let mut len = [0u8; 4];
    f.read_exact_at(&mut len, 16).unwrap();
    let second = 16 + (BLOCK_HEADER + u32::from_le_bytes(len) as u64).next_multiple_of(8);
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, second + BLOCK_HEADER + 2).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], second + BLOCK_HEADER + 2)
        .unwrap();
    drop(f);
    let mut s = QueueStore::open(dir.path(), opts).unwrap();
    for i in 0..4 {
        assert_eq!(s.pop(1).unwrap(), Some(item(1, i)));
    }
    match s.pop(1) {
        Err(StoreError::Corrupt { path, offset, what }) => {
            assert_eq!(path, seg);
            assert_eq!(offset, second);
            assert!(what.contains("checksum"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    let msg = s.pop(1).unwrap_err().to_string();
    assert!(
        msg.contains("seg-00000001.log") && msg.contains(&second.to_string()),
        "{msg}"
    );
}

/// A flipped byte after the synced position is taken for a torn write: the log is cut there.
#[test]
fn store_flipped_byte_after_position_cuts_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        segment_bytes: 1 << 20,
        ..tiny()
    };
    let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
    let pos = s.sync().unwrap();
    for i in 0..12 {
        s.push(1, &item(1, i)).unwrap();
    }
    s.flush().unwrap();
    drop(s);
    let seg = segments(dir.path()).pop().unwrap();
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg)
        .unwrap();
    let mut len = [0u8; 4];
    f.read_exact_at(&mut len, 16).unwrap();
    let second = 16 + (BLOCK_HEADER + u32::from_le_bytes(len) as u64).next_multiple_of(8);
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, second + BLOCK_HEADER + 2).unwrap();
    f.write_all_at(&[b[0] ^ 0x55], second + BLOCK_HEADER + 2)
        .unwrap();
    drop(f);
    let mut s = QueueStore::reopen_at(dir.path(), opts, pos).unwrap();
    let (path, offset, why) = s.recovery().cut.clone().unwrap();
    assert_eq!((path, offset), (seg.clone(), second), "{why}");
    assert_eq!(fs::metadata(&seg).unwrap().len(), second);
    assert_eq!(
        drain(&mut s, 1),
        (0..4).map(|i| item(1, i)).collect::<Vec<_>>()
    );
}

#[test]
fn store_truncated_synced_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        segment_bytes: 1 << 20,
        ..tiny()
    };
    let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
    for i in 0..12 {
        s.push(1, &item(1, i)).unwrap();
    }
    s.sync().unwrap();
    drop(s);
    let seg = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let err = QueueStore::open(dir.path(), opts).err().expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("seg-00000001.log") && msg.contains("log end"),
        "{msg}"
    );
}

/// A store written by the previous format (version 1: 40-byte headers, items stored whole) is
/// refused with its version named and what to do, by `open` and `reopen_at` alike, and
/// whether it is the table or a segment that says so; nothing of it is read as this version.
#[test]
fn store_of_an_older_format_version_is_refused_with_the_version_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..6 {
        s.push(1, &item(1, i)).unwrap();
    }
    let pos = s.sync().unwrap();
    drop(s);
    let table = dir.path().join(format!("table-{:016}.bin", pos.generation));
    let seg = segments(dir.path()).pop().unwrap();
    let set_version = |path: &Path, version: u32, fix_checksum: bool| {
        let mut bytes = fs::read(path).unwrap();
        bytes[8..12].copy_from_slice(&version.to_le_bytes());
        if fix_checksum {
            let n = bytes.len() - 8;
            let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..n]);
            bytes[n..].copy_from_slice(&sum.to_le_bytes());
        }
        fs::write(path, bytes).unwrap();
    };
    // An old segment under a current table: named when opened.
    set_version(&seg, 1, false);
    let msg = QueueStore::reopen_at(dir.path(), tiny(), pos)
        .err()
        .unwrap()
        .to_string();
    assert!(
        msg.contains(&seg.file_name().unwrap().to_string_lossy().to_string())
            && msg.contains("format version 1")
            && msg.contains("--fresh"),
        "{msg}"
    );
    // An old table, whole (its checksum right for its bytes): named before anything else.
    set_version(&table, 1, true);
    for msg in [
        QueueStore::open(dir.path(), tiny())
            .err()
            .unwrap()
            .to_string(),
        QueueStore::reopen_discarding_after(dir.path(), tiny(), pos)
            .err()
            .unwrap()
            .to_string(),
    ] {
        assert!(
            msg.contains("table-") && msg.contains("format version 1") && msg.contains("--fresh"),
            "{msg}"
        );
    }
    assert!(seg.exists(), "a refused store is left as it was");
}

#[test]
fn store_corrupt_table_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    s.push(1, &item(1, 0)).unwrap();
    let pos = s.sync().unwrap();
    drop(s);
    let table = dir.path().join(format!("table-{:016}.bin", pos.generation));
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&table)
        .unwrap();
    f.write_all_at(&[0xFF], 70).unwrap();
    drop(f);
    let msg = QueueStore::reopen_at(dir.path(), tiny(), pos)
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("table-") && msg.contains("checksum"), "{msg}");
}

#[test]
fn store_reopen_at_previous_position() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..30 {
        s.push(1, &item(1, i)).unwrap();
    }
    let first = s.sync().unwrap();
    for _ in 0..10 {
        s.pop(1).unwrap();
    }
    s.sync().unwrap();
    drop(s);
    // The caller's checkpoint recorded the first position only.
    let mut s = QueueStore::reopen_at(dir.path(), tiny(), first).unwrap();
    assert_eq!(s.recovery().tables_discarded, 1);
    assert_eq!(
        drain(&mut s, 1),
        (0..30).map(|i| item(1, i)).collect::<Vec<_>>()
    );
}

#[test]
fn store_disk_is_reclaimed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    // Enough for a dozen 2 KiB segments of compact blocks.
    for i in 0..1000 {
        s.push(i % 3, &item(i % 3, i)).unwrap();
    }
    s.sync().unwrap();
    let full = s.disk_bytes();
    let many = segments(dir.path()).len();
    assert!(many > 10, "{many}");
    for h in 0..3 {
        drain(&mut s, h);
    }
    s.sync().unwrap();
    // Reopened in between: the segments the previous table still needed are reclaimed too.
    drop(s);
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    s.sync().unwrap();
    s.sync().unwrap();
    let left = segments(dir.path()).len();
    assert!(left <= 1, "{left} segments left");
    assert!(s.disk_bytes() < full / 10, "{} of {full}", s.disk_bytes());
    let on_disk: u64 = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(on_disk, s.disk_bytes());
}

/// A segment created just before a crash, its header lost: removed like a torn write.
#[test]
fn store_headerless_last_segment_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..10 {
        s.push(1, &item(1, i)).unwrap();
    }
    let pos = s.sync().unwrap();
    drop(s);
    let last = segments(dir.path()).pop().unwrap();
    let name = last.file_name().unwrap().to_str().unwrap();
    let n: u32 = name[4..12].parse().unwrap();
    let extra = dir.path().join(format!("seg-{:08}.log", n + 1));
    fs::write(&extra, [0u8; 7]).unwrap();
    let mut s = QueueStore::reopen_at(dir.path(), tiny(), pos).unwrap();
    assert_eq!(s.recovery().cut.as_ref().unwrap().0, extra);
    assert!(!extra.exists());
    assert_eq!(
        drain(&mut s, 1),
        (0..10).map(|i| item(1, i)).collect::<Vec<_>>()
    );
}

/// The slow half of a sync runs on another thread while the store goes on; reopening at its
/// position gives the state as of `begin_sync`, plus the blocks written after it.
#[test]
fn store_sync_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        block_items: 1,
        ..tiny()
    };
    let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
    for i in 0..50 {
        s.push(i % 2, &item(i % 2, i)).unwrap();
    }
    let pending = s.begin_sync().unwrap();
    let writer = std::thread::spawn(move || pending.write());
    // Meanwhile: pops (they come back) and pushes (written as blocks, replayed).
    for _ in 0..10 {
        s.pop(0).unwrap();
    }
    for i in 50..60 {
        s.push(0, &item(0, i)).unwrap();
    }
    let pos = writer.join().unwrap().unwrap();
    s.finish_sync(pos).unwrap();
    s.flush().unwrap();
    drop(s);
    let mut s = QueueStore::reopen_at(dir.path(), opts, pos).unwrap();
    assert_eq!(s.recovery().items_replayed, 10);
    let want: Vec<_> = (0..50)
        .filter(|i| i % 2 == 0)
        .chain(50..60)
        .map(|i| item(0, i))
        .collect();
    assert_eq!(drain(&mut s, 0), want);
    assert_eq!(s.len(1), 25);
}

/// A bad record after the position in a segment that is not the last (a power cut can lose
/// the end of a sealed segment that was never fsynced): the log is cut there, and the later
/// segments are dropped with it.
#[test]
fn store_bad_record_in_an_earlier_segment_cuts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        block_items: 1,
        ..tiny()
    };
    let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
    for i in 0..3 {
        s.push(1, &item(1, i)).unwrap();
    }
    let pos = s.sync().unwrap();
    for i in 3..100 {
        s.push(1, &item(1, i)).unwrap();
    }
    s.flush().unwrap();
    drop(s);
    let segs = segments(dir.path());
    assert!(segs.len() > 3, "{segs:?}");
    // Zero the end of the first segment, as if its last pages never reached the disk.
    let first = &segs[0];
    let len = fs::metadata(first).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(first).unwrap();
    f.write_all_at(&[0u8; 64], len - 64).unwrap();
    drop(f);
    let mut s = QueueStore::reopen_at(dir.path(), opts, pos).unwrap();
    let (path, offset, _) = s.recovery().cut.clone().unwrap();
    assert_eq!(&path, first);
    assert!(offset < len, "{offset}");
    assert_eq!(segments(dir.path()), vec![first.clone()]);
    let got = drain(&mut s, 1);
    let n = got.len();
    assert!((3..100).contains(&n), "{n}");
    assert_eq!(got, (0..n as u64).map(|i| item(1, i)).collect::<Vec<_>>());
}

fn segment_1(dir: &Path) -> PathBuf {
    dir.join("seg-00000001.log")
}

/// Entries of groups before `log_end` (all in segment 1) whose `next` field points past
/// `log_end`.
fn links_past(dir: &Path, log_end: u64) -> usize {
    assert_eq!(log_end >> 32, 1, "the test keeps the log in segment 1");
    let bytes = fs::read(segment_1(dir)).unwrap();
    let end = (log_end & 0xFFFF_FFFF) as usize;
    let mut at = 16;
    let mut n = 0;
    while at < end {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let entries = u16::from_le_bytes(bytes[at + 4..at + 6].try_into().unwrap()) as usize;
        for i in 0..entries {
            let slot = at + 16 + 8 * i;
            let next = u64::from_le_bytes(bytes[slot..slot + 8].try_into().unwrap());
            // Entry bits above the segment's: a location's order is its group's.
            n += (next & ((1 << 56) - 1) >= log_end) as usize;
        }
        at += (16 + 16 * entries + len).next_multiple_of(8);
    }
    n
}

/// Pushes after the position, flushed or not, are dropped, whatever segment they are in.
#[test]
fn store_discard_drops_pushes_after_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..30 {
        s.push(i % 3, &item(i % 3, i)).unwrap();
    }
    let pos = s.sync().unwrap();
    let segs_at_sync = segments(dir.path());
    for i in 30..200 {
        s.push(i % 4, &item(i % 4, i)).unwrap();
    }
    s.flush().unwrap();
    for i in 200..210 {
        s.push(i % 4, &item(i % 4, i)).unwrap();
    }
    drop(s);
    let on_disk = |dir: &Path| -> u64 {
        segments(dir)
            .iter()
            .map(|p| fs::metadata(p).unwrap().len())
            .sum()
    };
    let before = on_disk(dir.path());
    assert!(segments(dir.path()).len() > segs_at_sync.len());
    let mut s = QueueStore::reopen_discarding_after(dir.path(), tiny(), pos).unwrap();
    let r = s.recovery().clone();
    assert_eq!((r.blocks_replayed, r.items_replayed, &r.cut), (0, 0, &None));
    assert!(r.discarded_segments > 0, "{r:?}");
    assert_eq!(r.discarded_bytes, before - on_disk(dir.path()), "{r:?}");
    // The log ends at the position: its segment is the last, cut at its log end.
    let segs = segments(dir.path());
    let last = segs.last().unwrap();
    assert_eq!(
        last,
        &dir.path().join(format!("seg-{:08}.log", pos.log_end >> 32))
    );
    assert_eq!(fs::metadata(last).unwrap().len(), pos.log_end & 0xFFFF_FFFF);
    assert_eq!(s.total(), 30);
    assert_eq!(s.len(3), 0);
    for h in 0..3 {
        let want: Vec<_> = (0..30).filter(|i| i % 3 == h).map(|i| item(h, i)).collect();
        assert_eq!(drain(&mut s, h), want, "host {h}");
    }
    // Nothing after the position: nothing to drop.
    s.push(5, &item(5, 0)).unwrap();
    let pos = s.sync().unwrap();
    drop(s);
    let s = QueueStore::reopen_discarding_after(dir.path(), tiny(), pos).unwrap();
    assert_eq!(s.recovery().discarded_bytes, 0);
    assert_eq!(s.recovery().discarded_segments, 0);
    assert_eq!(s.total(), 1);
}

/// Pops after the position are undone: the items come back, in order.
#[test]
fn store_discard_undoes_pops_after_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..60 {
        s.push(i % 2, &item(i % 2, i)).unwrap();
    }
    let a = s.pop(0).unwrap().unwrap();
    let pos = s.sync().unwrap();
    // Across several blocks, and one host emptied.
    for _ in 0..11 {
        s.pop(0).unwrap().unwrap();
    }
    drain(&mut s, 1);
    s.push(1, &item(1, 1000)).unwrap();
    s.sync().unwrap();
    drop(s);
    let mut s = QueueStore::reopen_discarding_after(dir.path(), tiny(), pos).unwrap();
    assert_eq!(s.recovery().tables_discarded, 1);
    assert_eq!(s.total(), 59);
    let want0: Vec<_> = (0..60)
        .filter(|i| i % 2 == 0 && item(0, *i) != a)
        .map(|i| item(0, i))
        .collect();
    assert_eq!(drain(&mut s, 0), want0);
    let want1: Vec<_> = (0..60).filter(|i| i % 2 == 1).map(|i| item(1, i)).collect();
    assert_eq!(drain(&mut s, 1), want1);
}

/// Items in flight given to `begin_sync_with` come back first; what was pushed and popped
/// after it does not.
#[test]
fn store_discard_in_flight_items_come_back_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = QueueStore::open(dir.path(), tiny()).unwrap();
    for i in 0..20 {
        s.push(1, &item(1, i)).unwrap();
    }
    let a = s.pop(1).unwrap().unwrap();
    let b = s.pop(1).unwrap().unwrap();
    let c = item(9, 0);
    let pending = s
        .begin_sync_with(&[(1, a.clone()), (1, b.clone()), (9, c.clone())])
        .unwrap();
    // The store goes on while the sync is written.
    for i in 20..40 {
        s.push(1, &item(1, i)).unwrap();
    }
    let pos = pending.write().unwrap();
    s.finish_sync(pos).unwrap();
    for _ in 0..5 {
        s.pop(1).unwrap();
    }
    s.flush().unwrap();
    drop(s);
    let mut s = QueueStore::reopen_discarding_after(dir.path(), tiny(), pos).unwrap();
    assert!(s.recovery().discarded_bytes > 0);
    assert_eq!(s.total(), 21);
    assert_eq!(s.pop(9).unwrap(), Some(c));
    let mut want = vec![a, b];
    want.extend((2..20).map(|i| item(1, i)));
    assert_eq!(drain(&mut s, 1), want);
}

/// Blocks before the position whose `next` link was patched (and synced) to point at a block
/// after it, then dropped: pushing to the same hosts after the discarding reopen appends new
/// blocks where the dropped ones were, and the links are never followed stale, across two more
/// syncs and reopens (discarding, then replaying).
#[test]
fn store_discard_then_push_and_sync_across_two_more_reopens() {
    let dir = tempfile::tempdir().unwrap();
    // Tails written when full (4 items) or at a sync only.
    let opts = StoreOptions {
        memory: 1 << 20,
        segment_bytes: 1 << 20,
        ..tiny()
    };
    let hosts = 6u64;
    // What each host should hold in the end.
    let mut want: Vec<Vec<QueuedUrl>> = vec![Vec::new(); hosts as usize];
    let mut n = 0u64;
    let mut push = |s: &mut QueueStore, want: &mut Vec<Vec<QueuedUrl>>, h: u64, keep: bool| {
        n += 1;
        s.push(h, &item(h, n)).unwrap();
        if keep {
            want[h as usize].push(item(h, n));
        }
    };
    let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
    // Tail blocks at the position not full; host 0's is also its head.
    for (h, count) in [3, 5, 6, 7, 2, 9].into_iter().enumerate() {
        for _ in 0..count {
            push(&mut s, &mut want, h as u64, true);
        }
    }
    let pos = s.sync().unwrap();
    // After the position, to every host: links patched into the tail blocks as of the
    // position, written by the next sync; then more, flushed.
    for _ in 0..3 {
        for h in 0..hosts {
            push(&mut s, &mut want, h, false);
        }
    }
    s.sync().unwrap();
    for h in 0..hosts {
        push(&mut s, &mut want, h, false);
    }
    s.flush().unwrap();
    drop(s);
    assert_eq!(links_past(dir.path(), pos.log_end), hosts as usize);

    let mut s = QueueStore::reopen_discarding_after(dir.path(), opts.clone(), pos).unwrap();
    // Host 0: its tail block read as a window (with the stale link) before the push.
    assert_eq!(s.pop(0).unwrap(), Some(want[0].remove(0)));
    // Hosts 0..4 get new blocks, written where the dropped ones were; hosts 4 and 5 keep
    // their stale links, now pointing at other hosts' blocks.
    for _ in 0..5 {
        for h in 0..4 {
            push(&mut s, &mut want, h, true);
        }
    }
    assert_eq!(s.pop(1).unwrap(), Some(want[1].remove(0)));
    let pos2 = s.sync().unwrap();
    // Dropped again by the next reopen.
    for h in 0..hosts {
        push(&mut s, &mut want, h, false);
    }
    s.flush().unwrap();
    drop(s);

    let mut s = QueueStore::reopen_discarding_after(dir.path(), opts.clone(), pos2).unwrap();
    assert!(s.recovery().discarded_bytes > 0);
    for _ in 0..3 {
        for h in 1..hosts {
            push(&mut s, &mut want, h, true);
        }
    }
    let pos3 = s.sync().unwrap();
    // Kept: this reopen replays.
    for h in 0..hosts {
        push(&mut s, &mut want, h, true);
    }
    s.flush().unwrap();
    drop(s);

    let mut s = QueueStore::reopen_at(dir.path(), opts, pos3).unwrap();
    assert_eq!(s.recovery().blocks_replayed, hosts);
    let total: usize = want.iter().map(Vec::len).sum();
    assert_eq!(s.total(), total as u64);
    for h in 0..hosts {
        assert_eq!(drain(&mut s, h), want[h as usize], "host {h}");
    }
    assert!(s.is_empty());
}
