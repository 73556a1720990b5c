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
