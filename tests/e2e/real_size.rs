//! A crawl of pages of real size and shape (testweb's `real_size`: log-normal sizes around
//! 150 KB, inline styles and scripts, JSON blobs holding link-like text), served gzip or br
//! and over https: the web as it is, in a test small enough for CI. The crawl must find
//! exactly the ground truth (no link taken from a script, a style or JSON), decode every
//! coding, and archive valid WARC.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::support::{config_for, crawl, records, rules_for};
use crate::warcio_support::{check, warc_files, Brotli};
use crawler::output::RecordKind;
use crawler::ShutdownHandle;
use testweb::{ServerOptions, TestWebServer, TlsMode, Web, WebSpec};

#[test]
fn a_crawl_of_real_size_pages_over_https_with_gzip_and_br_matches_the_ground_truth() {
    let _load = crate::support::ordinary();
    let mut spec = WebSpec::real_size(61);
    spec.hosts = 3;
    spec.pages = 45;
    spec.links_per_page = 80;
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start_with(
        web.clone(),
        ServerOptions {
            tls: TlsMode::H2,
            encodings: true,
            ..ServerOptions::default()
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let ca = dir.path().join("testweb-ca.pem");
    std::fs::write(&ca, server.ca_pem().expect("a TLS server has a CA")).unwrap();
    let mut config = config_for(&server, &out, false);
    config.network.ca_file = Some(ca);
    config.network.accept_encoding = vec!["gzip".into(), "br".into()];
    config.output.warc = true;
    let seeds: Vec<String> = web.seeds().iter().map(|s| server.url_for(s)).collect();
    let summary = crawl(&config, &seeds, ShutdownHandle::new());
    let log = server.log();
    server.shutdown();

    let truth = web.ground_truth(&web.seeds(), &rules_for(&config));
    let diff = truth.diff_log(&log);
    assert!(diff.is_empty(), "server log vs ground truth: {diff}");
    assert_eq!(summary.counts.finished, truth.len() as u64);
    assert_eq!(summary.failures, 0, "{}", summary.human());
    let codings: BTreeSet<_> = log.iter().filter_map(|r| r.content_coding).collect();
    assert_eq!(codings, BTreeSet::from(["br", "gzip"]), "codings sent");

    // Every tree page was decoded whole, not cut: its size is its rendering's (over TLS the
    // links gain an `s` each, so a little more).
    let pages = records(&out);
    let mut tree_bytes = 0;
    let mut tree_pages = 0;
    for r in pages.iter().filter(|r| r.kind == RecordKind::Page) {
        let plain = r.url.replacen("https://", "http://", 1);
        if !web.tree_urls().contains(&plain) {
            continue;
        }
        let rendered = web.render(&plain, 0).expect("a page").body.len() as u64;
        assert!(
            r.bytes >= rendered && r.bytes < rendered + 200 * 8,
            "{}: {} bytes decoded, {rendered} rendered",
            r.url,
            r.bytes
        );
        assert!(r.error.is_none(), "{}: {:?}", r.url, r.error);
        tree_bytes += r.bytes;
        tree_pages += 1;
    }
    assert_eq!(tree_pages, 45, "every tree page recorded");
    assert!(
        tree_bytes / tree_pages > 60_000,
        "mean page {} bytes",
        tree_bytes / tree_pages
    );
    // The archive: valid to warcio, every digest checked (br bodies left coded, see
    // warcio_support).
    let files = warc_files(&out.join("warc"));
    let records_checked: usize = check(&files, Brotli::Hidden).iter().sum();
    assert!(
        records_checked > 2 * tree_pages as usize,
        "{records_checked}"
    );
}
