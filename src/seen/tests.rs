//! Tests of the filter itself: semantics, concurrency, statistics, files.

use super::*;
use proptest::prelude::*;
use std::sync::{Arc, Barrier};

fn url(i: u64) -> String {
    format!(
        "https://www.host{}.example.com/path/to/article-{}?id={}",
        i % 9973,
        i,
        i.wrapping_mul(2_654_435_761)
    )
}

fn small(n: u64, p: f64) -> SeenSet {
    SeenSet::new(Plan::for_fpp(n, p).unwrap()).unwrap()
}

/// Counts set bits by scanning, to check the live counters against.
fn scanned_bits(set: &SeenSet) -> u64 {
    set.snapshot()
        .words
        .iter()
        .map(|w| u64::from(w.count_ones()))
        .sum()
}

#[test]
fn insert_then_contains() {
    let set = small(1000, 0.01);
    assert!(!set.contains(b"https://a.example/"));
    assert!(set.insert_new(b"https://a.example/"));
    assert!(set.contains(b"https://a.example/"));
    assert!(!set.insert_new(b"https://a.example/"));
    assert!(set.insert_new(b""), "the empty key is a key like any other");
    assert!(!set.insert_new(b""));
    let stats = set.stats();
    assert_eq!(stats.insertions, 2);
    assert_eq!(stats.bits_set, scanned_bits(&set));
    assert!(stats.bits_set >= 2 && stats.bits_set <= 2 * u64::from(set.plan().k));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn no_false_negatives(keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 1..400),
                          n in 1u64..2000, p in 1e-5f64..0.5) {
        let set = small(n, p);
        for key in &keys {
            set.insert_new(key);
        }
        for key in &keys {
            prop_assert!(set.contains(key));
            prop_assert!(!set.insert_new(key));
        }
        let mut out = Vec::new();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        set.insert_new_batch(&refs, &mut out);
        prop_assert!(out.iter().all(|&new| !new));
        prop_assert_eq!(set.stats().bits_set, scanned_bits(&set));
    }
}

#[test]
fn batch_answers_like_one_by_one_and_first_duplicate_wins() {
    let keys: Vec<String> = (0..1000).map(|i| url(i % 700)).collect();
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let batched = small(2000, 0.001);
    let single = small(2000, 0.001);
    let mut out = vec![true; 3];
    batched.insert_new_batch(&refs[..500], &mut out);
    let mut rest = Vec::new();
    batched.insert_new_batch(&refs[500..], &mut rest);
    out.extend(rest);
    let expected: Vec<bool> = refs.iter().map(|k| single.insert_new(k)).collect();
    assert_eq!(out, expected);
    assert_eq!(out.iter().filter(|&&b| b).count(), 700);
    assert!(out[700..].iter().all(|&b| !b));
    batched.insert_new_batch(&[], &mut out);
    assert!(out.is_empty());
}

#[test]
fn insert_new_is_exactly_once_under_contention() {
    // Every thread inserts the same keys in a different order, all released together each
    // round; exactly one thread must be told "new" per key. A tiny filter packs many keys
    // into each block so the lock is really contended.
    let threads = 8;
    let keys_per_round = 2_000u64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    for round in 0..60u64 {
        if std::time::Instant::now() > deadline {
            break;
        }
        let set =
            Arc::new(SeenSet::new(Plan::for_memory(keys_per_round, 64 * 64).unwrap()).unwrap());
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (set, barrier) = (Arc::clone(&set), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let keys: Vec<String> = (0..keys_per_round)
                        .map(|i| url(round * 1_000_000 + (i * (t as u64 * 2 + 1)) % keys_per_round))
                        .collect();
                    barrier.wait();
                    let mut won = Vec::new();
                    if t % 2 == 0 {
                        for key in &keys {
                            if set.insert_new(key.as_bytes()) {
                                won.push(key.clone());
                            }
                        }
                    } else {
                        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
                        let mut out = Vec::new();
                        for chunk in refs.chunks(37) {
                            set.insert_new_batch(chunk, &mut out);
                            won.extend(
                                chunk
                                    .iter()
                                    .zip(&out)
                                    .filter(|(_, &new)| new)
                                    .map(|(k, _)| String::from_utf8_lossy(k).into_owned()),
                            );
                        }
                    }
                    won
                })
            })
            .collect();
        let mut winners = std::collections::HashMap::new();
        for h in handles {
            for key in h.join().unwrap() {
                *winners.entry(key).or_insert(0u32) += 1;
            }
        }
        assert!(
            winners.values().all(|&c| c == 1),
            "round {round}: a key was new twice"
        );
        // Exact, against a model: the filter's bits are exactly the union of the winners'
        // bits (a key told "not new" sets nothing), so a sequential filter holding only the
        // winners has the same bits; and every key without a winner is a false positive of
        // those bits, never a key forgotten.
        let stats = set.stats();
        assert_eq!(stats.insertions, winners.len() as u64);
        assert_eq!(stats.bits_set, scanned_bits(&set));
        let model = SeenSet::new(set.plan().clone()).unwrap();
        for key in winners.keys() {
            model.insert_new(key.as_bytes());
        }
        assert_eq!(
            scanned_bits(&model),
            scanned_bits(&set),
            "round {round}: bits set by no winner, or a winner's bits missing"
        );
        for i in 0..keys_per_round {
            let key = url(round * 1_000_000 + i);
            if !winners.contains_key(&key) {
                assert!(
                    model.contains(key.as_bytes()),
                    "round {round}: {key} was told \"not new\" but is no false positive"
                );
            }
        }
    }
}

#[test]
fn same_key_many_threads_one_winner() {
    for round in 0..300 {
        let set = Arc::new(small(100, 0.01));
        let barrier = Arc::new(Barrier::new(4));
        let key = url(round);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (set, barrier, key) = (Arc::clone(&set), Arc::clone(&barrier), key.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    set.insert_new(key.as_bytes())
                })
            })
            .collect();
        let wins = handles
            .into_iter()
            .filter(|_| true)
            .map(|h| h.join().unwrap())
            .filter(|&w| w)
            .count();
        assert_eq!(wins, 1, "round {round}");
    }
}

/// Measured fpp over `probes` absent keys after n inserts must lie within 4 binomial standard
/// deviations of the configured p above, and not fall far below the model (which would mean
/// the sizing wastes memory or the model is wrong).
fn check_fpp(n: u64, p: f64, probes: u64) {
    let set = small(n, p);
    for i in 0..n {
        set.insert_new(url(i).as_bytes());
    }
    let absent = (0..probes)
        .filter(|i| {
            set.contains(format!("https://absent{}.example.org/q?{}", i % 977, i).as_bytes())
        })
        .count();
    let measured = absent as f64 / probes as f64;
    let sigma = (p * (1.0 - p) / probes as f64).sqrt();
    let expected = set.plan().expected_fpp;
    assert!(
        measured <= p + 4.0 * sigma,
        "p={p}: measured {measured} > {p} + 4σ ({sigma})"
    );
    assert!(
        measured >= expected * 0.9 - 4.0 * sigma,
        "p={p}: measured {measured} far below the model {expected}"
    );
    let stats = set.stats();
    assert!(
        (stats.estimated_fpp - expected).abs() < expected * 0.1,
        "estimate {} vs model {expected}",
        stats.estimated_fpp
    );
}

#[test]
fn fpp_met_at_1e_2() {
    check_fpp(100_000, 1e-2, 1_000_000);
}

#[test]
fn fpp_met_at_1e_3() {
    check_fpp(100_000, 1e-3, 1_000_000);
}

#[test]
fn fpp_met_at_1e_4() {
    check_fpp(100_000, 1e-4, 1_000_000);
}

#[test]
#[ignore = "heavy: 10M inserts, 10M probes per p; run with --release --ignored"]
fn fpp_met_at_scale() {
    for p in [1e-2, 1e-3, 1e-4] {
        check_fpp(10_000_000, p, 10_000_000);
    }
}

#[test]
fn fill_estimate_is_the_blocked_model_not_fill_to_the_k() {
    let lambda = BLOCK_BITS as f64 / 14.38;
    let clear = (1.0 - 1.0 / PROBE_BITS as f64).powi(10);
    let fill = 1.0 - (-lambda * (1.0 - clear)).exp();
    assert!((fill.powi(10) - 0.0010).abs() < 0.0001, "{}", fill.powi(10));
    let estimate = fpp_from_fill(fill, 10);
    assert!((estimate - blocked_fpp_at_load(lambda, 10)).abs() < 1e-12);
    assert!((estimate - 0.0016).abs() < 0.0001, "{estimate}");
    assert_eq!(fpp_from_fill(0.0, 10), 0.0);
    assert_eq!(fpp_from_fill(1.0, 10), 1.0);
}

#[test]
fn snapshot_taken_during_inserts_holds_everything_inserted_before() {
    let set = Arc::new(small(200_000, 0.001));
    for i in 0..50_000 {
        set.insert_new(url(i).as_bytes());
    }
    let writer = {
        let set = Arc::clone(&set);
        std::thread::spawn(move || {
            for i in 50_000..150_000 {
                set.insert_new(url(i).as_bytes());
            }
        })
    };
    let snapshot = set.snapshot();
    writer.join().unwrap();
    assert!(snapshot.insertions() >= 50_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seen.bin");
    snapshot.write(&path).unwrap();
    let loaded = SeenSet::load(&path).unwrap();
    assert!((0..50_000).all(|i| loaded.contains(url(i).as_bytes())));
    assert_eq!(loaded.stats().insertions, snapshot.insertions());
}

/// Writes a snapshot and returns the file's bytes.
fn written(snapshot: &SeenSnapshot, dir: &tempfile::TempDir, name: &str) -> Vec<u8> {
    let path = dir.path().join(name);
    snapshot.write(&path).unwrap();
    std::fs::read(&path).unwrap()
}

#[test]
fn snapshot_into_reuses_its_buffer_and_equals_snapshot() {
    let set = small(200_000, 0.001);
    let mut buffer = SeenSnapshot::for_plan(set.plan()).unwrap();
    assert_eq!(buffer.plan(), set.plan());
    assert_eq!(buffer.insertions(), 0);
    assert!(
        buffer.words.iter().all(|&w| w == 0),
        "a fresh buffer is an empty filter"
    );
    let memory = buffer.words.as_ptr();
    let dir = tempfile::tempdir().unwrap();
    let mut inserted = 0;
    for round in 0..3u64 {
        for i in inserted..inserted + 40_000 + round * 10_000 {
            set.insert_new(url(i).as_bytes());
        }
        inserted += 40_000 + round * 10_000;
        // Locks held mid-insert must not reach the copy: hold a few by hand.
        let locked = [0, 17, set.array.blocks().len() - 1];
        for &b in &locked {
            set.array.blocks()[b].0[LOCK_WORD].fetch_or(LOCK_BIT, Ordering::Acquire);
        }
        set.snapshot_into(&mut buffer);
        let fresh = set.snapshot();
        for &b in &locked {
            set.array.blocks()[b].0[LOCK_WORD].fetch_and(!LOCK_BIT, Ordering::Release);
        }
        assert_eq!(
            buffer.words.as_ptr(),
            memory,
            "the same memory, copied over"
        );
        assert_eq!(buffer.insertions(), set.stats().insertions);
        assert_eq!(buffer.insertions(), fresh.insertions());
        assert_eq!(buffer.words[..], fresh.words[..]);
        assert!(locked
            .iter()
            .all(|&b| buffer.words[b * 8 + LOCK_WORD] & LOCK_BIT.to_le() == 0));
        let bytes = written(&buffer, &dir, "into.bin");
        assert_eq!(bytes, written(&fresh, &dir, "fresh.bin"), "round {round}");
        set.save(&dir.path().join("saved.bin")).unwrap();
        assert_eq!(bytes, std::fs::read(dir.path().join("saved.bin")).unwrap());
        let loaded = SeenSet::load(&dir.path().join("into.bin")).unwrap();
        assert!((0..inserted).all(|i| loaded.contains(url(i).as_bytes())));
        assert_eq!(loaded.stats().bits_set, set.stats().bits_set);
    }
}

#[test]
fn snapshot_into_a_buffer_of_another_plan() {
    let set = small(200_000, 0.001);
    for i in 0..30_000 {
        set.insert_new(url(i).as_bytes());
    }
    let dir = tempfile::tempdir().unwrap();
    let expected = written(&set.snapshot(), &dir, "fresh.bin");

    // Another size: the buffer's memory is replaced by memory of the right size.
    for other in [Plan::for_fpp(1_000, 0.01), Plan::for_fpp(1_000_000, 0.001)] {
        let mut buffer = SeenSnapshot::for_plan(&other.unwrap()).unwrap();
        set.snapshot_into(&mut buffer);
        assert_eq!(buffer.plan(), set.plan());
        assert_eq!(buffer.words.len() as u64, set.plan().blocks * 8);
        assert_eq!(written(&buffer, &dir, "into.bin"), expected);
        // From now on the buffer fits and is reused.
        let memory = buffer.words.as_ptr();
        set.snapshot_into(&mut buffer);
        assert_eq!(buffer.words.as_ptr(), memory);
    }

    // The same size from another plan (here another seed): the memory is kept, the plan
    // becomes the filter's, so the file says what the filter is.
    let mut other = set.plan().clone();
    other.seed ^= 1;
    let mut buffer = SeenSnapshot::for_plan(&other).unwrap();
    let memory = buffer.words.as_ptr();
    set.snapshot_into(&mut buffer);
    assert_eq!(buffer.words.as_ptr(), memory);
    assert_eq!(buffer.plan(), set.plan());
    assert_eq!(written(&buffer, &dir, "into.bin"), expected);
}

#[test]
fn streaming_copy_equals_plain_copy_at_any_alignment() {
    let set = small(20_000, 0.01);
    for i in 0..15_000 {
        set.insert_new(url(i).as_bytes());
    }
    let blocks = set.array.blocks();
    blocks[3].0[LOCK_WORD].fetch_or(LOCK_BIT, Ordering::Acquire);
    let mut plain = vec![0u64; blocks.len() * 8];
    copy_words(blocks, &mut plain);
    assert_eq!(plain[3 * 8 + LOCK_WORD] & LOCK_BIT.to_le(), 0);
    // One word of slack: one of the two starts is 16-byte aligned (the streaming path on
    // x86-64), the other is not (the plain fallback).
    let mut space = vec![u64::MAX; blocks.len() * 8 + 1];
    for start in 0..2 {
        let out = &mut space[start..start + blocks.len() * 8];
        copy_words_streaming(blocks, out);
        assert_eq!(out[..], plain[..], "start {start}");
    }
    blocks[3].0[LOCK_WORD].fetch_and(!LOCK_BIT, Ordering::Release);
}

#[test]
fn save_load_is_bit_exact() {
    let set = small(10_000, 0.001);
    for i in 0..7_000 {
        set.insert_new(url(i).as_bytes());
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seen.bin");
    set.save(&path).unwrap();
    let loaded = SeenSet::load(&path).unwrap();
    assert_eq!(loaded.plan(), set.plan());
    assert_eq!(loaded.snapshot().words[..], set.snapshot().words[..]);
    let (a, b) = (set.stats(), loaded.stats());
    assert_eq!(
        (a.insertions, a.bits_set, a.m_bits, a.k),
        (b.insertions, b.bits_set, b.m_bits, b.k)
    );
    assert!((0..7_000).all(|i| loaded.contains(url(i).as_bytes())));
    assert!(!loaded.insert_new(url(5).as_bytes()));
    assert!(loaded.insert_new(url(7_000).as_bytes()));
    // Saving again over the old file replaces it and leaves no temporary behind.
    loaded.save(&path).unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("seen.bin")]);
    assert_eq!(SeenSet::load(&path).unwrap().stats().insertions, 7_001);
    let expected_len = file::HEADER_LEN + set.plan().bytes + file::CHECKSUM_LEN;
    assert_eq!(std::fs::metadata(&path).unwrap().len(), expected_len);
}

/// A saved small filter's bytes, and a place to write damaged copies.
fn saved() -> (tempfile::TempDir, Vec<u8>) {
    let set = small(300, 0.01);
    for i in 0..200 {
        set.insert_new(url(i).as_bytes());
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.bin");
    set.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (dir, bytes)
}

fn load_bytes(dir: &tempfile::TempDir, bytes: &[u8]) -> Result<SeenSet, SeenError> {
    let path = dir.path().join("damaged.bin");
    std::fs::write(&path, bytes).unwrap();
    SeenSet::load(&path)
}

/// Rewrites the trailing checksum so that only the intended damage is seen.
fn reseal(bytes: &mut [u8]) {
    let body = bytes.len() - 8;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn every_flipped_byte_is_refused() {
    let (dir, good) = saved();
    assert!(load_bytes(&dir, &good).is_ok());
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        assert!(
            load_bytes(&dir, &bad).is_err(),
            "flip at byte {at} was loaded"
        );
    }
}

#[test]
fn each_corruption_has_its_own_error() {
    let (dir, good) = saved();
    let path_named = |e: &SeenError| e.to_string().contains("damaged.bin");

    let mut bad = good.clone();
    bad[0] = b'X';
    let e = load_bytes(&dir, &bad).err().unwrap();
    assert!(
        matches!(e, SeenError::BadMagic { .. }) && path_named(&e),
        "{e}"
    );

    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&2u32.to_le_bytes());
    let e = load_bytes(&dir, &bad).err().unwrap();
    assert!(
        matches!(e, SeenError::UnsupportedVersion { found: 2, .. }) && path_named(&e),
        "{e}"
    );

    let e = load_bytes(&dir, &good[..good.len() - 1]).err().unwrap();
    assert!(
        matches!(e, SeenError::Truncated { .. }) && path_named(&e),
        "{e}"
    );
    let e = load_bytes(&dir, &good[..40]).err().unwrap();
    assert!(
        matches!(
            e,
            SeenError::Truncated {
                expected: 72,
                found: 40,
                ..
            }
        ),
        "{e}"
    );

    let mut bad = good.clone();
    bad.push(0);
    let e = load_bytes(&dir, &bad).err().unwrap();
    assert!(
        matches!(e, SeenError::WrongSize { .. }) && path_named(&e),
        "{e}"
    );

    for (at, field) in [
        (12, "layout"),
        (16, "hash scheme"),
        (24, "m_bits"),
        (32, "k"),
        (36, "reserved field"),
        (40, "n"),
        (48, "target fpp"),
    ] {
        let mut bad = good.clone();
        let value: u64 = if at == 48 {
            2f64.to_bits()
        } else if at == 24 {
            513
        } else {
            0xFF
        };
        let width = if at == 24 || at == 40 || at == 48 {
            8
        } else {
            4
        };
        bad[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        if at == 40 {
            bad[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
        }
        reseal(&mut bad);
        let e = load_bytes(&dir, &bad).err().unwrap();
        assert!(
            matches!(&e, SeenError::BadParameters { field: f, .. } if *f == field)
                && path_named(&e),
            "{field}: {e}"
        );
    }

    let mut bad = good.clone();
    bad[100] ^= 1;
    let e = load_bytes(&dir, &bad).err().unwrap();
    assert!(
        matches!(e, SeenError::ChecksumMismatch { .. }) && path_named(&e),
        "{e}"
    );

    let mut bad = good.clone();
    // Block 1's lock bit: the top bit of its word 7, the last byte of the block.
    bad[file::HEADER_LEN as usize + 128 - 1] |= 0x80;
    reseal(&mut bad);
    let e = load_bytes(&dir, &bad).err().unwrap();
    assert!(
        matches!(e, SeenError::LockBitSet { block: 1, .. }) && path_named(&e),
        "{e}"
    );

    let e = SeenSet::load(&dir.path().join("missing.bin"))
        .err()
        .unwrap();
    assert!(
        matches!(e, SeenError::Io { .. }) && e.to_string().contains("missing.bin"),
        "{e}"
    );
}

#[test]
fn save_into_missing_directory_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let e = small(10, 0.1)
        .save(&dir.path().join("no/such/dir/seen.bin"))
        .err()
        .unwrap();
    assert!(
        matches!(
            e,
            SeenError::Io {
                action: "create",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn edited_plan_is_an_error_not_a_panic() {
    let mut plan = Plan::for_fpp(1000, 0.01).unwrap();
    plan.blocks = 0;
    let err = SeenSet::new(plan).err().unwrap();
    assert!(
        matches!(err, SeenError::Plan(PlanError::Inconsistent { .. })),
        "{err}"
    );
}

#[test]
fn seen_set_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<SeenSet>();
    check::<SeenSnapshot>();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Whatever a file holds, loading it answers with a filter or an error, never a panic.
    #[test]
    fn arbitrary_files_never_panic(garbage in prop::collection::vec(any::<u8>(), 0..400),
                                   field in 0usize..8, value in any::<u64>(), reseal_it in any::<bool>()) {
        let (dir, good) = saved();
        let _ = load_bytes(&dir, &garbage);
        let mut damaged = good.clone();
        damaged[8 * field..8 * field + 8].copy_from_slice(&value.to_le_bytes());
        if reseal_it {
            reseal(&mut damaged);
        }
        let loaded = load_bytes(&dir, &damaged);
        if !reseal_it && damaged != good {
            // Without a fresh checksum, any change at all is refused.
            prop_assert!(loaded.is_err());
        }
    }
}

#[test]
fn a_batch_lookup_answers_what_lookups_one_by_one_answer() {
    let set = small(10_000, 0.01);
    for i in 0..300 {
        set.insert_new(url(i).as_bytes());
    }
    // More than one prefetch window, inserted and absent keys interleaved.
    let asked: Vec<String> = (0..600).map(|i| url(i * 3 / 2)).collect();
    let keys: Vec<&[u8]> = asked.iter().map(|k| k.as_bytes()).collect();
    let mut out = vec![true; 7];
    set.contains_batch(&keys, &mut out);
    let one_by_one: Vec<bool> = keys.iter().map(|k| set.contains(k)).collect();
    assert_eq!(out, one_by_one);
    assert!(out[..200].iter().all(|&seen| seen));
    assert!(out.iter().filter(|&&seen| !seen).count() > 250);
}
