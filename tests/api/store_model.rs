//! Property test of the queue store against a model of per-host `VecDeque`s: random pushes,
//! pops, pushes to the front, syncs, clean reopens and crashes (drop without sync, reopen at
//! the last synced position, replaying what was appended after it or discarding it and
//! pushing again what was pushed since, as the crawler does with its queue log), under tiny
//! budgets so that every boundary is crossed.

use std::collections::{HashMap, VecDeque};

use crawler::frontier::store::{QueueStore, StoreOptions};
use crawler::frontier::QueuedUrl;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

#[derive(Debug, Clone)]
enum Op {
    Push(u64),
    Pop(u64),
    PushFront(u64),
    Sync,
    Flush,
    Reopen,
    Crash,
    /// A crash, then `reopen_discarding_after` the last position; with `true`, what was pushed
    /// since is pushed again.
    CrashDiscard(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u64..6).prop_map(Op::Push),
        6 => (0u64..6).prop_map(Op::Pop),
        1 => (0u64..6).prop_map(Op::PushFront),
        1 => Just(Op::Sync),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => any::<bool>().prop_map(Op::CrashDiscard),
    ]
}

fn item(n: u64) -> QueuedUrl {
    QueuedUrl {
        url: format!("https://h{}.test/{}", n % 6, "x".repeat((n % 50) as usize)),
        depth: n as u32,
        parent: (n % 2 == 0).then(|| format!("https://p.test/{n}").into()),
        redirect_hops: (n % 3) as u32,
        attempts: (n % 5) as u32,
    }
}

type Model = HashMap<u64, VecDeque<QueuedUrl>>;

proptest! {
    // Failures are kept beside this file, in `store_model.proptest-regressions`.
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn store_matches_a_vecdeque_model(
        ops in proptest::collection::vec(op(), 1..120),
        block_items in 1usize..5,
        memory in prop_oneof![Just(1024u64), Just(8192), Just(1 << 20)],
        segment_bytes in prop_oneof![Just(512u64), Just(4096)],
        write_buffer in prop_oneof![Just(64usize), Just(1024)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions { memory, block_items, segment_bytes, write_buffer };
        let mut s = QueueStore::open(dir.path(), opts.clone()).unwrap();
        let mut pos = s.sync().unwrap();
        let mut model: Model = HashMap::new();
        let mut at_sync: Model = HashMap::new();
        let mut since: Vec<(u64, QueuedUrl)> = Vec::new();
        // Pushes since the sync that were flushed: since[..flushed].
        let mut flushed = 0usize;
        // An item pushed after the last flush was popped: whether it reached the disk (a full
        // block, memory pressure) is not the model's to know, so a crash is not predictable.
        let mut uncertain = false;
        let mut n = 0u64;
        for op in ops {
            match op {
                Op::Push(h) => {
                    n += 1;
                    s.push(h, &item(n)).unwrap();
                    model.entry(h).or_default().push_back(item(n));
                    since.push((h, item(n)));
                }
                Op::Pop(h) => {
                    let peeked = s.peek(h).unwrap().cloned();
                    prop_assert_eq!(&peeked, &model.entry(h).or_default().front().cloned());
                    let want = model.entry(h).or_default().pop_front();
                    if let Some(w) = &want {
                        uncertain |= since[flushed..].iter().any(|(_, it)| it == w);
                    }
                    prop_assert_eq!(s.pop(h).unwrap(), want);
                }
                Op::PushFront(h) => {
                    n += 1;
                    s.push_front(h, item(n));
                    model.entry(h).or_default().push_front(item(n));
                }
                Op::Sync => {
                    pos = s.sync().unwrap();
                    at_sync = model.clone();
                    since.clear();
                    flushed = 0;
                    uncertain = false;
                }
                Op::Flush => {
                    s.flush().unwrap();
                    flushed = since.len();
                }
                Op::Crash if !uncertain => {
                    // A kill -9 after flush keeps every push, and loses the pops and pushes to
                    // the front made since the sync.
                    s.flush().unwrap();
                    drop(s);
                    s = QueueStore::reopen_at(dir.path(), opts.clone(), pos).unwrap();
                    prop_assert_eq!(s.recovery().cut.clone(), None);
                    model = at_sync.clone();
                    for (h, it) in &since {
                        model.entry(*h).or_default().push_back(it.clone());
                    }
                    // All replayed: on disk.
                    flushed = since.len();
                }
                Op::CrashDiscard(again) => {
                    // Whatever reached the disk after the position is dropped: the state is
                    // the position's, whether or not pushes were flushed.
                    drop(s);
                    s = QueueStore::reopen_discarding_after(dir.path(), opts.clone(), pos)
                        .unwrap();
                    let r = s.recovery().clone();
                    prop_assert_eq!((r.blocks_replayed, r.cut), (0, None));
                    model = at_sync.clone();
                    let pushed = std::mem::take(&mut since);
                    if again {
                        for (h, it) in pushed {
                            s.push(h, &it).unwrap();
                            model.entry(h).or_default().push_back(it.clone());
                            since.push((h, it));
                        }
                    }
                    flushed = 0;
                    uncertain = false;
                }
                Op::Reopen | Op::Crash => {
                    pos = s.sync().unwrap();
                    drop(s);
                    s = QueueStore::open(dir.path(), opts.clone()).unwrap();
                    prop_assert_eq!(s.recovery().blocks_replayed, 0);
                    at_sync = model.clone();
                    since.clear();
                    flushed = 0;
                    uncertain = false;
                }
            }
            let total: usize = model.values().map(|q| q.len()).sum();
            prop_assert_eq!(s.total(), total as u64);
            for h in 0..6 {
                prop_assert_eq!(s.len(h), model.get(&h).map_or(0, |q| q.len()) as u64);
            }
        }
        // Drain everything in the end.
        for h in 0..6 {
            while let Some(want) = model.entry(h).or_default().pop_front() {
                prop_assert_eq!(s.pop(h).unwrap(), Some(want));
            }
            prop_assert_eq!(s.pop(h).unwrap(), None);
        }
        prop_assert!(s.is_empty());
    }
}
