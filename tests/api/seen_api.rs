//! The seen-set through its public API, the way the crawl engine and `crawler plan` use it.

use std::sync::Arc;

use crawler::seen::{classic_m_k, Plan, PlanError, SeenError, SeenSet};

#[test]
fn seen_plan_report_for_1e8_at_1e_3_shows_classic_optimum_and_built_filter() {
    let plan = Plan::for_fpp(100_000_000, 0.001).unwrap();
    let report = plan.report();
    println!("{report}");

    // Classic optimum: 171.4 MiB and k = 10, within 1 % of the closed forms.
    let exact_bits = 1e8 * 1000f64.ln() / std::f64::consts::LN_2.powi(2);
    let (m, k) = classic_m_k(100_000_000, 0.001);
    assert!((m as f64 / exact_bits - 1.0).abs() < 0.01);
    assert_eq!(k, 10);
    assert!(report.contains("171.4 MiB"), "{report}");
    assert!(report.contains("k = 10,"), "{report}");
    assert!(report.contains(&format!("{m} bits")), "{report}");

    // The filter really built: at most 1.2x the classic optimum, meeting p.
    assert!(plan.bytes as f64 <= 1.2 * m.div_ceil(8) as f64, "{plan:?}");
    assert!(plan.expected_fpp <= 0.001);
    assert!(
        report.contains(&format!("{} bytes", plan.bytes)),
        "{report}"
    );
    assert!(report.contains(&format!("k = {}", plan.k)), "{report}");

    // The comparisons the user tunes with.
    assert!(report.contains("n*log2(1/p)"), "{report}");
    assert!(report.contains("HashSet<u64>"), "{report}");
    assert!(report.contains("80 B/URL: 7.5 GiB"), "{report}");
    let summary = plan.summary();
    assert!(
        !summary.contains('\n') && summary.contains("MiB"),
        "{summary}"
    );
}

#[test]
fn seen_memory_budget_plan_reports_its_fpp() {
    let plan = Plan::for_memory(100_000_000, 256 << 20).unwrap();
    assert!(plan.bytes <= 256 << 20);
    assert!(plan.expected_fpp < 0.001, "{plan:?}");
    assert!(plan.report().contains("256.0 MiB"), "{}", plan.report());
    let err = Plan::for_memory(100_000_000, 1 << 20).unwrap_err();
    assert!(matches!(err, PlanError::BudgetTooSmall { .. }));
    println!("{err}");
}

#[test]
fn seen_shared_across_threads_then_checkpointed_and_restored() {
    let set = Arc::new(SeenSet::new(Plan::for_fpp(100_000, 0.001).unwrap()).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let set = Arc::clone(&set);
            std::thread::spawn(move || {
                let links: Vec<String> = (0..20_000)
                    .map(|i| format!("https://site.example/page/{}", (i * 4 + t) % 50_000))
                    .collect();
                let refs: Vec<&[u8]> = links.iter().map(|l| l.as_bytes()).collect();
                let mut new = Vec::new();
                let mut count = 0;
                for page in refs.chunks(50) {
                    set.insert_new_batch(page, &mut new);
                    count += new.iter().filter(|&&b| b).count();
                }
                count
            })
        })
        .collect();
    let told_new: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let stats = set.stats();
    assert_eq!(stats.insertions as usize, told_new);
    assert!(told_new <= 50_000 && told_new > 49_800, "{told_new}");
    assert!(stats.fill > 0.0 && stats.fill < 1.0);
    assert!(stats.estimated_fpp < 0.001);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seen.bin");
    let snapshot = set.snapshot();
    snapshot.write(&path).unwrap();
    let restored = SeenSet::load(&path).unwrap();
    assert_eq!(restored.plan(), set.plan());
    for i in 0..50_000 {
        assert!(restored.contains(format!("https://site.example/page/{i}").as_bytes()));
    }
    assert_eq!(restored.stats().insertions, stats.insertions);
    assert_eq!(restored.stats().bits_set, stats.bits_set);
}

#[test]
fn seen_damaged_checkpoint_is_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoint.seen");
    std::fs::write(
        &path,
        b"definitely not a bloom filter, but long enough to have a header..........",
    )
    .unwrap();
    let err = SeenSet::load(&path).err().unwrap();
    assert!(matches!(err, SeenError::BadMagic { .. }), "{err}");
    assert!(err.to_string().contains("checkpoint.seen"), "{err}");
}
