//! The state store and `seen.exact` in whole crawls of the synthetic web.
//!
//! - A Bloom filter sized to be poor (`seen.fpp = 0.5` for exactly the ground truth's URLs)
//!   skips pages by its false positives; the same filter with `seen.exact`, and one of a
//!   single 64-byte block (every link "maybe seen", fill near 1), reach every page of the
//!   ground truth, each fetched once, and the summary estimates 0 skips.
//! - `state.enabled`: every page record has its state in `OUT/state/urls/`, equal to a rebuild
//!   from `pages.jsonl`.
//!
//! `kill_resume::kill_9_and_resume_with_exact_seen_stays_exact` does both across `kill -9`.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crawler::config::Config;
use crawler::state_store::{StateStore, UrlFingerprint};
use crawler::ShutdownHandle;
use testweb::{TestWebServer, Web, WebSpec};

use crate::support::{config_for, crawl, records, rules_for};

/// `config_for` with `--set`-style overrides (the `[seen]` keys are not public fields).
fn config_with(server: &TestWebServer, out: &Path, sets: &[&str]) -> Config {
    let base = config_for(server, out, false);
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let mut config = Config::load(None, &sets).unwrap();
    config.crawl = base.crawl;
    config.politeness = base.politeness;
    config.network = base.network;
    config.output = base.output;
    config
}

struct Crawled {
    recorded: BTreeSet<String>,
    summary: serde_json::Value,
    log_diff_empty: bool,
}

fn crawl_with(web: &Arc<Web>, max_urls: u64, sets: &[&str]) -> (Crawled, tempfile::TempDir) {
    let server = TestWebServer::start(web.clone()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_with(&server, out.path(), sets);
    config.crawl.max_urls.0 = max_urls;
    crawl(&config, &web.seeds(), ShutdownHandle::new());
    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let records = records(out.path());
    let pages: Vec<_> = records.iter().filter(|r| r.kind.is_page()).collect();
    let recorded: BTreeSet<String> = pages.iter().map(|r| r.url.clone()).collect();
    assert_eq!(recorded.len(), pages.len(), "a page recorded twice");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    let crawled = Crawled {
        recorded,
        summary,
        log_diff_empty: truth.diff_log(&server.log()).is_empty(),
    };
    (crawled, out)
}

#[test]
fn exact_seen_reaches_every_page_where_the_bloom_filter_alone_skips_some() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(11)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let probe = config_for(&server, Path::new("unused"), false);
    let truth = web.ground_truth(&web.seeds(), &rules_for(&probe));
    let n = truth.len() as u64;

    let (alone, _out) = crawl_with(&web, n, &["seen.fpp=0.5"]);
    assert!(
        alone.recorded.is_subset(&truth.urls()),
        "nothing outside the truth"
    );
    let skipped = truth.len() - alone.recorded.len();
    eprintln!(
        "Bloom filter alone at fpp 0.5: {skipped} of {n} pages skipped, fill {}, estimated skips {}",
        alone.summary["seen_fill"], alone.summary["estimated_false_positive_skips"]
    );
    assert!(
        skipped > 0,
        "the poor filter must skip pages for this test to mean anything"
    );

    for sets in [
        &["seen.fpp=0.5", "seen.exact=true"][..],
        &["seen.memory=64", "seen.exact=true"][..],
    ] {
        let (exact, out) = crawl_with(&web, n, sets);
        let fill = exact.summary["seen_fill"].as_f64().unwrap();
        eprintln!("{sets:?}: fill {fill}");
        assert_eq!(exact.recorded, truth.urls(), "{sets:?}: every page");
        assert!(exact.log_diff_empty, "{sets:?}: each page fetched once");
        assert_eq!(
            exact.summary["estimated_false_positive_skips"].as_f64(),
            Some(0.0),
            "{sets:?}"
        );
        assert_eq!(exact.summary["accepted"].as_u64(), Some(n), "{sets:?}");
        assert!(
            out.path().join("state/admitted").is_dir(),
            "{sets:?}: the admitted set's runs"
        );
        if sets[0] == "seen.memory=64" {
            assert!(fill > 0.5, "a single block fills: {fill}");
        }
    }
}

#[test]
fn the_state_store_holds_each_records_state_and_equals_a_rebuild() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(13)));
    let (crawled, out) = crawl_with(&web, 1_000_000, &["state.enabled=true", "output.warc=true"]);
    let records = records(out.path());
    let store = StateStore::open(&StateStore::dir_of(out.path())).unwrap();
    let pages: Vec<_> = records.iter().filter(|r| r.kind.is_page()).collect();
    let fps: Vec<UrlFingerprint> = pages.iter().map(|r| UrlFingerprint::of(&r.url)).collect();
    let states = store.get_batch(&fps).unwrap();
    for (record, state) in pages.iter().zip(&states) {
        let state = state
            .as_ref()
            .unwrap_or_else(|| panic!("no state for {}", record.url));
        assert_eq!(state.url, record.url);
        assert_eq!(state.status, record.status.unwrap_or(0), "{}", record.url);
        assert_eq!(
            state.payload_digest, record.payload_digest,
            "{}",
            record.url
        );
        if let Some(warc) = record.warc.as_ref().filter(|w| w.record == "response") {
            assert_eq!(state.warc_record_id.as_deref(), Some(warc.id.as_str()));
        }
    }
    let journal_len = std::fs::metadata(out.path().join("pages.jsonl"))
        .unwrap()
        .len();
    assert_eq!(
        store.covers(),
        journal_len,
        "the store covers the whole journal"
    );
    let rebuilt_dir = tempfile::tempdir().unwrap();
    let rebuilt =
        StateStore::rebuild_from_journal(rebuilt_dir.path(), &out.path().join("pages.jsonl"))
            .unwrap();
    assert_eq!(rebuilt.get_batch(&fps).unwrap(), states);
    // Each answered URL is scheduled by `[recrawl]`'s default bounds (1 h to 30 d after its
    // fetch); one never answered is due at once.
    for state in states.iter().flatten() {
        if state.status == 0 {
            assert_eq!(state.next_due, 0, "{}", state.url);
        } else {
            let wait = state.next_due - state.fetched_at;
            assert!(
                (3600..=30 * 86_400).contains(&wait),
                "{}: {wait}",
                state.url
            );
            assert_eq!(wait, state.interval_secs, "{}", state.url);
        }
    }
    let unanswered = states.iter().flatten().filter(|s| s.status == 0).count();
    assert_eq!(store.due(0).unwrap().len(), unanswered);
    let a_year_on = crawler::state_store::unix_secs("2026-11-26T00:00:00Z") + 31 * 86_400 * 12;
    assert_eq!(store.due(a_year_on).unwrap().len(), pages.len());
    assert_eq!(crawled.recorded.len(), pages.len());
}
