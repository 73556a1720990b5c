//! The two sources of work alike: what a local crawl does and counts, one process of a
//! distributed crawl (on a `redis-server` started for the test) does and counts too. Each
//! test here is a place where the two modes once drifted apart.

use crawler::crawl::ProgressMode;
use crawler::{run_crawl, CrawlRequest, ShutdownHandle};
use testweb::{TestWebServer, Web, WebSpec};
use url::Url;

use crate::distributed::RedisServer;

/// Crawls `seeds` with `max_urls` 2, one page per host and depth 0 (the seeds alone), on
/// Redis when `redis` is given; returns the summary as JSON.
fn crawl_seeds_only(
    server: &TestWebServer,
    seeds: &[String],
    redis: Option<&RedisServer>,
) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::config_for(server, &dir.path().join("out"), false);
    config.crawl.max_urls = crawler::config::Count(2);
    config.crawl.max_depth = 0;
    config.scope.max_pages_per_host = 1;
    if let Some(redis) = redis {
        config.distributed.redis = Some(redis.url());
        config.distributed.crawl_id = Some("parity".into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let summary = runtime
        .block_on(run_crawl(CrawlRequest {
            config,
            seeds: seeds.iter().map(|s| Url::parse(s).unwrap()).collect(),
            progress: ProgressMode::Quiet,
            shutdown: ShutdownHandle::new(),
            resume: None,
        }))
        .expect("crawl runs");
    serde_json::to_value(&summary).unwrap()
}

/// Seeds refused for `scope.max_pages_per_host` and for `max_urls` are counted as links
/// refused for those reasons, locally and in a distributed process alike (a distributed
/// process once counted neither).
#[test]
fn refused_seeds_are_counted_in_both_modes() {
    let _load = crate::support::ordinary();
    let web = std::sync::Arc::new(Web::new(WebSpec::small(91)));
    let server = TestWebServer::start(web.clone()).unwrap();
    let homes = web.seeds();
    // Two pages of the first host (the second over its cap of one), then a page of each of
    // two more hosts (the last over max_urls = 2).
    let seeds = vec![
        homes[0].clone(),
        format!("{}second-page", homes[0]),
        homes[1].clone(),
        homes[2].clone(),
    ];
    let redis = RedisServer::start(false);
    for (mode, summary) in [
        ("local", crawl_seeds_only(&server, &seeds, None)),
        (
            "distributed",
            crawl_seeds_only(&server, &seeds, Some(&redis)),
        ),
    ] {
        assert_eq!(summary["accepted"], 2, "{mode}: {summary}");
        assert_eq!(summary["links_host_cap"], 1, "{mode}: {summary}");
        assert_eq!(summary["links_over_cap"], 1, "{mode}: {summary}");
    }
}
