//! Discovery and content (issue 13): charsets, canonical links, sitemaps and the defaults
//! that finish a site, each checked against the synthetic web's request log: what the
//! crawler really requested, not what it says it did.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::support::{config_for, crawl, records};
use crawler::ShutdownHandle;
use testweb::{Features, TestWebServer, Web, WebSpec};

/// A web of one tree host (unused) plus the opt-in corners in `features`.
fn corner_web(features: Features) -> Arc<Web> {
    Arc::new(Web::new(WebSpec {
        hosts: 1,
        pages: 4,
        seed: 1,
        links_per_page: 4,
        page_bytes: 256,
        features,
    }))
}

/// The request targets (path and query) the server saw for `host`.
fn requested(server: &TestWebServer, host: &str) -> Vec<String> {
    server
        .log()
        .iter()
        .filter(|r| r.host == host)
        .map(|r| r.path.clone())
        .collect()
}

#[test]
fn charsets_links_are_decoded_and_their_queries_encoded_in_the_page_encoding() {
    let _load = crate::support::ordinary();
    let web = corner_web(Features {
        charsets: true,
        ..Features::none()
    });
    let server = TestWebServer::start(web).unwrap();
    let out = tempfile::tempdir().unwrap();
    let config = config_for(&server, out.path(), false);
    let seed = format!("http://{}/", testweb::CHARSETS_HOST);
    let summary = crawl(&config, &[seed], ShutdownHandle::new());
    let log = requested(&server, testweb::CHARSETS_HOST);
    let mut expected: Vec<String> = vec!["/".to_string()];
    expected.extend(testweb::CHARSET_PAGES.iter().map(|p| p.to_string()));
    expected.extend(testweb::CHARSET_TARGETS.iter().map(|p| p.to_string()));
    let got: BTreeSet<&String> = log.iter().collect();
    let want: BTreeSet<&String> = expected.iter().collect();
    assert_eq!(got, want, "requests to {}", testweb::CHARSETS_HOST);
    assert_eq!(
        log.len(),
        expected.len(),
        "each URL requested once: {log:?}"
    );
    assert_eq!(summary.counts.client_errors, 0, "{}", summary.human());
    assert_eq!(records(out.path()).len(), expected.len());
}

/// Crawls the canonical corner with `follow_canonical` as given; returns the requests to
/// its host and the records.
fn crawl_canonical(follow: bool) -> (Vec<String>, Vec<crawler::output::PageRecord>, Vec<String>) {
    let web = corner_web(Features {
        canonical: true,
        ..Features::none()
    });
    let server = TestWebServer::start(web).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    config.crawl.follow_canonical = follow;
    let seed = format!("http://{}/", testweb::CANONICAL_HOST);
    crawl(&config, &[seed], ShutdownHandle::new());
    let hosts: Vec<String> = server.log().iter().map(|r| r.host.clone()).collect();
    (
        requested(&server, testweb::CANONICAL_HOST),
        records(out.path()),
        hosts,
    )
}

fn assert_canonicals_recorded(records: &[crawler::output::PageRecord]) {
    for (path, canonical) in testweb::CANONICAL_EXPECTED {
        let url = format!("http://{}{path}", testweb::CANONICAL_HOST);
        let record = records
            .iter()
            .find(|r| r.url == url)
            .unwrap_or_else(|| panic!("{url} not recorded"));
        assert_eq!(record.canonical.as_deref(), Some(*canonical), "{url}");
    }
    let home = format!("http://{}/", testweb::CANONICAL_HOST);
    let home = records.iter().find(|r| r.url == home).unwrap();
    assert_eq!(home.canonical, None, "a page that names none records none");
}

#[test]
fn canonical_links_are_recorded_and_followed_through_admission() {
    let _load = crate::support::ordinary();
    let (log, records, hosts) = crawl_canonical(true);
    assert_canonicals_recorded(&records);
    let got: BTreeSet<&str> = log.iter().map(String::as_str).collect();
    let mut want: BTreeSet<&str> = ["/"].into_iter().collect();
    want.extend(testweb::CANONICAL_EXPECTED.iter().map(|(p, _)| *p));
    want.extend(testweb::CANONICAL_ONLY.iter().copied());
    // `/from-html` is not requested: the header's canonical wins; `/self` once (seen-set).
    assert_eq!(got, want);
    assert_eq!(log.len(), want.len(), "each once: {log:?}");
    assert!(
        hosts.iter().all(|h| h != "elsewhere.test"),
        "an off-site canonical is refused by scope like a link"
    );
    let pdf = records
        .iter()
        .find(|r| r.url.ends_with("/pdf-canonical"))
        .unwrap();
    assert_eq!(pdf.parent.as_deref(), Some("http://canonical.test/doc.pdf"));
    assert_eq!(
        pdf.depth, 2,
        "a canonical is one link deeper than its page (depth 1)"
    );
}

#[test]
fn canonical_links_are_recorded_but_not_followed_when_off() {
    let _load = crate::support::ordinary();
    let (log, records, _) = crawl_canonical(false);
    assert_canonicals_recorded(&records);
    let got: BTreeSet<&str> = log.iter().map(String::as_str).collect();
    let mut want: BTreeSet<&str> = ["/"].into_iter().collect();
    want.extend(testweb::CANONICAL_EXPECTED.iter().map(|(p, _)| *p));
    assert_eq!(got, want);
}

/// Crawls the sitemaps corner; returns the server, the records and the summary.
fn crawl_sitemaps(
    sitemaps: bool,
    respect_robots: bool,
) -> (
    TestWebServer,
    Vec<crawler::output::PageRecord>,
    crawler::CrawlSummary,
) {
    let web = corner_web(Features {
        sitemaps: true,
        ..Features::none()
    });
    let server = TestWebServer::start(web).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), respect_robots);
    config.crawl.sitemaps = sitemaps;
    let seed = format!("http://{}/", testweb::SITEMAPS_HOST);
    let summary = crawl(&config, &[seed], ShutdownHandle::new());
    let records = records(out.path());
    (server, records, summary)
}

#[test]
fn sitemaps_pages_listed_only_in_sitemaps_are_crawled_within_the_protocol_limits() {
    let _load = crate::support::ordinary();
    let (server, records, summary) = crawl_sitemaps(true, true);
    let log = requested(&server, testweb::SITEMAPS_HOST);
    let got: BTreeSet<&str> = log.iter().map(String::as_str).collect();
    let mut want: BTreeSet<&str> = ["/robots.txt", "/", "/linked"].into_iter().collect();
    want.extend(testweb::SITEMAP_FILES.iter().copied());
    want.extend(testweb::SITEMAP_ONLY.iter().copied());
    // Not /beyond-limit (entry 50,001), not /private/sitemap.xml (robots.txt), not
    // /after-break (past the broken XML).
    assert_eq!(got, want);
    assert_eq!(log.len(), want.len(), "each once: {log:?}");
    assert!(
        server
            .log()
            .iter()
            .all(|r| r.host == testweb::SITEMAPS_HOST),
        "the off-site sitemap entry is refused by scope"
    );
    let c = &summary.counts;
    assert_eq!(c.sitemaps_read, testweb::SITEMAP_FILES.len() as u64);
    assert_eq!(c.sitemap_entries_cut, 1, "entry 50,001 of big.xml");
    assert_eq!(c.sitemap_errors, 1, "broken.xml");
    assert!(
        c.disallowed >= 1,
        "/private/sitemap.xml: {}",
        summary.human()
    );

    let record = |path: &str| {
        let url = format!("http://{}{path}", testweb::SITEMAPS_HOST);
        records
            .iter()
            .find(|r| r.url == url || r.url == format!("{url}#sitemap"))
            .unwrap_or_else(|| panic!("no record of {url}"))
    };
    let gz = record("/sitemaps/pages.xml.gz");
    assert!(gz.url.ends_with("#sitemap"), "{}", gz.url);
    let info = gz.sitemap.as_ref().expect("a sitemap's record says so");
    assert!(info.gzip);
    assert_eq!(info.entries, 5);
    // `/linked` is listed too: it counts here when the sitemap was read before the home
    // page that links it (the two race), and the page that found it first is its parent.
    let linked = record("/linked");
    let found_here = linked.parent.as_deref() == Some(gz.url.as_str());
    assert_eq!(
        gz.new_links,
        3 + u64::from(found_here),
        "the three only-in-sitemap pages, and /linked if found here first"
    );
    let lastmod: Vec<(String, String)> = (1..=3)
        .map(|i| {
            let loc = format!("http://{}/only-in-sitemap/{i}", testweb::SITEMAPS_HOST);
            (loc, testweb::sitemap_lastmod(i))
        })
        .collect();
    assert_eq!(info.lastmod, lastmod);
    let big = record("/sitemaps/big.xml");
    let big_info = big.sitemap.as_ref().unwrap();
    assert_eq!((big_info.entries, big_info.cut), (50_000, 1));
    assert!(record("/sitemaps/broken.xml").error.is_some());
    let index = record("/sitemap_index.xml");
    assert_eq!(
        index.sitemap.as_ref().unwrap().kind,
        Some(crawler::sitemap::Kind::Sitemapindex)
    );
    assert_eq!(index.depth, 0, "named by robots.txt");
    assert_eq!(record("/sitemaps/pages.xml.gz").depth, 1);
    assert_eq!(record("/only-in-sitemap/1").depth, 2);
    assert!(record("/only-in-sitemap/1").sitemap.is_none());
}

#[test]
fn sitemaps_are_not_read_when_off() {
    let _load = crate::support::ordinary();
    let (server, _, summary) = crawl_sitemaps(false, true);
    let log = requested(&server, testweb::SITEMAPS_HOST);
    let got: BTreeSet<&str> = log.iter().map(String::as_str).collect();
    let want: BTreeSet<&str> = ["/robots.txt", "/", "/linked"].into_iter().collect();
    assert_eq!(got, want);
    assert_eq!(summary.counts.sitemaps_read, 0);
}

#[test]
fn sitemaps_without_robots_are_the_seed_hosts_sitemap_xml() {
    let _load = crate::support::ordinary();
    let (server, _, _) = crawl_sitemaps(true, false);
    let log = requested(&server, testweb::SITEMAPS_HOST);
    let got: BTreeSet<&str> = log.iter().map(String::as_str).collect();
    let want: BTreeSet<&str> = ["/", "/linked", "/sitemap.xml", "/from-root-sitemap"]
        .into_iter()
        .collect();
    assert_eq!(got, want);
}

#[test]
fn defaults_finish_a_documentation_site_and_still_stop_the_traps() {
    let _load = crate::support::ordinary();
    // The documentation site, and the synthetic web's calendar trap on h0.test.
    let web = corner_web(Features {
        docsite: true,
        trap: true,
        ..Features::none()
    });
    let server = TestWebServer::start(web).unwrap();
    let out = tempfile::tempdir().unwrap();
    // Only politeness is relaxed for speed (and the synthetic web mapped): [crawl] and
    // [scope] are the defaults.
    let defaults = crawler::config::Config::default();
    let mut config = config_for(&server, out.path(), true);
    config.crawl = defaults.crawl.clone();
    assert_eq!(config.scope, defaults.scope);
    let seeds = [
        format!("http://{}/", testweb::DOCS_HOST),
        "http://h0.test/".to_string(),
    ];
    let summary = crawl(&config, &seeds, ShutdownHandle::new());

    let log = requested(&server, testweb::DOCS_HOST);
    let got: BTreeSet<&str> = log
        .iter()
        .map(String::as_str)
        .filter(|p| *p != "/robots.txt")
        .collect();
    let expected = testweb::doc_expected();
    let want: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    // Paths shortened to 60 bytes in the message: some are 3 KB.
    let short = |p: &&str| p.chars().take(60).collect::<String>();
    let missing: Vec<String> = want.difference(&got).map(short).collect();
    let extra: Vec<String> = got.difference(&want).map(short).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs.test: missing {missing:?}, unexpected {extra:?}"
    );
    assert_eq!(log.len(), want.len() + 1, "each once, robots.txt too");
    let deepest = format!("http://{}/book/{}", testweb::DOCS_HOST, testweb::DOC_CHAIN);
    let deepest = records(out.path())
        .into_iter()
        .find(|r| r.url == deepest)
        .unwrap();
    assert_eq!(deepest.depth, testweb::DOC_CHAIN);

    // The traps are still stopped, not by depth: the repeating path (whose pages show their
    // own path, so they are not alike) by its repetition limit, the calendar (short URLs,
    // no repetition) as near-duplicates: its entry month and the two months it links, each
    // of those recorded as a duplicate of the entry.
    assert!(summary.counts.out_of_scope["repeated_segments"] >= 1);
    let months: Vec<_> = records(out.path())
        .into_iter()
        .filter(|r| r.url.starts_with("http://h0.test/calendar/"))
        .collect();
    assert!(months.len() <= 10, "{} calendar months", months.len());
    let entry = "http://h0.test/calendar/2026/11";
    let duplicates = months
        .iter()
        .filter(|r| r.duplicate_of.as_deref() == Some(entry))
        .count();
    assert_eq!((months.len(), duplicates), (3, 2));
    assert_eq!(
        summary.counts.near_duplicate_pages as usize,
        duplicates + near_docs(&out)
    );
}

/// Near-duplicates among the documentation site's pages: its long reference pages are all
/// the same page (a link home), which is harmless (their links are seen already).
fn near_docs(out: &tempfile::TempDir) -> usize {
    records(out.path())
        .iter()
        .filter(|r| r.url.contains(testweb::DOCS_HOST) && r.duplicate_of.is_some())
        .count()
}
