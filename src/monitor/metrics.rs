//! `/metrics`: the status in the Prometheus text format (0.0.4), encoded by
//! `prometheus-client` through a [`Collector`] that reads one [`Status`] per scrape.
//!
//! Names follow Prometheus's conventions: `crawler_` first, the unit in the name
//! (`_bytes`, `_seconds`, `_ratio`), `_total` on counters (added by the encoder). Every
//! crawl counter is exported under [`COUNTERS`], which a unit test keeps complete: a new
//! counter in `crate::counters` fails that test until it has a metric here. Per-host series
//! exist only for the status's `top_hosts`, which is bounded (see [`super::MAX_TOP_HOSTS`]).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::Status;

/// The `Content-Type` of `/metrics`.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// One crawl counter as a metric: its `summary.json` name, its family (without `_total`),
/// the family's help, the label that tells it apart in its family, and the factor that
/// turns it into the family's unit.
pub(crate) struct CounterMetric {
    pub(crate) field: &'static str,
    pub(crate) family: &'static str,
    pub(crate) help: &'static str,
    pub(crate) label: Option<(&'static str, &'static str)>,
    pub(crate) scale: Option<f64>,
}

const fn plain(field: &'static str, family: &'static str, help: &'static str) -> CounterMetric {
    CounterMetric {
        field,
        family,
        help,
        label: None,
        scale: None,
    }
}

const fn labelled(
    field: &'static str,
    family: &'static str,
    help: &'static str,
    label: (&'static str, &'static str),
) -> CounterMetric {
    CounterMetric {
        field,
        family,
        help,
        label: Some(label),
        scale: None,
    }
}

const PAGES: &str = "Fetches that ended, by HTTP status class after retries (5xx includes 429; no_response: network errors; not_modified: a recrawl's 304)";
const REFUSED: &str = "Links found and not queued, by reason";
const UNFETCHED: &str = "Accepted URLs ended without a fetch, by reason";

/// Every crawl counter (`crate::counters`), as a metric. Families sharing a name are
/// adjacent (one HELP and TYPE each).
pub(crate) const COUNTERS: &[CounterMetric] = &[
    labelled("ok", "crawler_pages", PAGES, ("class", "2xx")),
    labelled("redirects", "crawler_pages", PAGES, ("class", "3xx")),
    labelled("client_errors", "crawler_pages", PAGES, ("class", "4xx")),
    labelled("server_errors", "crawler_pages", PAGES, ("class", "5xx")),
    labelled(
        "network_errors",
        "crawler_pages",
        PAGES,
        ("class", "no_response"),
    ),
    labelled(
        "not_modified",
        "crawler_pages",
        PAGES,
        ("class", "not_modified"),
    ),
    plain(
        "finished",
        "crawler_urls_finished",
        "Accepted URLs that reached their end (a record was written)",
    ),
    plain(
        "accepted",
        "crawler_urls_accepted",
        "URLs taken on, seeds included (never more than max_urls)",
    ),
    plain("retries", "crawler_retries", "Fetch retries scheduled"),
    plain(
        "bytes",
        "crawler_response_body_bytes",
        "Response body bytes received",
    ),
    plain("parsed", "crawler_pages_parsed", "Pages parsed for links"),
    plain(
        "links_found",
        "crawler_links_found",
        "Links found in parsed pages",
    ),
    labelled(
        "links_seen",
        "crawler_links_refused",
        REFUSED,
        ("reason", "seen"),
    ),
    labelled(
        "links_too_deep",
        "crawler_links_refused",
        REFUSED,
        ("reason", "too_deep"),
    ),
    labelled(
        "links_over_cap",
        "crawler_links_refused",
        REFUSED,
        ("reason", "over_max_urls"),
    ),
    labelled(
        "links_nofollow",
        "crawler_links_refused",
        REFUSED,
        ("reason", "nofollow"),
    ),
    labelled(
        "links_not_http",
        "crawler_links_refused",
        REFUSED,
        ("reason", "not_http"),
    ),
    labelled(
        "links_invalid",
        "crawler_links_refused",
        REFUSED,
        ("reason", "invalid"),
    ),
    labelled(
        "links_host_cap",
        "crawler_links_refused",
        REFUSED,
        ("reason", "over_max_pages_per_host"),
    ),
    labelled(
        "links_over_page_cap",
        "crawler_links_refused",
        REFUSED,
        ("reason", "over_max_links_per_page"),
    ),
    labelled(
        "links_near_duplicate",
        "crawler_links_refused",
        REFUSED,
        ("reason", "on_near_duplicate_page"),
    ),
    plain(
        "near_duplicate_pages",
        "crawler_pages_near_duplicate",
        "Pages identical to an earlier page of their host but for their digits (links not followed)",
    ),
    plain(
        "redirects_over_limit",
        "crawler_redirect_chains_cut",
        "Redirect chains cut at max_redirects",
    ),
    plain(
        "sitemaps_read",
        "crawler_sitemaps_read",
        "Sitemaps fetched and read",
    ),
    plain(
        "sitemap_entries",
        "crawler_sitemap_entries",
        "Entries listed by the sitemaps read",
    ),
    plain(
        "sitemap_entries_cut",
        "crawler_sitemap_entries_cut",
        "Sitemap entries past 50,000 per file, not taken",
    ),
    plain(
        "sitemap_errors",
        "crawler_sitemap_errors",
        "Sitemaps cut at 50 MiB or not readable to their end",
    ),
    labelled(
        "disallowed",
        "crawler_urls_unfetched",
        UNFETCHED,
        ("reason", "robots_disallowed"),
    ),
    labelled(
        "deferred",
        "crawler_urls_unfetched",
        UNFETCHED,
        ("reason", "crawl_delay_too_long"),
    ),
    labelled(
        "robots_unavailable",
        "crawler_urls_unfetched",
        UNFETCHED,
        ("reason", "robots_unavailable"),
    ),
    plain(
        "robots_fetches",
        "crawler_robots_fetches",
        "robots.txt fetches made",
    ),
    CounterMetric {
        field: "false_positive_micros",
        family: "crawler_seen_false_positive_skips_estimated",
        help: "Expected number of new URLs wrongly reported as seen by the seen-set",
        label: None,
        scale: Some(1e-6),
    },
    CounterMetric {
        field: "parse_cpu_ns",
        family: "crawler_parse_cpu_seconds",
        help: "CPU time of the parse threads",
        label: None,
        scale: Some(1e-9),
    },
    plain(
        "descriptor_pauses",
        "crawler_descriptor_pauses",
        "Times dispatching paused because file descriptors ran short",
    ),
    plain(
        "panics",
        "crawler_panics",
        "URLs lost to a panic in the crawler (a bug)",
    ),
    plain(
        "warc_records",
        "crawler_archive_records",
        "WARC records written (not warcinfo)",
    ),
    plain(
        "warc_bytes",
        "crawler_archive_bytes",
        "Bytes of WARC records written, compressed as on disk",
    ),
    plain(
        "warc_payload_bytes",
        "crawler_archive_payload_bytes",
        "Payload bytes archived in full, as received",
    ),
    plain(
        "warc_revisits",
        "crawler_archive_revisits",
        "Responses archived as revisit records",
    ),
    plain(
        "warc_bytes_saved",
        "crawler_archive_bytes_saved",
        "Payload bytes not archived again thanks to revisits",
    ),
    plain(
        "warc_stored",
        "crawler_archive_stored",
        "Responses archived in full stored, not deflated",
    ),
];

/// The scope counters' family (one series per reason of `OutOfScope`).
const OUT_OF_SCOPE: (&str, &str) = (
    "crawler_links_out_of_scope",
    "Links and redirect targets refused by the scope rules, by reason",
);

/// The exposition of `status`.
pub(crate) fn render(status: Status) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(StatusCollector(status)));
    let mut text = String::new();
    if prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).is_err() {
        // Writing to a String does not fail; an encoder error would be a bug of ours.
        text.clear();
    }
    text
}

#[derive(Debug)]
struct StatusCollector(Status);

impl Collector for StatusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let values = serde_json::to_value(&s.counters).unwrap_or_default();
        let mut i = 0;
        while i < COUNTERS.len() {
            let family = COUNTERS[i].family;
            let end = COUNTERS[i..]
                .iter()
                .position(|m| m.family != family)
                .map_or(COUNTERS.len(), |n| i + n);
            let mut metric =
                encoder.encode_descriptor(family, COUNTERS[i].help, None, MetricType::Counter)?;
            let value =
                |m: &CounterMetric| values.get(m.field).and_then(|v| v.as_u64()).unwrap_or(0);
            match &COUNTERS[i..end] {
                [only] if only.label.is_none() => match only.scale {
                    Some(scale) => ConstCounter::new(value(only) as f64 * scale).encode(metric)?,
                    None => ConstCounter::new(value(only)).encode(metric)?,
                },
                members => {
                    for m in members {
                        let labels = [m.label.unwrap_or(("field", m.field))];
                        ConstCounter::new(value(m)).encode(metric.encode_family(&labels)?)?;
                    }
                }
            }
            i = end;
        }
        {
            let mut metric = encoder.encode_descriptor(
                OUT_OF_SCOPE.0,
                OUT_OF_SCOPE.1,
                None,
                MetricType::Counter,
            )?;
            for (reason, n) in &s.counters.out_of_scope {
                let labels = [("reason", *reason)];
                ConstCounter::new(*n).encode(metric.encode_family(&labels)?)?;
            }
        }
        if let Some(n) = s.redis_round_trips {
            let metric = encoder.encode_descriptor(
                "crawler_redis_round_trips",
                "Round trips to Redis (distributed mode)",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(n).encode(metric)?;
        }

        let mut gauge = |name: &str, help: &str, value: f64| -> Result<(), std::fmt::Error> {
            let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(value).encode(metric)
        };
        let running = if s.state == "running" { 1.0 } else { 0.0 };
        gauge(
            "crawler_running",
            "1 while the crawl runs, 0 once it has ended (the figures are final)",
            running,
        )?;
        gauge(
            "crawler_max_urls",
            "The crawl's max_urls",
            s.max_urls as f64,
        )?;
        gauge(
            "crawler_elapsed_seconds",
            "Time since the crawl (this process) started",
            s.elapsed_secs,
        )?;
        gauge(
            "crawler_urls_queued",
            "URLs waiting in the frontier",
            s.frontier.queued as f64,
        )?;
        gauge(
            "crawler_urls_in_flight",
            "Fetches (pages and robots.txt) in flight",
            s.frontier.in_flight as f64,
        )?;
        gauge(
            "crawler_hosts",
            "Hosts known to the frontier",
            s.frontier.hosts as f64,
        )?;
        gauge(
            "crawler_hosts_queued",
            "Hosts with URLs queued",
            s.frontier.hosts_queued as f64,
        )?;
        gauge(
            "crawler_seen_urls",
            "URLs inserted in the seen-set",
            s.seen.insertions as f64,
        )?;
        gauge(
            "crawler_seen_fill_ratio",
            "Share of the seen-set's bits set",
            s.seen.fill,
        )?;
        gauge(
            "crawler_seen_false_positive_ratio_estimated",
            "The seen-set's false-positive rate, estimated from its fill",
            s.seen.estimated_fpp,
        )?;
        gauge(
            "crawler_seen_bytes",
            "The seen-set's size",
            s.seen.bytes as f64,
        )?;
        gauge("crawler_pages_per_second", "URLs finished per second over the last 5 s (rate() of crawler_urls_finished_total says the same over any window)", s.pages_per_sec)?;
        if let Some(c) = &s.checkpoint {
            gauge(
                "crawler_checkpoint_age_seconds",
                "Time since the current checkpoint was published",
                c.age_secs,
            )?;
        }

        type HostValue = fn(&super::status::HostFigures) -> Option<f64>;
        let per_host: [(&str, &str, HostValue); 5] = [
            ("crawler_host_urls_queued", "URLs queued for the host (top hosts only)", |h| Some(h.queued as f64)),
            ("crawler_host_urls_in_flight", "Fetches in flight to the host (top hosts only)", |h| Some(h.in_flight as f64)),
            ("crawler_host_pages_per_second", "URLs of the host done per second over the last 5 s (top hosts only)", |h| Some(h.pages_per_sec)),
            ("crawler_host_failed_fetches", "Failed fetches (4xx, 5xx, no response) of the host since the process started (top and failing hosts only)", |h| Some(h.errors as f64)),
            ("crawler_host_next_allowed_seconds", "Time until the host's next request is allowed (top hosts with state in memory)", |h| h.next_allowed_in_secs),
        ];
        for (name, help, value) in per_host {
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for h in &s.top_hosts {
                if let Some(v) = value(h) {
                    let labels = [("host", h.host.as_str())];
                    ConstGauge::new(v).encode(metric.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::CrawlCounters;

    #[test]
    fn every_crawl_counter_has_a_metric() {
        let values = serde_json::to_value(CrawlCounters::default().values()).unwrap_or_default();
        let object = values.as_object().cloned().unwrap_or_default();
        for name in object.keys().filter(|k| *k != "out_of_scope") {
            assert!(
                COUNTERS.iter().any(|m| m.field == name),
                "counter {name} has no metric in monitor/metrics.rs"
            );
        }
        for m in COUNTERS {
            assert!(object.contains_key(m.field), "{} is not a counter", m.field);
        }
    }

    #[test]
    fn families_are_adjacent() {
        for (i, m) in COUNTERS.iter().enumerate() {
            let last = COUNTERS
                .iter()
                .rposition(|n| n.family == m.family)
                .unwrap_or(i);
            let first = COUNTERS
                .iter()
                .position(|n| n.family == m.family)
                .unwrap_or(i);
            assert!(
                COUNTERS[first..=last].iter().all(|n| n.family == m.family),
                "{} is split",
                m.family
            );
        }
    }
}
