//! Per-site settings end to end: a `[[site]]` section's user agent, extra header and basic
//! auth reach its host only (read from the synthetic web's request log), and its rate,
//! concurrency and `max_pages` hold there while the other hosts keep the crawl's settings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crawler::site::{SiteAuth, SiteSection};
use crawler::ShutdownHandle;
use testweb::{Features, RequestRecord, TestWebServer, Web, WebSpec};

use crate::support::{arrival_slack, config_for, crawl};

#[test]
fn a_site_section_applies_to_its_host_only() {
    let _load = crate::support::timing_sensitive();
    let web = Arc::new(Web::new(WebSpec {
        hosts: 3,
        pages: 90,
        features: Features::none(),
        ..WebSpec::small(41)
    }));
    let server = TestWebServer::start(web.clone()).unwrap();
    server.track_stalls();
    let out = tempfile::tempdir().unwrap();
    let mut config = config_for(&server, out.path(), false);
    let mut headers = BTreeMap::new();
    headers.insert("X-Site-Token".to_string(), "abc".to_string());
    config.site.push(SiteSection {
        host: "h1.test".into(),
        per_host_rps: Some(20.0),
        per_host_burst: Some(1),
        per_host_concurrency: Some(1),
        user_agent: Some("SiteBot/2.0 (+https://example.org/bot)".into()),
        headers,
        max_pages: Some(5),
        auth: Some(SiteAuth {
            user: "alice".into(),
            password: "s3cret".into(),
        }),
    });
    // A later section for the same host never applies: the first match wins.
    config.site.push(SiteSection {
        host: "*.test".into(),
        max_pages: Some(1),
        ..SiteSection::default()
    });
    config.site.insert(
        1,
        SiteSection {
            host: "h0.test".into(),
            ..SiteSection::default()
        },
    );
    crawl(&config, &web.seeds(), ShutdownHandle::new());
    let log: Vec<RequestRecord> = server.log();
    let (site, others): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
        log.iter().partition(|r| r.host == "h1.test");
    assert!(!site.is_empty() && !others.is_empty());
    for r in &site {
        assert_eq!(
            r.user_agent.as_deref(),
            Some("SiteBot/2.0 (+https://example.org/bot)")
        );
        assert_eq!(
            r.x_headers,
            vec![("x-site-token".to_string(), "abc".to_string())]
        );
        // base64("alice:s3cret")
        assert_eq!(r.authorization.as_deref(), Some("Basic YWxpY2U6czNjcmV0"));
    }
    for r in &others {
        assert!(
            r.user_agent
                .as_deref()
                .is_some_and(|ua| !ua.contains("SiteBot")),
            "{r:?}"
        );
        assert!(r.x_headers.is_empty() && r.authorization.is_none(), "{r:?}");
    }
    // max_pages: at most 5 URLs of h1 queued, so at most 5 requested; h0 matched a section
    // without max_pages (no cap), h2 the catch-all (1 page).
    assert!(site.len() <= 5, "{} requests to h1.test", site.len());
    let h0 = others.iter().filter(|r| r.host == "h0.test").count();
    let h2 = others.iter().filter(|r| r.host == "h2.test").count();
    assert!(h0 > 5, "h0.test had no cap: {h0} requests");
    assert_eq!(h2, 1, "h2.test capped at 1 page by *.test");
    // The site's rate (20/s) and concurrency (1) held on h1.
    let slack = arrival_slack(&server);
    let mut starts: Vec<Duration> = site.iter().map(|r| r.started).collect();
    starts.sort();
    for i in 0..starts.len() {
        for j in i + 1..starts.len() {
            let due = Duration::from_millis(50) * (j - i) as u32;
            assert!(
                starts[j] - starts[i] + slack >= due,
                "h1 requests {i} and {j} {:?} apart, due {due:?}",
                starts[j] - starts[i]
            );
        }
    }
    for r in &site {
        let overlapping = site
            .iter()
            .filter(|o| o.started < r.finished && r.started < o.finished)
            .count();
        assert_eq!(overlapping, 1, "two requests at once on h1.test");
    }
}
