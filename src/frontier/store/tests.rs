//! Damaged blocks as the store meets them: whatever the damage, a pop returns the items before
//! the damaged block unchanged, then an error naming the segment and the block's offset (or,
//! for a truncated synced log, the reopen fails naming the file); never a panic.

use std::fs;
use std::path::Path;

use proptest::prelude::*;

use super::format::{
    block_checksum, group_checksum, segment_path, table_path, BlockHeader, GroupHeader,
    BLOCK_HEADER, FLAG_LZ4, GROUP_HEADER, SEGMENT_HEADER, SEGMENT_MAGIC, TABLE_MAGIC,
};
use super::{codec, QueueStore, QueuedUrl, StoreError, StoreOptions, StorePosition};

const HOST: u64 = 7;

fn options() -> StoreOptions {
    StoreOptions {
        memory: 1 << 20,
        block_items: 5,
        segment_bytes: 1 << 20,
        write_buffer: 4096,
    }
}

/// (offset, span, items) of every group of segment 1 (one host is pushed: each group holds
/// one entry).
fn blocks(bytes: &[u8]) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::new();
    let mut at = SEGMENT_HEADER as usize;
    let mut scratch = Vec::new();
    let mut entries = Vec::new();
    while let Some(h) = bytes
        .get(at..)
        .and_then(|b| b.first_chunk::<GROUP_HEADER>())
    {
        let h = GroupHeader::parse(h);
        assert_eq!(h.entries, 1);
        let body = &bytes[at + h.body_at()..at + h.body_at() + h.body_len as usize];
        let raw = codec::raw_body(body, h.compressed(), &mut scratch).expect("raw");
        codec::group_entries(raw, 1, &mut entries).expect("entries");
        out.push((at, h.span() as usize, entries[0].0));
        at += h.span() as usize;
    }
    out
}

fn arb_item() -> impl Strategy<Value = QueuedUrl> {
    let url = "http://www\\.site7\\.example\\.com/[a-z0-9/]{0,30}(\\?id=[0-9])?";
    let parent = "http://www\\.site[0-9]\\.example\\.com/[a-z0-9/]{0,20}";
    (
        url,
        0u32..50,
        proptest::option::of(parent),
        0u32..3,
        0u32..3,
    )
        .prop_map(|(url, depth, parent, redirect_hops, attempts)| QueuedUrl {
            url,
            depth,
            parent: parent.map(Into::into),
            redirect_hops,
            attempts,
        })
}

#[derive(Debug, Clone)]
enum Damage {
    /// Bytes of a body replaced and the checksum made right again: only the decoder can
    /// tell.
    Rewritten(Vec<(prop::sample::Index, u8)>),
    /// One byte of a block changed, checksum left as it was.
    Flipped(prop::sample::Index, u8),
    /// The synced segment cut inside a block.
    Truncated(prop::sample::Index),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)
            .prop_map(Damage::Rewritten),
        (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(i, x)| Damage::Flipped(i, x)),
        any::<prop::sample::Index>().prop_map(Damage::Truncated),
    ]
}

fn damaged_store(
    dir: &Path,
    items: &[QueuedUrl],
    which: prop::sample::Index,
    damage: &Damage,
) -> Result<(), TestCaseError> {
    let mut s = QueueStore::open(dir, options()).expect("open");
    for item in items {
        s.push(HOST, item).expect("push");
    }
    let pos = s.sync().expect("sync");
    drop(s);
    let seg = segment_path(dir, 1);
    let mut bytes = fs::read(&seg).expect("read");
    let list = blocks(&bytes);
    let b = which.index(list.len());
    let (at, span, _) = list[b];
    let before: usize = list[..b].iter().map(|&(_, _, n)| n as usize).sum();
    let h = GroupHeader::parse(bytes[at..].first_chunk::<GROUP_HEADER>().expect("a header"));
    let (body_at, body_len) = (h.body_at(), h.body_len as usize);
    match damage {
        Damage::Rewritten(edits) => {
            let body = at + body_at..at + body_at + body_len;
            for (i, x) in edits {
                let i = body.start + i.index(body_len);
                bytes[i] = *x;
            }
            let header: [u8; GROUP_HEADER] = bytes[at..at + GROUP_HEADER].try_into().expect("16");
            let sum = group_checksum(
                &header,
                &bytes[at + h.hosts_at()..at + body_at],
                &bytes[body],
            );
            bytes[at + 12..at + 16].copy_from_slice(&sum.to_le_bytes());
        }
        Damage::Flipped(i, x) => {
            // Not the `next` field (outside the checksum by design) nor the padding.
            let i = at + i.index(body_at + body_len - 8);
            let i = if i >= at + GROUP_HEADER { i + 8 } else { i };
            bytes[i] ^= x;
        }
        Damage::Truncated(i) => bytes.truncate(at + 1 + i.index(span - 1)),
    }
    fs::write(&seg, &bytes).expect("write");
    let mut s = match QueueStore::reopen_at(dir, options(), pos) {
        Ok(s) => s,
        Err(e) => {
            prop_assert!(matches!(damage, Damage::Truncated(_)), "{e}");
            prop_assert!(e.to_string().contains("seg-00000001.log"), "{e}");
            return Ok(());
        }
    };
    prop_assert!(!matches!(damage, Damage::Truncated(_)));
    for (n, want) in items.iter().enumerate() {
        match s.pop(HOST) {
            Ok(Some(got)) if n < before => prop_assert_eq!(&got, want),
            // A rewritten body may decode to other, valid items: only a checksum over
            // the contents would tell, and it was made right on purpose.
            Ok(Some(_)) => prop_assert!(matches!(damage, Damage::Rewritten(_))),
            Ok(None) => prop_assert!(false, "ran dry after {n} items"),
            Err(StoreError::Corrupt { path, offset, what }) => {
                prop_assert_eq!(&path, &seg);
                prop_assert_eq!(offset, at as u64, "{}", what);
                prop_assert!(n >= before, "{what}");
                return Ok(());
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_damaged_block_is_an_error_naming_file_and_offset(
        items in proptest::collection::vec(arb_item(), 1..30),
        which in any::<prop::sample::Index>(),
        damage in damage(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        damaged_store(dir.path(), &items, which, &damage)?;
    }
}

/// A host's run of links found on one page, in the scale bench's shape, takes less than
/// half the bytes of its strings, header included.
#[test]
fn front_coding_takes_bench_shaped_urls_to_a_few_dozen_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = QueueStore::open(dir.path(), options()).expect("open");
    let parent = "http://www.site4242.example.com/section-3/article-170.html";
    for i in 0..5 {
        let item = QueuedUrl {
            url: format!(
                "http://www.site7.example.com/section-{}/article-{}.html",
                i * 3 % 17,
                i * 37
            ),
            depth: 3,
            parent: Some(parent.into()),
            redirect_hops: 0,
            attempts: 0,
        };
        s.push(HOST, &item).expect("push");
    }
    s.sync().expect("sync");
    let bytes = fs::read(segment_path(dir.path(), 1)).expect("read");
    let list = blocks(&bytes);
    assert_eq!(list.len(), 1);
    let (_, span, count) = list[0];
    assert_eq!(count, 5);
    // Version 1 stored the strings whole behind a 40-byte header: ~680 bytes here.
    let strings: usize = 5 * parent.len()
        + (0..5)
            .map(|i| 50 + format!("{}{}", i * 3 % 17, i * 37).len())
            .sum::<usize>();
    assert!(
        span * 2 < strings,
        "{span} bytes for 5 items ({strings} bytes of strings)"
    );
}

fn bench_item(host: u64, page: u64, parent_host: u64) -> QueuedUrl {
    QueuedUrl {
        url: format!(
            "http://www.site{host}.example.com/section-{}/article-{page}.html",
            page % 17
        ),
        depth: 2,
        parent: Some(
            format!(
                "http://www.site{parent_host}.example.com/section-3/article-{}.html",
                page / 3
            )
            .into(),
        ),
        redirect_hops: 0,
        attempts: 0,
    }
}

/// Links of pages to hosts drawn from many (the scale bench's 30 %): each host's tail holds
/// one URL when the tails are written, and a group takes them together for far less than a
/// block each (version 2: ~140 bytes per URL).
#[test]
fn one_url_tails_of_many_hosts_share_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = QueueStore::open(
        dir.path(),
        StoreOptions {
            segment_bytes: 64 << 20,
            ..StoreOptions::default()
        },
    )
    .expect("open");
    let n = 3000u64;
    for i in 0..n {
        // Three links to other hosts per page, as the bench's pages have.
        let host = 1000 + i * 7919 % 100_000;
        s.push(host, &bench_item(host, i % 40, 50 + i / 3))
            .expect("push");
    }
    s.sync().expect("sync");
    let len = std::fs::metadata(segment_path(dir.path(), 1))
        .expect("segment")
        .len();
    let per_url = (len - SEGMENT_HEADER) as f64 / n as f64;
    // 42 when this was written; version 2 took ~140.
    assert!(per_url < 50.0, "{per_url:.1} bytes per URL");
    for i in 0..n {
        let host = 1000 + i * 7919 % 100_000;
        assert_eq!(
            s.pop(host).expect("pop"),
            Some(bench_item(host, i % 40, 50 + i / 3))
        );
    }
    assert!(s.is_empty());
}

/// Writes a store of format version 2 (one block per host run, 32-byte headers) holding
/// `runs` (host, items), in that order, as that version's code wrote it; returns its
/// position.
fn write_version_2_store(dir: &Path, runs: &[(u64, Vec<QueuedUrl>)]) -> StorePosition {
    fs::create_dir_all(dir).expect("dir");
    let mut seg = Vec::new();
    seg.extend_from_slice(&SEGMENT_MAGIC);
    seg.extend_from_slice(&2u32.to_le_bytes());
    seg.extend_from_slice(&1u32.to_le_bytes());
    // host → (head, tail, unread)
    let mut hosts: Vec<(u64, u64, u64, u64)> = Vec::new();
    let (mut body, mut scratch) = (Vec::new(), Vec::new());
    for (seq, (host, items)) in runs.iter().enumerate() {
        let at = seg.len() as u64;
        let compressed = codec::encode_body(items, &mut body, &mut scratch);
        let flags = if compressed { FLAG_LZ4 } else { 0 };
        let mut header = BlockHeader::encode(body.len(), items.len(), flags, *host, seq as u64 + 1);
        let sum = block_checksum(&header, &body);
        header[20..24].copy_from_slice(&sum.to_le_bytes());
        seg.extend_from_slice(&header);
        seg.extend_from_slice(&body);
        seg.resize(
            (BLOCK_HEADER + body.len()).next_multiple_of(8) + at as usize,
            0,
        );
        let loc = 1u64 << 32 | at;
        match hosts.iter_mut().find(|h| h.0 == *host) {
            Some(h) => {
                let prev = (h.2 & 0xFFFF_FFFF) as usize;
                seg[prev + 24..prev + 32].copy_from_slice(&loc.to_le_bytes());
                h.2 = loc;
                h.3 += items.len() as u64;
            }
            None => hosts.push((*host, loc, loc, items.len() as u64)),
        }
    }
    let log_end = 1u64 << 32 | seg.len() as u64;
    fs::write(segment_path(dir, 1), &seg).expect("segment");
    let mut t = Vec::new();
    t.extend_from_slice(&TABLE_MAGIC);
    t.extend_from_slice(&2u32.to_le_bytes());
    t.extend_from_slice(&0u32.to_le_bytes());
    for v in [1, log_end, runs.len() as u64 + 1, 1, hosts.len() as u64, 1] {
        t.extend_from_slice(&v.to_le_bytes());
    }
    for &(host, head, tail, unread) in &hosts {
        t.extend_from_slice(&host.to_le_bytes());
        t.extend_from_slice(&head.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        t.extend_from_slice(&unread.to_le_bytes());
        t.extend_from_slice(&tail.to_le_bytes());
    }
    let total: u64 = hosts.iter().map(|h| h.3).sum();
    t.extend_from_slice(&1u64.to_le_bytes());
    t.extend_from_slice(&total.to_le_bytes());
    let checksum = crate::durable::checksum_of(&[&t]);
    t.extend_from_slice(&checksum.to_le_bytes());
    fs::write(table_path(dir, 1), &t).expect("table");
    StorePosition {
        generation: 1,
        log_end,
        table_checksum: checksum,
    }
}

/// A store of the previous format (version 2) is read: its items pop in order, whether it is
/// reopened with its later log replayed or dropped; new pushes go to a segment of this
/// version, linked from the old blocks, and survive the next sync and reopen.
#[test]
fn a_store_of_format_version_2_is_read_and_extended() {
    let item = |host: u64, i: u64| bench_item(host, i, 9);
    let runs: Vec<(u64, Vec<QueuedUrl>)> = vec![
        (1, (0..5).map(|i| item(1, i)).collect()),
        (2, (0..1).map(|i| item(2, i)).collect()),
        (1, (5..9).map(|i| item(1, i)).collect()),
        (3, (0..40).map(|i| item(3, i)).collect()),
        (2, (1..3).map(|i| item(2, i)).collect()),
    ];
    for discard in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let pos = write_version_2_store(dir.path(), &runs);
        let reopen = |pos| {
            if discard {
                QueueStore::reopen_discarding_after(dir.path(), options(), pos)
            } else {
                QueueStore::reopen_at(dir.path(), options(), pos)
            }
        };
        let mut s = reopen(pos).expect("a version-2 store opens");
        assert_eq!(s.total(), 52);
        // One popped from the old blocks, then new items after the old ones.
        assert_eq!(s.pop(1).expect("pop"), Some(item(1, 0)));
        for i in 100..107 {
            s.push(1, &item(1, i)).expect("push");
            s.push(2, &item(2, i)).expect("push");
        }
        let pos = s.sync().expect("sync");
        drop(s);
        let mut s = reopen(pos).expect("reopen");
        let drain = |s: &mut QueueStore, host| {
            let mut v = Vec::new();
            while let Some(i) = s.pop(host).expect("pop") {
                v.push(i);
            }
            v
        };
        let want1: Vec<_> = (1..9).chain(100..107).map(|i| item(1, i)).collect();
        let want2: Vec<_> = (0..3).chain(100..107).map(|i| item(2, i)).collect();
        let want3: Vec<_> = (0..40).map(|i| item(3, i)).collect();
        assert_eq!(drain(&mut s, 1), want1, "discard {discard}");
        assert_eq!(drain(&mut s, 2), want2, "discard {discard}");
        assert_eq!(drain(&mut s, 3), want3, "discard {discard}");
        assert!(s.is_empty());
    }
}

/// A host's tally keeps its entry when its queue empties, and such an entry is queued nothing:
/// not counted by `host_count`, not listed by `hosts`, no record in the table (a reopened store
/// has no entry for it, and pops nothing from it), and queuing into it again works as into a
/// fresh one (pops in FIFO order, counted again).
#[test]
fn a_tallied_host_with_nothing_queued_keeps_its_tally_and_is_not_queued() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = QueueStore::open(dir.path(), options()).expect("open");
    let item = |host: u64, i: u64| bench_item(host, i, 9);
    // Host 1 tallied and drained; host 2 tallied, never queued; host 3 queued, no tally.
    s.tally_mut(1).queued_ever = 3;
    s.tally_mut(2).scheduled = true;
    for i in 0..3 {
        s.push(1, &item(1, i)).expect("push");
    }
    s.push(3, &item(3, 0)).expect("push");
    s.flush().expect("flush");
    for i in 0..3 {
        assert_eq!(s.pop(1).expect("pop"), Some(item(1, i)));
    }
    assert_eq!(s.pop(1).expect("pop"), None);
    assert_eq!(s.host_count(), 1);
    assert_eq!(s.hosts().collect::<Vec<_>>(), vec![(3, 1)]);
    assert_eq!(s.tally_count(), 2);
    assert_eq!(s.tally(1).map(|t| t.queued_ever), Some(3));
    assert!(s.tally(2).is_some_and(|t| t.scheduled));
    assert!(s.tally(3).is_none());
    let pos = s.sync().expect("sync");
    let mut reopened = QueueStore::reopen_at(dir.path(), options(), pos).expect("reopen");
    assert_eq!(reopened.host_count(), 1);
    assert_eq!(reopened.total(), 1);
    assert_eq!(reopened.pop(1).expect("pop"), None);
    assert_eq!(reopened.pop(3).expect("pop"), Some(item(3, 0)));
    drop(reopened);
    // Refilled after emptying: a queue again, in order, with the tally kept.
    for i in 10..13 {
        s.push(1, &item(1, i)).expect("push");
    }
    s.push_front(2, item(2, 0));
    assert_eq!(s.host_count(), 3);
    assert_eq!(s.pop(2).expect("pop"), Some(item(2, 0)));
    for i in 10..13 {
        assert_eq!(s.pop(1).expect("pop"), Some(item(1, i)));
    }
    assert_eq!(s.host_count(), 1);
    assert_eq!(s.tally(1).map(|t| t.queued_ever), Some(3));
    assert_eq!(s.tally_count(), 2);
}
