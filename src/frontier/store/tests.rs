//! Damaged blocks as the store meets them: whatever the damage, a pop returns the items before
//! the damaged block unchanged, then an error naming the segment and the block's offset (or,
//! for a truncated synced log, the reopen fails naming the file); never a panic.

use std::fs;
use std::path::Path;

use proptest::prelude::*;

use super::format::{block_checksum, segment_path, BlockHeader, BLOCK_HEADER, SEGMENT_HEADER};
use super::{QueueStore, QueuedUrl, StoreError, StoreOptions};

const HOST: u64 = 7;

fn options() -> StoreOptions {
    StoreOptions {
        memory: 1 << 20,
        block_items: 5,
        segment_bytes: 1 << 20,
        write_buffer: 4096,
    }
}

/// (offset, span, items) of every block of segment 1.
fn blocks(bytes: &[u8]) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::new();
    let mut at = SEGMENT_HEADER as usize;
    while let Some(h) = bytes
        .get(at..)
        .and_then(|b| b.first_chunk::<BLOCK_HEADER>())
    {
        let h = BlockHeader::parse(h);
        out.push((at, h.span() as usize, h.count));
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
            parent,
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
    let body_len = BlockHeader::parse(bytes[at..].first_chunk::<BLOCK_HEADER>().expect("a header"))
        .body_len as usize;
    match damage {
        Damage::Rewritten(edits) => {
            let body = at + BLOCK_HEADER..at + BLOCK_HEADER + body_len;
            for (i, x) in edits {
                let i = body.start + i.index(body_len);
                bytes[i] = *x;
            }
            let header: [u8; BLOCK_HEADER] = bytes[at..at + BLOCK_HEADER].try_into().expect("32");
            let sum = block_checksum(&header, &bytes[body]);
            bytes[at + 20..at + 24].copy_from_slice(&sum.to_le_bytes());
        }
        Damage::Flipped(i, x) => {
            // Not the `next` field (outside the checksum by design) nor the padding.
            let i = at + i.index(BLOCK_HEADER + body_len - 8);
            let i = if i >= at + 24 { i + 8 } else { i };
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
