//! Crawls of the synthetic web over https (`testweb` with TLS: a CA made up at start, ALPN
//! `h2` and `http/1.1`): the crawl trusts the CA through `network.ca_file`, speaks HTTP/2
//! where offered and reuses its connections, falls back to HTTP/1.1 where only that is
//! offered, fails each URL with a certificate error when the CA is not trusted, and
//! archives h2 responses as such.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::support::{config_for, crawl, records, rules_for};
use crate::warc::warc_files;
use crate::warcio_support::{self, warcio, Brotli};
use crawler::config::Config;
use crawler::output::RecordKind;
use crawler::ShutdownHandle;
use testweb::{
    max_concurrency, Hostile, HttpVersion, ServerOptions, TestWebServer, TlsMode, Web, WebSpec,
};

fn tls_server(web: &Arc<Web>, tls: TlsMode) -> TestWebServer {
    TestWebServer::start_with(
        web.clone(),
        ServerOptions {
            tls,
            ..ServerOptions::default()
        },
    )
    .unwrap()
}

/// `config_for` the server, trusting its CA (written into `dir`).
fn tls_config(server: &TestWebServer, dir: &Path, out: &Path) -> Config {
    let ca = dir.join("testweb-ca.pem");
    std::fs::write(&ca, server.ca_pem().expect("a TLS server has a CA")).unwrap();
    let mut config = config_for(server, out, true);
    config.network.ca_file = Some(ca);
    config
}

fn https_seeds(server: &TestWebServer, web: &Web) -> Vec<String> {
    web.seeds().iter().map(|s| server.url_for(s)).collect()
}

/// Crawls the web over TLS and checks it against the ground truth: the server's log
/// (which carries no scheme) and pages.jsonl (every URL `https`, else the truth's).
fn crawl_matches_the_ground_truth(
    web: &Arc<Web>,
    server: &TestWebServer,
    config: &Config,
    out: &Path,
) {
    let seeds = https_seeds(server, web);
    let summary = crawl(config, &seeds, ShutdownHandle::new());
    let truth = web.ground_truth(&web.seeds(), &rules_for(config));
    let diff = truth.diff_log(&server.log());
    assert!(diff.is_empty(), "server log vs ground truth: {diff}");
    let records = records(out);
    // pages.jsonl also lists what robots.txt disallowed (unfetched) and robots.txt itself.
    let recorded: BTreeSet<String> = records
        .iter()
        .filter(|r| r.kind == RecordKind::Page)
        .filter(|r| r.error.as_deref() != Some("disallowed by robots.txt"))
        .map(|r| {
            let rest = r.url.strip_prefix("https://").unwrap_or_else(|| {
                panic!("{} left https", r.url);
            });
            format!("http://{rest}")
        })
        .collect();
    let expected = truth.urls();
    let missing: Vec<_> = expected.difference(&recorded).collect();
    let extra: Vec<_> = recorded.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "pages.jsonl vs ground truth: missing {missing:?}, extra {extra:?}"
    );
    assert_eq!(summary.counts.finished, truth.len() as u64);
    let certificate_errors: Vec<_> = records
        .iter()
        .filter_map(|r| r.error.as_deref())
        .filter(|e| e.contains("certificate"))
        .collect();
    assert!(certificate_errors.is_empty(), "{certificate_errors:?}");
}

#[test]
fn an_https_crawl_speaks_h2_on_few_connections_and_matches_the_ground_truth() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(41)));
    let server = tls_server(&web, TlsMode::H2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let config = tls_config(&server, dir.path(), &out);
    crawl_matches_the_ground_truth(&web, &server, &config, &out);

    let log = server.log();
    let not_h2: Vec<_> = log
        .iter()
        .filter(|r| r.version != HttpVersion::Http2)
        .collect();
    assert!(not_h2.is_empty(), "requests not over HTTP/2: {not_h2:?}");
    // One connection per origin carries its requests as streams. A host's first requests
    // may start together before any connection exists (ALPN's answer comes with the
    // handshake), and a connection idle past the pool's timeout is closed: a few, never
    // one per request.
    let mut connections: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for r in &log {
        connections
            .entry(r.host.as_str())
            .or_default()
            .insert(r.connection);
    }
    let per_host_concurrency = config.politeness.per_host_concurrency as usize;
    for (host, ids) in &connections {
        let requests = log.iter().filter(|r| r.host == *host).count();
        eprintln!("{host}: {requests} requests on {} connections", ids.len());
        assert!(
            ids.len() <= per_host_concurrency,
            "{host}: {requests} requests on {} connections",
            ids.len()
        );
    }
    let total: usize = connections.values().map(BTreeSet::len).sum();
    assert!(
        total * 5 <= log.len(),
        "{} requests on {total} connections: not reused",
        log.len()
    );
    // Streams on one connection still obey the per-host concurrency.
    for host in connections.keys() {
        let most = max_concurrency(&log, |r| r.host == *host);
        assert!(
            most <= per_host_concurrency,
            "{host}: {most} requests at once"
        );
    }
}

#[test]
fn an_https_crawl_of_an_http1_only_server_matches_the_ground_truth() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(42)));
    let server = tls_server(&web, TlsMode::Http1Only);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let config = tls_config(&server, dir.path(), &out);
    crawl_matches_the_ground_truth(&web, &server, &config, &out);
    let log = server.log();
    assert!(!log.is_empty());
    let not_http1: Vec<_> = log
        .iter()
        .filter(|r| r.version != HttpVersion::Http11)
        .collect();
    assert!(not_http1.is_empty(), "{not_http1:?}");
}

#[test]
fn without_the_ca_every_url_fails_with_a_certificate_error_and_the_exit_code_says_so() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(43)));
    // With robots.txt off the pages' own fetches fail; with it on, each host's robots.txt
    // fails once and the host's URLs are given up at once (a certificate does not change
    // on a second try, so the backed-off attempts at an unreachable robots.txt are skipped).
    for respect_robots in [false, true] {
        let server = tls_server(&web, TlsMode::H2);
        let dir = tempfile::tempdir().unwrap();
        let seeds = https_seeds(&server, &web);
        std::fs::write(dir.path().join("seeds.txt"), seeds.join("\n") + "\n").unwrap();
        let (pattern, addr) = server.resolve_entry();
        let output = Command::new(env!("CARGO_BIN_EXE_crawler"))
            .args([
                "--seeds",
                "seeds.txt",
                "--max-urls",
                "1000",
                "--out",
                "out",
                "--progress",
                "quiet",
                "--set",
                &format!("network.resolve.\"{pattern}\"={addr}"),
                "--set",
                "crawl.retries=1",
                "--set",
                &format!("politeness.respect_robots={respect_robots}"),
            ])
            .current_dir(dir.path())
            .env("RUST_LOG", "warn")
            .output()
            .expect("run crawler");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "exit code 1 = fetch failures: {stderr}"
        );
        let records = records(&dir.path().join("out"));
        assert_eq!(records.len(), seeds.len(), "{records:?}");
        let hosts: std::collections::HashSet<_> = seeds
            .iter()
            .filter_map(|s| url::Url::parse(s).ok()?.host_str().map(str::to_string))
            .collect();
        for r in &records {
            let error = r.error.as_deref().unwrap_or_default();
            assert!(
                error.contains("certificate rejected") && r.status.is_none(),
                "{}: {error:?}",
                r.url
            );
            if respect_robots {
                assert!(error.contains("not asked again"), "{}: {error:?}", r.url);
            } else {
                // A certificate does not change on a second try.
                assert_eq!(r.attempts, 1, "{}", r.url);
            }
        }
        assert!(server.log().is_empty(), "no request passed the handshake");
        let failures = server.tls_handshake_failures();
        assert!(
            failures >= hosts.len() as u64,
            "{failures} handshakes failed"
        );
        if respect_robots {
            // One robots.txt attempt per host, not one per backed-off retry (5 each).
            assert!(
                failures < 2 * hosts.len() as u64,
                "{failures} handshakes failed for {} hosts",
                hosts.len()
            );
        }
    }
}

#[test]
fn an_archive_made_over_h2_passes_warcio_and_says_h2() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(44)));
    let server = tls_server(&web, TlsMode::H2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut config = tls_config(&server, dir.path(), &out);
    config.output.warc = true;
    let summary = crawl(&config, &https_seeds(&server, &web), ShutdownHandle::new());
    assert!(summary.counts.finished > 0);
    let files = warc_files(&out);
    assert!(!files.is_empty());
    let mut responses = 0;
    warcio_support::check(&files, Brotli::AsInstalled);
    for file in &files {
        let path = file.to_str().unwrap();
        for line in warcio(&[
            "index",
            "-f",
            "warc-type,warc-target-uri,warc-protocol,warc-ip-address",
            path,
        ])
        .lines()
        {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if !matches!(v["warc-type"].as_str(), Some("response" | "revisit")) {
                continue;
            }
            responses += 1;
            assert!(
                v["warc-target-uri"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("https://")),
                "{v}"
            );
            assert_eq!(v["warc-protocol"].as_str(), Some("h2"), "{v}");
            // The peer's address is known over TLS and h2: what the request gate's
            // `check_connected` checks.
            assert_eq!(v["warc-ip-address"].as_str(), Some("127.0.0.1"), "{v}");
        }
    }
    assert!(responses > 0);
}

#[test]
fn private_addresses_are_refused_over_https_too() {
    let _load = crate::support::ordinary();
    // A one-host synthetic web: only the hostile corner's private redirects are crawled,
    // served over TLS; their `Location`s and literal links become `https://127.0.0.1:…`.
    let web = Arc::new(Web::new(WebSpec {
        hosts: 1,
        pages: 1,
        ..WebSpec::small(90)
    }));
    let server = TestWebServer::start_hostile(
        web,
        ServerOptions {
            tls: TlsMode::H2,
            ..ServerOptions::default()
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut config = tls_config(&server, dir.path(), &out);
    // `any` scope: the private-address rule, not the site rule, is what must stop them.
    config.scope.mode = crawler::scope::ScopeMode::Any;
    let seeds: Vec<String> = [Hostile::PrivateRedirect, Hostile::PrivateRobots]
        .iter()
        .map(|h| server.url_for(&h.seed()))
        .collect();
    crawl(&config, &seeds, ShutdownHandle::new());
    assert_eq!(server.canary_connections(), 0, "the canary was reached");
    let records = records(&out);
    let host = Hostile::PrivateRedirect.host();
    // Each redirect was fetched over TLS and points at a private https URL...
    for (path, target) in [
        ("/to-canary", "https://127.0.0.1:"),
        ("/to-metadata", "https://169.254.169.254/"),
        ("/to-localhost", "https://localhost:"),
    ] {
        let url = format!("https://{host}{path}");
        let r = records
            .iter()
            .find(|r| r.url == url)
            .unwrap_or_else(|| panic!("{url} not recorded"));
        assert_eq!(r.status, Some(302), "{r:?}");
        assert!(
            r.final_url
                .as_deref()
                .is_some_and(|f| f.starts_with(target)),
            "{r:?}"
        );
    }
    // ...and nothing private was fetched (a refused URL may be recorded, never with a
    // response).
    for r in &records {
        let url = url::Url::parse(&r.url).unwrap();
        let host = url.host_str().unwrap_or_default();
        if host == "127.0.0.1" || host == "169.254.169.254" || host == "localhost" {
            assert_eq!(r.status, None, "{r:?}");
        }
    }
}

#[test]
fn with_few_descriptors_the_rebuilt_client_still_trusts_the_ca() {
    let _load = crate::support::ordinary();
    // Idle connections are closed by building a new client (`shed_idle_connections`): were
    // it built without `network.ca_file`, the fetches after the first pause would fail
    // with certificate errors, and the crawl would count network errors.
    crate::descriptors::many_hosts_with_few_descriptors(TlsMode::H2);
}
