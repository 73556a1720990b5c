//! Unit tests of the robots.txt cache: the model test against a map, damage, compaction.

use std::collections::HashMap;
use std::fs::OpenOptions;

use proptest::prelude::*;

use super::*;

fn options(write_buffer: usize, compact_min_dead: u64) -> RobotsCacheOptions {
    RobotsCacheOptions {
        write_buffer,
        compact_min_dead,
    }
}

fn body(s: &str) -> CachedRobots {
    CachedRobots::Body(s.as_bytes().to_vec())
}

fn file_len(cache: &RobotsCache) -> u64 {
    fs::metadata(cache.path()).unwrap().len()
}

fn flip(path: &Path, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x20], at).unwrap();
}

#[test]
fn put_get_replace_remove() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
    assert!(c.is_empty());
    assert_eq!(c.get(1, 0).unwrap(), None);
    c.put(1, 10_000, &CachedRobots::AllowAll).unwrap();
    c.put(2, 10_000, &body("User-agent: *\nDisallow: /x\n"))
        .unwrap();
    c.put(0, 10_000, &CachedRobots::Body(Vec::new())).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(c.get(1, 5).unwrap(), Some(CachedRobots::AllowAll));
    assert_eq!(
        c.get(2, 5).unwrap(),
        Some(body("User-agent: *\nDisallow: /x\n"))
    );
    assert_eq!(c.get(0, 5).unwrap(), Some(CachedRobots::Body(Vec::new())));
    c.put(2, 10_000, &CachedRobots::AllowAll).unwrap();
    c.put(1, 10_000, &body("Disallow: /")).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(c.get(2, 5).unwrap(), Some(CachedRobots::AllowAll));
    assert_eq!(c.get(1, 5).unwrap(), Some(body("Disallow: /")));
    c.remove(1);
    c.remove(1);
    c.remove(77);
    assert_eq!(c.len(), 2);
    assert_eq!(c.get(1, 5).unwrap(), None);
    c.check_invariants();
    // Served from the buffer so far; the same after a flush, from the file.
    assert_eq!(file_len(&c), FILE_HEADER);
    c.flush().unwrap();
    assert_eq!(file_len(&c), c.disk_bytes());
    assert_eq!(c.get(2, 5).unwrap(), Some(CachedRobots::AllowAll));
    assert_eq!(c.get(0, 5).unwrap(), Some(CachedRobots::Body(Vec::new())));
    assert_eq!(c.live_bytes(), 2 * RECORD_HEADER as u64);
}

#[test]
fn expiry_is_exact_to_the_millisecond() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
    c.put(1, 1_500, &body("a")).unwrap();
    c.put(2, u64::MAX, &body("b")).unwrap();
    c.put(3, 5_000_000_000_000, &body("c")).unwrap(); // past 2106: coarse expiry saturated
    c.put(4, 0, &body("d")).unwrap(); // expired when stored
    assert_eq!(c.get(1, 1_499).unwrap(), Some(body("a")));
    assert_eq!(c.get(1, 1_500).unwrap(), None);
    assert_eq!(c.len(), 3, "the expired entry is forgotten");
    assert_eq!(c.get(1, 0).unwrap(), None, "and stays forgotten");
    assert_eq!(c.get(4, 0).unwrap(), None);
    assert_eq!(c.get(2, u64::MAX - 1).unwrap(), Some(body("b")));
    assert_eq!(c.get(2, u64::MAX).unwrap(), None);
    assert_eq!(c.get(3, 4_999_999_999_999).unwrap(), Some(body("c")));
    assert_eq!(c.get(3, 5_000_000_000_000).unwrap(), None);
    assert!(c.is_empty());
    assert_eq!(c.live_bytes(), 0);
    c.check_invariants();
}

#[test]
fn forget_expired_drops_what_expired() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
    for h in 0..3000u64 {
        c.put(h, 1_000 * (h % 10 + 1), &CachedRobots::AllowAll)
            .unwrap();
    }
    assert_eq!(c.forget_expired(5_000), 1500);
    assert_eq!(c.len(), 1500);
    c.check_invariants();
    for h in 0..3000u64 {
        let want = (h % 10 + 1 > 5).then_some(CachedRobots::AllowAll);
        assert_eq!(c.get(h, 5_000).unwrap(), want, "host {h}");
    }
}

#[test]
fn bodies_up_to_the_limit_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), options(4096, 1 << 20)).unwrap();
    let max = CachedRobots::Body(vec![b'x'; MAX_BODY]);
    c.put(9, 1 << 40, &max).unwrap();
    let e = c
        .put(9, 1 << 40, &CachedRobots::Body(vec![b'y'; MAX_BODY + 1]))
        .unwrap_err();
    assert!(matches!(e, RobotsCacheError::TooLarge { len, host: 9, .. } if len == MAX_BODY + 1));
    assert!(e.to_string().contains(DATA_FILE), "{e}");
    assert_eq!(c.get(9, 0).unwrap(), Some(max), "the older entry stays");
    c.check_invariants();
}

#[test]
fn records_larger_than_the_buffer_and_buffered_ones_mix() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), options(100, 1 << 30)).unwrap();
    let mut want = HashMap::new();
    for h in 0..200u64 {
        let b = CachedRobots::Body(vec![h as u8; (h as usize * 7) % 150]);
        c.put(h, u64::MAX, &b).unwrap();
        want.insert(h, b);
        // Read back the newest (often still buffered) and an older one.
        assert_eq!(c.get(h, 0).unwrap().as_ref(), want.get(&h));
        assert_eq!(c.get(h / 2, 0).unwrap().as_ref(), want.get(&(h / 2)));
    }
    c.flush().unwrap();
    assert_eq!(file_len(&c), c.disk_bytes());
    for (h, b) in &want {
        assert_eq!(c.get(*h, 0).unwrap().as_ref(), Some(b));
    }
}

#[test]
fn compaction_keeps_exactly_the_live_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), options(512, 4096)).unwrap();
    let mut want: HashMap<u64, CachedRobots> = HashMap::new();
    for round in 0..20u64 {
        for h in 0..300u64 {
            match (h + round) % 7 {
                0 => {
                    c.remove(h);
                    want.remove(&h);
                }
                1 => {
                    c.put(h, u64::MAX, &CachedRobots::AllowAll).unwrap();
                    want.insert(h, CachedRobots::AllowAll);
                }
                _ => {
                    let b = CachedRobots::Body(format!("{round}/{h}").repeat(3).into_bytes());
                    c.put(h, u64::MAX, &b).unwrap();
                    want.insert(h, b);
                }
            }
        }
        c.check_invariants();
    }
    assert!(c.compactions() > 3, "{}", c.compactions());
    assert!(c.dead_bytes() <= c.live_bytes().max(4096) + 512);
    c.compact().unwrap();
    assert_eq!(c.dead_bytes(), 0);
    assert_eq!(c.disk_bytes(), FILE_HEADER + c.live_bytes());
    assert_eq!(
        file_len(&c),
        c.disk_bytes(),
        "nothing buffered after a compaction"
    );
    assert!(!dir.path().join(COMPACT_FILE).exists());
    assert_eq!(c.len(), want.len());
    for h in 0..300u64 {
        assert_eq!(c.get(h, 0).unwrap().as_ref(), want.get(&h), "host {h}");
    }
    assert_eq!(c.damaged_records(), 0);
}

#[test]
fn compaction_drops_what_expired_by_the_latest_get() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), options(512, 0)).unwrap();
    for h in 0..100u64 {
        c.put(h, if h % 2 == 0 { 10_000 } else { 20_000 }, &body("x"))
            .unwrap();
    }
    assert_eq!(c.get(1, 15_000).unwrap(), Some(body("x")));
    c.compact().unwrap();
    assert_eq!(c.len(), 50);
    assert_eq!(c.live_bytes(), 50 * (RECORD_HEADER as u64 + 1));
    for h in 0..100u64 {
        let want = (h % 2 == 1).then(|| body("x"));
        assert_eq!(c.get(h, 15_000).unwrap(), want);
    }
}

#[test]
fn reopening_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a/b");
    let mut c = RobotsCache::open(&sub, RobotsCacheOptions::default()).unwrap();
    for h in 0..10u64 {
        c.put(h, u64::MAX, &body("Disallow: /")).unwrap();
    }
    c.flush().unwrap();
    assert!(file_len(&c) > FILE_HEADER);
    drop(c);
    fs::write(sub.join(COMPACT_FILE), b"left over").unwrap();
    fs::write(sub.join("other"), b"not ours").unwrap();
    let mut c = RobotsCache::open(&sub, RobotsCacheOptions::default()).unwrap();
    assert!(c.is_empty());
    assert_eq!(c.get(3, 0).unwrap(), None);
    assert_eq!(file_len(&c), FILE_HEADER);
    assert_eq!(c.disk_bytes(), FILE_HEADER);
    assert!(!sub.join(COMPACT_FILE).exists());
    assert!(sub.join("other").exists());
}

#[test]
fn a_flipped_byte_anywhere_in_a_record_is_an_error_naming_file_and_offset() {
    let first = body("User-agent: *\nDisallow: /private\n");
    let second = body("Disallow: /");
    let second_at = FILE_HEADER + (RECORD_HEADER + 33) as u64;
    for (host, entry, at) in [(7u64, &first, FILE_HEADER), (8, &second, second_at)] {
        let CachedRobots::Body(b) = entry else {
            unreachable!()
        };
        for i in 0..(RECORD_HEADER + b.len()) as u64 {
            let dir = tempfile::tempdir().unwrap();
            let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
            c.put(7, u64::MAX, &first).unwrap();
            c.put(8, u64::MAX, &second).unwrap();
            c.flush().unwrap();
            flip(c.path(), at + i);
            match c.get(host, 0) {
                Err(RobotsCacheError::File(FileError::Corrupt { path, offset, what })) => {
                    assert_eq!(path, dir.path().join(DATA_FILE));
                    assert_eq!(offset, at, "byte {i}: {what}");
                }
                other => panic!("byte {i} of host {host}'s record: {other:?}"),
            }
            let msg = c.get(host, 0);
            assert!(matches!(msg, Ok(None)), "forgotten after the error");
            assert_eq!(c.damaged_records(), 1);
            // The other record is intact.
            let other = if host == 7 { 8 } else { 7 };
            let want = if host == 7 { &second } else { &first };
            assert_eq!(c.get(other, 0).unwrap().as_ref(), Some(want));
            c.check_invariants();
        }
    }
}

#[test]
fn error_messages_name_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
    c.put(1, u64::MAX, &body("abc")).unwrap();
    c.flush().unwrap();
    flip(c.path(), FILE_HEADER + RECORD_HEADER as u64 + 1);
    let e = c.get(1, 0).unwrap_err().to_string();
    assert!(e.contains(&c.path().display().to_string()), "{e}");
    assert!(e.contains("at byte 16"), "{e}");
    assert!(e.contains("checksum"), "{e}");
}

#[test]
fn a_truncated_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), RobotsCacheOptions::default()).unwrap();
    c.put(1, u64::MAX, &body("abc")).unwrap();
    c.put(2, u64::MAX, &body("def")).unwrap();
    c.flush().unwrap();
    let f = OpenOptions::new().write(true).open(c.path()).unwrap();
    f.set_len(FILE_HEADER + 40).unwrap();
    assert_eq!(c.get(1, 0).unwrap(), Some(body("abc")));
    let e = c.get(2, 0).unwrap_err();
    assert!(
        matches!(
            e,
            RobotsCacheError::File(FileError::Corrupt { offset: 51, .. })
        ),
        "{e}"
    );
}

#[test]
fn compaction_drops_damaged_records_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), options(64, 1 << 30)).unwrap();
    for h in 0..50u64 {
        c.put(h, u64::MAX, &body(&format!("record {h}"))).unwrap();
    }
    c.flush().unwrap();
    let len = (RECORD_HEADER + "record 10".len()) as u64;
    flip(c.path(), FILE_HEADER + 10 * len + 3);
    c.compact().unwrap();
    assert_eq!(c.damaged_records(), 1);
    assert_eq!(c.len(), 49);
    for h in 0..50u64 {
        let want = (h != 10).then(|| body(&format!("record {h}")));
        assert_eq!(c.get(h, 0).unwrap(), want);
    }
    c.check_invariants();
}

#[test]
fn many_hosts_in_random_order_with_removals() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = RobotsCache::open(dir.path(), options(1 << 16, 1 << 16)).unwrap();
    let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    let n = 20_000u64;
    for i in 0..n {
        c.put(mix(i), u64::MAX, &CachedRobots::AllowAll).unwrap();
    }
    for i in (0..n).step_by(3) {
        c.remove(mix(i));
    }
    for i in (0..n).step_by(6) {
        c.put(mix(i), u64::MAX, &body("back")).unwrap();
    }
    c.check_invariants();
    for i in 0..n {
        let want = if i % 6 == 0 {
            Some(body("back"))
        } else if i % 3 == 0 {
            None
        } else {
            Some(CachedRobots::AllowAll)
        };
        assert_eq!(c.get(mix(i), 0).unwrap(), want, "host {i}");
    }
    let live = c.len() as u64;
    assert_eq!(live, n - n.div_ceil(3) + n.div_ceil(6));
    let per_host = c.index_bytes() as f64 / live as f64;
    assert!(per_host <= 40.0, "{per_host} bytes of index per host");
}

#[derive(Debug, Clone)]
enum Op {
    Put(u64, u64, Option<Vec<u8>>),
    Get(u64),
    Remove(u64),
    Tick(u64),
    Flush,
    Compact,
    ForgetExpired,
}

fn op() -> impl Strategy<Value = Op> {
    let host = 0u64..24;
    prop_oneof![
        6 => (host.clone(), 0u64..6_000, proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)))
            .prop_map(|(h, e, b)| Op::Put(h, e, b)),
        4 => host.clone().prop_map(Op::Get),
        2 => host.prop_map(Op::Remove),
        2 => (0u64..700).prop_map(Op::Tick),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::ForgetExpired),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Against a map, with time moving forward: every `get` agrees, and `len` lies between
    /// the entries surely alive and all the model's entries.
    #[test]
    fn matches_a_hash_map(
        ops in proptest::collection::vec(op(), 1..200),
        write_buffer in prop_oneof![Just(0usize), Just(200), Just(4096)],
        compact_min_dead in prop_oneof![Just(0u64), Just(1000), Just(1 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(write_buffer, compact_min_dead)).unwrap();
        let mut model: HashMap<u64, (u64, CachedRobots)> = HashMap::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Put(h, e, b) => {
                    let entry = b.map_or(CachedRobots::AllowAll, CachedRobots::Body);
                    c.put(h, e, &entry).unwrap();
                    model.insert(h, (e, entry));
                    // A put compacts first if dead bytes exceed the bound, then may
                    // replace a record: at most two records' worth over it.
                    let bound = c.live_bytes().max(compact_min_dead) + 2 * (32 + 300);
                    prop_assert!(c.dead_bytes() <= bound, "{} dead", c.dead_bytes());
                }
                Op::Get(h) => {
                    let want = match model.get(&h) {
                        Some((e, entry)) if now < *e => Some(entry.clone()),
                        _ => {
                            model.remove(&h);
                            None
                        }
                    };
                    prop_assert_eq!(c.get(h, now).unwrap(), want);
                }
                Op::Remove(h) => {
                    c.remove(h);
                    model.remove(&h);
                }
                Op::Tick(d) => now += d,
                Op::Flush => c.flush().unwrap(),
                Op::Compact => c.compact().unwrap(),
                Op::ForgetExpired => {
                    c.forget_expired(now);
                }
            }
            c.check_invariants();
            let alive = model.values().filter(|(e, _)| now < *e).count();
            prop_assert!(c.len() >= alive && c.len() <= model.len(), "{} not in {alive}..={}", c.len(), model.len());
        }
        for (h, (e, entry)) in &model {
            let want = (now < *e).then(|| entry.clone());
            prop_assert_eq!(c.get(*h, now).unwrap(), want);
        }
    }

    /// Whatever the file holds, `get` and `compact` never panic, and what `get` returns is
    /// what was stored or an error.
    #[test]
    fn any_file_content_gives_the_entry_or_an_error(
        bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..100), 1..20),
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        truncate in proptest::option::of(any::<prop::sample::Index>()),
        compact_first in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RobotsCache::open(dir.path(), options(256, 1 << 30)).unwrap();
        for (h, b) in bodies.iter().enumerate() {
            c.put(h as u64, u64::MAX, &CachedRobots::Body(b.clone())).unwrap();
        }
        c.flush().unwrap();
        let len = c.disk_bytes() as usize;
        let f = OpenOptions::new().write(true).open(c.path()).unwrap();
        for (at, byte) in damage {
            f.write_all_at(&[byte], at.index(len) as u64).unwrap();
        }
        if let Some(t) = truncate {
            f.set_len(t.index(len) as u64).unwrap();
        }
        if compact_first {
            c.compact().unwrap();
            c.check_invariants();
        }
        for (h, b) in bodies.iter().enumerate() {
            match c.get(h as u64, 0) {
                Ok(Some(got)) => prop_assert_eq!(got, CachedRobots::Body(b.clone())),
                Ok(None) => prop_assert!(compact_first, "only a compaction forgets"),
                Err(RobotsCacheError::File(FileError::Corrupt { path, .. })) => {
                    prop_assert!(!compact_first, "a compaction drops the damaged");
                    prop_assert_eq!(path, dir.path().join(DATA_FILE));
                }
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
        c.check_invariants();
    }
}
