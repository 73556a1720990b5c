//! A queued URL as Redis holds it in a host's queue (`q:<host>`) and in a lease's set
//! (`li:<host>`): a few packed bytes instead of JSON, so that a queued URL costs about its
//! own bytes (the README's "bytes per queued URL").
//!
//! # Layout
//! `flags` (1 byte: bit 0 the URL is stored without its host key, bit 1 a parent follows),
//! then LEB128 varints `depth`, `redirect_hops`, `attempts`; with a parent, varint `shared`
//! (how many leading bytes the parent has in common with the URL) and varint `len` followed
//! by the parent's other `len` bytes; last, the URL (after its host key when bit 0 is set)
//! up to the end of the item.
//!
//! # What it guarantees
//! - **Exact**: [`decode`] gives back every field [`encode`] was given, the parent's text
//!   included (so each record's `parent` in `pages*.jsonl` is the one a local crawl writes);
//!   checked by a property test below.
//! - **One item per URL**: two URLs of a host never share an item (the URL is its tail),
//!   so acknowledging an item by its bytes (`release.lua`'s `SREM`) acknowledges one URL.
//! - **Size**: `URL bytes − host key bytes + 4 + parent bytes not shared with the URL`
//!   for depth, hops and attempts under 128 (they are, with the default limits); in a
//!   Redis list or set an item costs 2 to 4 bytes more. Measured on real queues by
//!   `tests/e2e/distributed.rs` and `cargo bench --bench distributed`.
//! - A damaged item is a [`QueueItemError`], never a panic.
//!
//! # Why this way
//! The parent is the field that made JSON items cost 161 bytes for 45-byte URLs: its text
//! again. It is stored as a reference to the item's own text: a link and the page it was
//! found on share their host key and most often a path prefix, so only the parent's
//! differing tail is kept (`/docs/a/b.html` found on `/docs/a/index.html`: 10 bytes). The
//! host key is already in the queue's key and the lease's reply, so the URL drops it: that
//! saves more than the fields cost. A table of parents in Redis (a fingerprint per item)
//! was the alternative: 8 bytes per item but ~120 bytes per parent page in a Redis hash,
//! and a reference count to free it, in every script that moves items; this codec keeps
//! the scripts unaware of what an item holds. Hand-written varints rather than a crate:
//! ten lines, and the layout is the contract with what Redis already holds.

use crate::frontier::QueuedUrl;

const RELATIVE: u8 = 1;
const HAS_PARENT: u8 = 2;

/// An item that does not decode: what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("a queued URL of {host} in Redis does not decode: {detail}")]
pub struct QueueItemError {
    pub host: String,
    pub detail: &'static str,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `at`, moving `at` past it.
fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `item` (a URL of host `host_key`) as Redis stores it.
pub fn encode(host_key: &str, item: &QueuedUrl) -> Vec<u8> {
    let url = item.url.as_bytes();
    let relative = !host_key.is_empty() && item.url.starts_with(host_key);
    let mut out = Vec::with_capacity(url.len() + 8);
    let mut flags = 0;
    if relative {
        flags |= RELATIVE;
    }
    if item.parent.is_some() {
        flags |= HAS_PARENT;
    }
    out.push(flags);
    put_varint(&mut out, u64::from(item.depth));
    put_varint(&mut out, u64::from(item.redirect_hops));
    put_varint(&mut out, u64::from(item.attempts));
    if let Some(parent) = &item.parent {
        let parent = parent.as_bytes();
        let shared = common_prefix(parent, url);
        put_varint(&mut out, shared as u64);
        put_varint(&mut out, (parent.len() - shared) as u64);
        out.extend_from_slice(&parent[shared..]);
    }
    out.extend_from_slice(if relative {
        &url[host_key.len()..]
    } else {
        url
    });
    out
}

/// Reads back an item [`encode`] made for `host_key`.
pub fn decode(host_key: &str, bytes: &[u8]) -> Result<QueuedUrl, QueueItemError> {
    let bad = |detail| QueueItemError {
        host: host_key.to_string(),
        detail,
    };
    let field = |v: Option<u64>| {
        v.and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| bad("a field is cut short or too large"))
    };
    let flags = *bytes.first().ok_or_else(|| bad("empty"))?;
    if flags & !(RELATIVE | HAS_PARENT) != 0 {
        return Err(bad("unknown flags (not an item of this version)"));
    }
    let mut at = 1;
    let depth = field(get_varint(bytes, &mut at))?;
    let redirect_hops = field(get_varint(bytes, &mut at))?;
    let attempts = field(get_varint(bytes, &mut at))?;
    let mut parent_parts = None;
    if flags & HAS_PARENT != 0 {
        let shared = field(get_varint(bytes, &mut at))? as usize;
        let len = field(get_varint(bytes, &mut at))? as usize;
        let end = at
            .checked_add(len)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| bad("the parent is cut short"))?;
        parent_parts = Some((shared, at..end));
        at = end;
    }
    let mut url = Vec::with_capacity(host_key.len() + bytes.len() - at);
    if flags & RELATIVE != 0 {
        url.extend_from_slice(host_key.as_bytes());
    }
    url.extend_from_slice(&bytes[at..]);
    let parent = match parent_parts {
        None => None,
        Some((shared, tail)) => {
            let head = url
                .get(..shared)
                .ok_or_else(|| bad("the parent shares more than the URL has"))?;
            let mut parent = head.to_vec();
            parent.extend_from_slice(&bytes[tail]);
            Some(
                String::from_utf8(parent)
                    .map_err(|_| bad("the parent is not UTF-8"))?
                    .into(),
            )
        }
    };
    let url = String::from_utf8(url).map_err(|_| bad("the URL is not UTF-8"))?;
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

    #[test]
    fn a_link_costs_its_path_and_the_parents_differing_tail() {
        let host = "https://docs.example.org";
        let item = QueuedUrl::new(
            "https://docs.example.org/en/latest/api/b.html".into(),
            3,
            Some("https://docs.example.org/en/latest/api/index.html".into()),
            0,
        );
        let bytes = encode(host, &item);
        // flags, 3 fields, shared, len, "index.html", "/en/latest/api/b.html"
        assert_eq!(bytes.len(), 1 + 3 + 2 + 10 + 21);
        assert_eq!(decode(host, &bytes).unwrap(), item);
        // A seed: no parent. A URL not starting with its key (`http://[::1]:80/` under the
        // key `http://[::1]`, were a key ever to differ) is kept whole.
        let seed = QueuedUrl::new("http://a.test/x".into(), 0, None, 0);
        let bytes = encode("http://b.test", &seed);
        assert_eq!(bytes.len(), 4 + seed.url.len());
        assert_eq!(decode("http://b.test", &bytes).unwrap(), seed);
    }

    #[test]
    fn damaged_items_are_errors() {
        let host = "http://h.test";
        assert!(decode(host, b"").is_err());
        assert!(decode(host, &[0x80]).is_err(), "unknown flags");
        assert!(decode(host, &[HAS_PARENT, 0, 0, 0, 200, 1]).is_err());
        assert!(decode(host, &[HAS_PARENT, 0, 0, 0, 0, 9, b'x']).is_err());
        assert!(decode(host, &[0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(decode(host, &[0, 0, 0, 0, 0xff]).is_err(), "not UTF-8");
    }

    proptest! {
        /// Whatever the fields, the item decodes to them, parent text included.
        #[test]
        fn decodes_to_what_was_encoded(
            path in "(/[a-zé%0-9]{0,12}){0,4}",
            parent in proptest::option::of("(https?://[a-h.]{1,8}(:[0-9]{2})?)?(/[a-zé0-9]{0,12}){0,4}"),
            depth in any::<u32>(),
            hops in 0u32..40,
            attempts in any::<u32>(),
            host in "https?://[a-h.]{1,8}",
        ) {
            let url = format!("{host}{path}");
            let item = QueuedUrl { url, depth, parent: parent.map(Into::into), redirect_hops: hops, attempts };
            for key in [host.as_str(), "", "http://other.test"] {
                let bytes = encode(key, &item);
                prop_assert_eq!(decode(key, &bytes).unwrap(), item.clone());
            }
        }
    }
}
