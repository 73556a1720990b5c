//! The body of a block: a host's queued URLs, front-coded and varint-packed, and compressed
//! with LZ4 when that pays. Nothing here does I/O; `format.rs` lays out the header around it.
//!
//! # Why this shape
//!
//! A block holds consecutive URLs of one host, and a host's URLs share long prefixes
//! (`https://www.example.com/section-…`); the page each was found on (its parent) is the
//! same for runs of items (a page's links are admitted together) or shares a prefix with the
//! item's own URL (a link to the same host). So each string is stored as the length of the
//! prefix it shares with a *base* and the bytes after it (front coding): a URL against the
//! previous item's URL, a parent against the previous item's parent or against its own URL,
//! whichever shares more, or as "the same parent as before" in no bytes at all. Integers are
//! LEB128 varints, and the small fields (depth, whether there are redirects or attempts, how
//! the parent is coded) share one leading byte, so the common item costs one byte plus its
//! two suffixes. For the scale bench's URLs (`benches/scale.rs`, `store::tests`) the first
//! item of a block takes ~100 bytes (version 1: ~130) and each further link of the same page
//! ~21; the store went from 192 to 89 bytes per queued URL at 1e7 with this coding, and to 35
//! with groups (format version 3, below; figures in `store`'s doc).
//!
//! Front coding leaves the repeats *between* suffixes (`.html`, `/article-`, query keys) and
//! the other host's name in a cross-host parent. A body of at least [`COMPRESS_MIN`] bytes is
//! then compressed with LZ4 ([`lz4_flex`], pure Rust, its safe decoder: a corrupt block is
//! an error, not a crash) and kept compressed only if that saves an eighth. LZ4 was chosen
//! for its decoding speed (the pop path) and for adding no C library to the build; zstd at a
//! low level would likely compress somewhat smaller, but that was not measured here, and
//! neither was how often LZ4 pays on the scale bench's blocks (most are one URL long, under
//! the threshold): a measurement to make before changing either.
//! Decoding always validates: lengths against what is left, prefixes against the base,
//! UTF-8 of the result, so a damaged body that passed its checksum still gives an error
//! saying what was wrong, never a panic or a half-decoded URL.
//!
//! # Item layout (before compression)
//!
//! | field | form |
//! |---|---|
//! | head | 1 byte: bits 0–1 parent kind (0 none, 1 same as the previous item's, 2 front-coded against the previous item's, 3 front-coded against this item's URL), bit 2 `extras`, bits 3–7 depth (31: a varint `depth − 31` follows the URL) |
//! | URL | varint shared prefix with the previous item's URL (0 for the first), varint suffix length, suffix |
//! | depth | varint, only if bits 3–7 are 31 |
//! | parent | kinds 2 and 3: varint shared prefix, varint suffix length, suffix |
//! | extras | only if bit 2: varint redirect hops, varint attempts |
//!
//! A compressed body is a varint of the raw length followed by LZ4 block data; the block
//! header's flags say which form a body has.
//!
//! # Group body (format version 3)
//!
//! A group's raw body is, for each of its `n` entries, a varint item count (≥ 1) and a varint
//! byte length, then the entries' items back to back, each entry front-coded on its own as
//! above (its first item against nothing), so that one entry decodes without the others.
//! What entries share (the scheme and `www.`, the path shapes, the parent of a page's links to
//! several hosts) is left to LZ4 over the whole body, which is why a group is compressed as one
//! (~8 KiB raw) and not entry by entry: a one-URL entry alone is under [`COMPRESS_MIN`].
//! Version 2's blocks are a single entry's items without the count and length.

use std::collections::VecDeque;
use std::sync::Arc;

use super::QueuedUrl;

/// Bodies shorter than this are stored raw: LZ4 has nothing to find in a hundred bytes that
/// front coding did not already take.
pub(super) const COMPRESS_MIN: usize = 192;
/// Most bytes a body may decode to (a block of `block_items` URLs is far below it).
pub(super) const MAX_RAW: usize = 64 << 20;

const PARENT_NONE: u8 = 0;
const PARENT_SAME: u8 = 1;
const PARENT_PREV: u8 = 2;
const PARENT_OWN: u8 = 3;
const EXTRAS: u8 = 1 << 2;
const DEPTH_ESCAPE: u32 = 31;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn put_front_coded(out: &mut Vec<u8>, base: &[u8], s: &[u8]) {
    let shared = shared_prefix(base, s);
    put_varint(out, shared as u64);
    put_varint(out, (s.len() - shared) as u64);
    out.extend_from_slice(&s[shared..]);
}

/// Appends `item` to a body whose last item is `prev` (`None` for the first of a block).
pub(super) fn encode_item(out: &mut Vec<u8>, item: &QueuedUrl, prev: Option<&QueuedUrl>) {
    // Destructured so that a new field fails to compile here instead of being dropped.
    let QueuedUrl {
        url,
        depth,
        parent,
        redirect_hops,
        attempts,
    } = item;
    let prev_url = prev.map_or(&b""[..], |p| p.url.as_bytes());
    let prev_parent = prev.and_then(|p| p.parent.as_deref()).map(str::as_bytes);
    let parent = parent.as_deref().map(str::as_bytes);
    let (kind, base) = match (parent, prev_parent) {
        (None, _) => (PARENT_NONE, &b""[..]),
        (Some(p), Some(pp)) if p == pp => (PARENT_SAME, &b""[..]),
        (Some(p), Some(pp)) if shared_prefix(p, pp) >= shared_prefix(p, url.as_bytes()) => {
            (PARENT_PREV, pp)
        }
        (Some(_), _) => (PARENT_OWN, url.as_bytes()),
    };
    let extras = *redirect_hops != 0 || *attempts != 0;
    let depth_bits = (*depth).min(DEPTH_ESCAPE) as u8;
    out.push(kind | if extras { EXTRAS } else { 0 } | depth_bits << 3);
    put_front_coded(out, prev_url, url.as_bytes());
    if *depth >= DEPTH_ESCAPE {
        put_varint(out, (*depth - DEPTH_ESCAPE) as u64);
    }
    if let (PARENT_PREV | PARENT_OWN, Some(p)) = (kind, parent) {
        put_front_coded(out, base, p);
    }
    if extras {
        put_varint(out, *redirect_hops as u64);
        put_varint(out, *attempts as u64);
    }
}

/// Appends `items`, one entry's, front-coded, to `out`.
pub(super) fn encode_items<'a>(items: impl IntoIterator<Item = &'a QueuedUrl>, out: &mut Vec<u8>) {
    let mut prev = None;
    for item in items {
        encode_item(out, item, prev);
        prev = Some(item);
    }
}

/// Encodes `items` as one body into `out` (cleared first), compressed if that pays; returns
/// whether it is compressed. `scratch` is a buffer kept by the caller between blocks.
#[cfg(test)]
pub(super) fn encode_body<'a>(
    items: impl IntoIterator<Item = &'a QueuedUrl>,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> bool {
    scratch.clear();
    encode_items(items, scratch);
    compress_body(scratch, out, &mut lz4_flex::block::CompressTable::default())
}

/// The body of a group into `out` (cleared first): per entry its item count and byte length
/// (`entries`), then `items`, the entries' encoded items back to back; compressed if that
/// pays (returned). `raw` and `table` are kept by the caller from group to group.
pub(super) fn encode_group_body(
    entries: &[(u32, usize)],
    items: &[u8],
    raw: &mut Vec<u8>,
    out: &mut Vec<u8>,
    table: &mut lz4_flex::block::CompressTable,
) -> bool {
    raw.clear();
    for &(count, len) in entries {
        put_varint(raw, count as u64);
        put_varint(raw, len as u64);
    }
    raw.extend_from_slice(items);
    compress_body(raw, out, table)
}

/// The raw bytes of a body: `body` itself, or decompressed into `scratch`.
pub(super) fn raw_body<'a>(
    body: &'a [u8],
    compressed: bool,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], String> {
    if !compressed {
        return Ok(body);
    }
    let mut r = Reader {
        bytes: body,
        at: 0,
        scratch: Vec::new(),
    };
    let len = r.varint()?;
    if len > MAX_RAW as u64 {
        return Err(format!("compressed body says it holds {len} bytes"));
    }
    scratch.clear();
    scratch.resize(len as usize, 0);
    let n = lz4_flex::block::decompress_into(&body[r.at..], scratch)
        .map_err(|e| format!("compressed body does not decompress: {e}"))?;
    if n != len as usize {
        return Err(format!("compressed body holds {n} bytes, it says {len}"));
    }
    Ok(scratch)
}

/// The entries of a group's raw body: (item count, byte range of its items) of each of its
/// `entries`, checked against the body's length (every count at least 1, the ranges
/// covering the rest of the body exactly).
pub(super) fn group_entries(
    raw: &[u8],
    entries: usize,
    out: &mut Vec<(u32, std::ops::Range<usize>)>,
) -> Result<(), String> {
    out.clear();
    let mut r = Reader {
        bytes: raw,
        at: 0,
        scratch: Vec::new(),
    };
    // Lengths first, kept in `out` as `0..len` until the ranges are known: no vector of their
    // own (at up to 255 entries, glibc served that one by consolidating its fast bins, once
    // per group decoded).
    for i in 0..entries {
        let count = r.varint()?;
        let len = r.varint()?;
        if count == 0 || count > u32::MAX as u64 {
            return Err(format!("entry {i} says it holds {count} items"));
        }
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        out.push((count as u32, 0..len));
    }
    let mut at = r.at;
    for (i, (_, range)) in out.iter_mut().enumerate() {
        let (len, left) = (range.end, raw.len() - at);
        if len > left {
            return Err(format!("entry {i} of {len} bytes at +{at}, {left} left"));
        }
        *range = at..at + len;
        at += len;
    }
    if at != raw.len() {
        return Err(format!(
            "{} bytes left after the last of {entries} entries",
            raw.len() - at
        ));
    }
    Ok(())
}

/// Puts the raw body `raw` into `out` (cleared first), LZ4-compressed if that saves an
/// eighth of it; returns whether it did.
///
/// `table` is LZ4's hash table, kept by the caller: `compress_into` allocates and zeroes a
/// fresh 8 KiB one per call, and on the scale bench that allocation, one per group written on
/// the admitting thread, was large enough to make glibc consolidate its fast bins each time
/// (`malloc_consolidate` and `unlink_chunk` ~6 % of that thread's samples at 3e6 URLs).
pub(super) fn compress_body(
    raw: &[u8],
    out: &mut Vec<u8>,
    table: &mut lz4_flex::block::CompressTable,
) -> bool {
    out.clear();
    if raw.len() >= COMPRESS_MIN {
        put_varint(out, raw.len() as u64);
        let start = out.len();
        out.resize(
            start + lz4_flex::block::get_maximum_output_size(raw.len()),
            0,
        );
        if let Ok(n) = lz4_flex::block::compress_into_with_table(raw, &mut out[start..], table) {
            if start + n <= raw.len() - raw.len() / 8 {
                out.truncate(start + n);
                return true;
            }
        }
        out.clear();
    }
    out.extend_from_slice(raw);
    false
}

/// Reads the bytes of a body in order; every read says what was missing where.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// A parent's text while it is put together (see [`Reader::front_coded_shared`]).
    scratch: Vec<u8>,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| format!("body ends at +{}, a byte expected", self.at))?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, String> {
        let start = self.at;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= ((b & 0x7F) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(format!("varint at +{start} longer than 64 bits"))
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(format!("{n} bytes expected at +{}, {left} left", self.at));
        }
        let s = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    /// A front-coded string against `base`.
    fn front_coded(&mut self, base: &[u8], what: &str) -> Result<String, String> {
        let at = self.at;
        let (shared, suffix) = self.front_coded_parts(base, what)?;
        let mut s = Vec::with_capacity(shared.len() + suffix.len());
        s.extend_from_slice(shared);
        s.extend_from_slice(suffix);
        String::from_utf8(s).map_err(|_| format!("{what} at +{at} is not UTF-8"))
    }

    /// [`Reader::front_coded`] as a shared string, put together in the reader's scratch:
    /// one allocation (the `Arc`'s), not a `String`'s too.
    fn front_coded_shared(&mut self, base: &[u8], what: &str) -> Result<Arc<str>, String> {
        let at = self.at;
        let (shared, suffix) = self.front_coded_parts(base, what)?;
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        s.extend_from_slice(shared);
        s.extend_from_slice(suffix);
        let text = std::str::from_utf8(&s)
            .map(Arc::from)
            .map_err(|_| format!("{what} at +{at} is not UTF-8"));
        self.scratch = s;
        text
    }

    /// The shared prefix of `base` and the suffix of a front-coded string.
    fn front_coded_parts<'b>(
        &mut self,
        base: &'b [u8],
        what: &str,
    ) -> Result<(&'b [u8], &'a [u8]), String> {
        let at = self.at;
        let shared = self.varint()?;
        if shared > base.len() as u64 {
            return Err(format!(
                "{what} at +{at} shares {shared} bytes with a base of {}",
                base.len()
            ));
        }
        let len = self.varint()?;
        let suffix = self.take(len)?;
        Ok((&base[..shared as usize], suffix))
    }
}

/// Decodes a body of `count` items (compressed if `compressed`), all of it, and returns the
/// items after the first `skip`. `scratch` holds the decompressed bytes.
pub(super) fn decode_body(
    body: &[u8],
    compressed: bool,
    count: u32,
    skip: u32,
    scratch: &mut Vec<u8>,
) -> Result<VecDeque<QueuedUrl>, String> {
    let raw = raw_body(body, compressed, scratch)?;
    decode_items(raw, count, skip)
}

/// Decodes `raw`, exactly `count` items, and returns those after the first `skip`.
pub(super) fn decode_items(
    raw: &[u8],
    count: u32,
    skip: u32,
) -> Result<VecDeque<QueuedUrl>, String> {
    let mut r = Reader {
        bytes: raw,
        at: 0,
        scratch: Vec::new(),
    };
    let mut items: VecDeque<QueuedUrl> =
        VecDeque::with_capacity(count.saturating_sub(skip) as usize);
    // The items skipped are kept apart, one at a time, as the base of the next.
    let mut skipped: Option<QueuedUrl> = None;
    for i in 0..count {
        let prev = if i > skip {
            items.back()
        } else {
            skipped.as_ref()
        };
        let item = decode_item(&mut r, prev).map_err(|e| format!("item {i}: {e}"))?;
        if i >= skip {
            items.push_back(item);
        } else {
            skipped = Some(item);
        }
    }
    if r.at != raw.len() {
        return Err(format!(
            "{} bytes left after the last of {count} items",
            raw.len() - r.at
        ));
    }
    Ok(items)
}

fn decode_item(r: &mut Reader, prev: Option<&QueuedUrl>) -> Result<QueuedUrl, String> {
    let head = r.byte()?;
    let url = r.front_coded(prev.map_or(b"", |p| p.url.as_bytes()), "URL")?;
    let mut depth = (head >> 3) as u32;
    if depth == DEPTH_ESCAPE {
        depth = u32::try_from(r.varint()?)
            .ok()
            .and_then(|d| d.checked_add(DEPTH_ESCAPE))
            .ok_or("depth beyond 32 bits")?;
    }
    let prev_parent = prev.and_then(|p| p.parent.as_ref());
    let parent = match head & 3 {
        PARENT_NONE => None,
        PARENT_SAME => Some(
            prev_parent
                .ok_or("parent said the same as the previous item's, which has none")?
                .clone(),
        ),
        PARENT_PREV => {
            let base =
                prev_parent.ok_or("parent coded against a previous parent that is not there")?;
            Some(r.front_coded_shared(base.as_bytes(), "parent")?)
        }
        _ => Some(r.front_coded_shared(url.as_bytes(), "parent")?),
    };
    let (mut redirect_hops, mut attempts) = (0, 0);
    if head & EXTRAS != 0 {
        redirect_hops = u32::try_from(r.varint()?).map_err(|_| "redirect hops beyond 32 bits")?;
        attempts = u32::try_from(r.varint()?).map_err(|_| "attempts beyond 32 bits")?;
    }
    Ok(QueuedUrl {
        url,
        depth,
        parent,
        redirect_hops,
        attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(url: &str, depth: u32, parent: Option<&str>, hops: u32, attempts: u32) -> QueuedUrl {
        QueuedUrl {
            url: url.into(),
            depth,
            parent: parent.map(Into::into),
            redirect_hops: hops,
            attempts,
        }
    }

    fn roundtrip(items: &[QueuedUrl]) -> (Vec<QueuedUrl>, usize, bool) {
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let compressed = encode_body(items, &mut out, &mut scratch);
        let back =
            decode_body(&out, compressed, items.len() as u32, 0, &mut scratch).expect("decodes");
        (back.into_iter().collect(), out.len(), compressed)
    }

    #[test]
    fn shared_prefixes_and_runs_of_one_parent_cost_little() {
        let parent = "http://www.site7.example.com/section-3/article-9.html";
        let items: Vec<_> = (0..16)
            .map(|i| {
                item(
                    &format!(
                        "http://www.site7.example.com/section-{}/article-{i}.html",
                        i % 5
                    ),
                    2,
                    Some(parent),
                    0,
                    0,
                )
            })
            .collect();
        let (back, len, _) = roundtrip(&items);
        assert_eq!(back, items);
        let plain: usize = items.iter().map(|i| i.url.len() + parent.len()).sum();
        assert!(len * 4 < plain, "{len} bytes for {plain} bytes of strings");
    }

    #[test]
    fn every_field_and_parent_kind_survives() {
        let items = vec![
            item("http://a.test/x", 0, None, 0, 0),
            item("http://a.test/y", 40, Some("http://a.test/"), 3, 0),
            item("http://a.test/yz", 31, Some("http://a.test/"), 0, 2),
            item(
                "http://a.test/é",
                u32::MAX,
                Some("http://b.test/q"),
                u32::MAX,
                u32::MAX,
            ),
            item("http://a.test/", 30, Some("http://b.test/r"), 0, 0),
            item("http://a.test/", 1, None, 0, 0),
        ];
        assert_eq!(roundtrip(&items).0, items);
    }

    #[test]
    fn skip_returns_the_items_after_it() {
        let items: Vec<_> = (0..5)
            .map(|i| item(&format!("http://a.test/{i}"), i, None, 0, 0))
            .collect();
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let c = encode_body(&items, &mut out, &mut scratch);
        let back = decode_body(&out, c, 5, 3, &mut scratch).expect("decodes");
        assert_eq!(back, &items[3..]);
    }

    #[test]
    fn a_long_repetitive_body_is_compressed() {
        let items: Vec<_> = (0..64)
            .map(|i| {
                item(
                    &format!("http://h{i}.test/section/article-{i}.html?x=1"),
                    1,
                    Some(&format!("http://p{i}.test/section/article-{i}.html")),
                    0,
                    0,
                )
            })
            .collect();
        let (back, _, compressed) = roundtrip(&items);
        assert!(compressed);
        assert_eq!(back, items);
    }

    fn arb_item() -> impl Strategy<Value = QueuedUrl> {
        let s = "(http://[a-c]\\.test/[a-cé/]{0,12})";
        (
            s,
            prop_oneof![0u32..40, any::<u32>()],
            proptest::option::of(s),
            prop_oneof![Just(0u32), any::<u32>()],
            prop_oneof![Just(0u32), any::<u32>()],
        )
            .prop_map(|(url, depth, parent, redirect_hops, attempts)| QueuedUrl {
                url,
                depth,
                parent: parent.map(Into::into),
                redirect_hops,
                attempts,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// What is encoded decodes to the same items, in order, with or without compression.
        #[test]
        fn bodies_roundtrip(items in proptest::collection::vec(arb_item(), 1..80)) {
            let (back, _, _) = roundtrip(&items);
            prop_assert_eq!(back, items);
        }

        /// A truncated or altered body, raw or compressed, decodes to an error or to some
        /// items, never a panic; cut short, a raw body is always an error.
        #[test]
        fn damaged_bodies_never_panic(
            items in proptest::collection::vec(arb_item(), 1..40),
            cut in any::<prop::sample::Index>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        ) {
            let (mut out, mut scratch) = (Vec::new(), Vec::new());
            let compressed = encode_body(&items, &mut out, &mut scratch);
            let n = items.len() as u32;
            let short = &out[..cut.index(out.len())];
            let r = decode_body(short, compressed, n, 0, &mut scratch);
            if !compressed {
                prop_assert!(r.is_err());
            }
            let mut bad = out.clone();
            for (at, x) in &flips {
                let i = at.index(bad.len());
                bad[i] ^= x | 1;
            }
            let _ = decode_body(&bad, compressed, n, 0, &mut scratch);
            let _ = decode_body(&bad, !compressed, n, 0, &mut scratch);
        }
    }
}
