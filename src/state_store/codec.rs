//! [`UrlState`] as bytes: a version byte, then the fields in a fixed order, integers as
//! LEB128 varints and strings as a varint length and UTF-8 (an optional string's length is
//! stored plus one, 0 meaning absent); the payload digest and WARC record id in their
//! binary form when they have the archive's (see `Packed`).
//!
//! Why hand-written and not serde: a state is read on every lookup of a recrawl and written
//! on every record, 10^8 of them on disk, so its size matters (a typical state is ~120 bytes
//! here against ~300 as JSON) and it must stay readable as fields are added. The rule that
//! makes adding a field cheap: **fields are only ever appended**. A value written before a
//! field existed simply ends earlier, and the decoder gives the missing fields their default;
//! a value written by a newer crawler (a higher version byte) has fields this one does not
//! know after the ones it does, and they are skipped. So no rewrite of the store is ever
//! needed, and the version byte says which fields the writer knew.
//!
//! Guarantees: `decode(encode(s)) == s`; decoding never panics, and bytes that are not a
//! state (cut inside a field, a length past the end, bad UTF-8) are an error naming what.

use super::UrlState;

/// The fields this crawler writes: 1 = the fields of issue 21's first version; 2 adds
/// `near_digest`.
pub(crate) const VERSION: u8 = 2;

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_varint(out, 0),
        Some(s) => {
            put_varint(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

/// How a string field that usually has a fixed binary form is stored: its head varint is 0
/// for none, `2 · len + 1` for the string as it is, and `2` for the binary form (20 bytes of
/// SHA-1 for `sha1:BASE32`, 16 bytes for `<urn:uuid:…>`), used only when it turns back into
/// exactly the same string. It saves ~55 of a state's ~180 bytes.
#[derive(Clone, Copy)]
enum Packed {
    Sha1,
    Uuid,
}

impl Packed {
    fn pack(self, s: &str) -> Option<Vec<u8>> {
        let bytes = match self {
            Packed::Sha1 => data_encoding::BASE32
                .decode(s.strip_prefix("sha1:")?.as_bytes())
                .ok()?,
            Packed::Uuid => {
                let inner = s.strip_prefix("<urn:uuid:")?.strip_suffix('>')?;
                uuid::Uuid::parse_str(inner).ok()?.as_bytes().to_vec()
            }
        };
        (bytes.len() == self.len() && self.unpack(&bytes) == s).then_some(bytes)
    }

    fn unpack(self, bytes: &[u8]) -> String {
        match self {
            Packed::Sha1 => format!("sha1:{}", data_encoding::BASE32.encode(bytes)),
            Packed::Uuid => {
                let mut id = [0u8; 16];
                id.copy_from_slice(&bytes[..16]);
                format!("<urn:uuid:{}>", uuid::Uuid::from_bytes(id))
            }
        }
    }

    fn len(self) -> usize {
        match self {
            Packed::Sha1 => 20,
            Packed::Uuid => 16,
        }
    }
}

fn put_packed(out: &mut Vec<u8>, s: Option<&str>, form: Packed) {
    match s {
        None => put_varint(out, 0),
        Some(s) => match form.pack(s) {
            Some(bytes) => {
                put_varint(out, 2);
                out.extend_from_slice(&bytes);
            }
            None => {
                put_varint(out, 2 * s.len() as u64 + 1);
                out.extend_from_slice(s.as_bytes());
            }
        },
    }
}

/// Appends the encoding of `state` to `out`.
pub(crate) fn encode(state: &UrlState, out: &mut Vec<u8>) {
    out.push(VERSION);
    put_str(out, Some(&state.url));
    put_varint(out, state.generation.into());
    put_varint(out, state.fetched_at);
    put_varint(out, state.status.into());
    put_str(out, state.etag.as_deref());
    put_str(out, state.last_modified.as_deref());
    put_packed(out, state.payload_digest.as_deref(), Packed::Sha1);
    put_packed(out, state.warc_record_id.as_deref(), Packed::Uuid);
    put_str(out, state.warc_date.as_deref());
    put_varint(out, state.changes.into());
    put_varint(out, state.checks.into());
    put_varint(out, state.interval_secs);
    put_varint(out, state.next_due);
    put_varint(out, state.gone_generations.into());
    put_str(out, state.near_digest.as_deref());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn at_end(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn varint(&mut self, what: &str) -> Result<u64, String> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err(format!("{what}: cut inside a number"));
            };
            self.at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(format!("{what}: a number longer than 64 bits"))
    }

    /// A field appended after the value was written reads as its default.
    fn number<T: TryFrom<u64> + Default>(&mut self, what: &str) -> Result<T, String> {
        if self.at_end() {
            return Ok(T::default());
        }
        let n = self.varint(what)?;
        T::try_from(n).map_err(|_| format!("{what}: {n} out of range"))
    }

    fn bytes(&mut self, len: usize, what: &str) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| format!("{what}: {len} bytes, past the end"))?;
        let bytes = &self.bytes[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn packed(&mut self, form: Packed, what: &str) -> Result<Option<String>, String> {
        if self.at_end() {
            return Ok(None);
        }
        match self.varint(what)? {
            0 => Ok(None),
            2 => Ok(Some(form.unpack(self.bytes(form.len(), what)?))),
            h if h % 2 == 1 => {
                let len = usize::try_from(h / 2).map_err(|_| format!("{what}: length {h}"))?;
                let bytes = self.bytes(len, what)?;
                let s = std::str::from_utf8(bytes).map_err(|_| format!("{what}: not UTF-8"))?;
                Ok(Some(s.to_string()))
            }
            h => Err(format!("{what}: unknown form {h}")),
        }
    }

    fn string(&mut self, what: &str) -> Result<Option<String>, String> {
        if self.at_end() {
            return Ok(None);
        }
        let n = self.varint(what)?;
        if n == 0 {
            return Ok(None);
        }
        let len = usize::try_from(n - 1).map_err(|_| format!("{what}: length {n}"))?;
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| format!("{what}: {len} bytes, past the end"))?;
        let s = std::str::from_utf8(&self.bytes[self.at..end])
            .map_err(|_| format!("{what}: not UTF-8"))?;
        self.at = end;
        Ok(Some(s.to_string()))
    }
}

/// The state `bytes` encode.
pub(crate) fn decode(bytes: &[u8]) -> Result<UrlState, String> {
    let Some((&version, rest)) = bytes.split_first() else {
        return Err("empty value".into());
    };
    if version == 0 {
        return Err("version 0".into());
    }
    let mut r = Reader { bytes: rest, at: 0 };
    Ok(UrlState {
        url: r.string("url")?.unwrap_or_default(),
        generation: r.number("generation")?,
        fetched_at: r.number("fetched_at")?,
        status: r.number("status")?,
        etag: r.string("etag")?,
        last_modified: r.string("last_modified")?,
        payload_digest: r.packed(Packed::Sha1, "payload_digest")?,
        warc_record_id: r.packed(Packed::Uuid, "warc_record_id")?,
        warc_date: r.string("warc_date")?,
        changes: r.number("changes")?,
        checks: r.number("checks")?,
        interval_secs: r.number("interval_secs")?,
        next_due: r.number("next_due")?,
        gone_generations: r.number("gone_generations")?,
        near_digest: r.string("near_digest")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn full() -> UrlState {
        UrlState {
            url: "https://a.test/p/1?x=é".into(),
            generation: 3,
            fetched_at: 1_790_000_000,
            status: 200,
            etag: Some("\"abc\"".into()),
            last_modified: Some("Wed, 21 Oct 2015 07:28:00 GMT".into()),
            payload_digest: Some("sha1:ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".into()),
            warc_record_id: Some("<urn:uuid:12345678-1234-1234-1234-123456789abc>".into()),
            warc_date: Some("2026-11-26T08:00:00Z".into()),
            changes: 2,
            checks: 5,
            interval_secs: 86_400,
            next_due: 1_790_086_400,
            gone_generations: 1,
            near_digest: Some("0123456789abcdef".into()),
        }
    }

    #[test]
    fn round_trips_and_is_compact() {
        let mut bytes = Vec::new();
        encode(&full(), &mut bytes);
        assert_eq!(decode(&bytes).unwrap(), full());
        assert!(bytes.len() < 170, "{} bytes", bytes.len());
        let packed = bytes.len();
        // Strings that only look like a digest or a record id are kept as they are.
        let mut odd = full();
        odd.payload_digest = Some("sha1:abcdefghijklmnopqrstuvwxyz234567".into());
        odd.warc_record_id = Some("<urn:uuid:12345678-1234-1234-1234-123456789ABC>".into());
        bytes.clear();
        encode(&odd, &mut bytes);
        assert_eq!(decode(&bytes).unwrap(), odd);
        assert!(
            bytes.len() > packed + 40,
            "{} against {packed}",
            bytes.len()
        );
        let empty = UrlState::default();
        bytes.clear();
        encode(&empty, &mut bytes);
        assert_eq!(decode(&bytes).unwrap(), empty);
    }

    #[test]
    fn an_older_shorter_value_reads_with_defaults_and_a_newer_one_is_read_as_far_as_known() {
        let mut bytes = Vec::new();
        encode(&full(), &mut bytes);
        // A value from before `near_digest` existed (version 1): its last field missing.
        let mut v1 = bytes[..bytes.len() - 17].to_vec();
        v1[0] = 1;
        let older = decode(&v1).unwrap();
        assert_eq!(older.near_digest, None);
        assert_eq!(older.gone_generations, 1);
        // ... and one from before `gone_generations`: its last byte missing too.
        let older = decode(&v1[..v1.len() - 1]).unwrap();
        assert_eq!(older.gone_generations, 0);
        assert_eq!(older.next_due, full().next_due);
        // A newer crawler's value: a higher version and a field after ours.
        let mut newer = bytes.clone();
        newer[0] = VERSION + 1;
        put_str(&mut newer, Some("a field from the future"));
        assert_eq!(decode(&newer).unwrap(), full());
    }

    #[test]
    fn damage_is_an_error_naming_the_field() {
        let mut bytes = Vec::new();
        encode(&full(), &mut bytes);
        let e = decode(&bytes[..5]).unwrap_err();
        assert!(e.contains("url"), "{e}");
        assert!(decode(&[]).is_err());
        assert!(decode(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    proptest! {
        #[test]
        fn never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }
    }
}
