//! The crawl's counters: what every stage counts, for the progress display, the
//! checkpoints and the summary.
//!
//! Each counter is named ONCE, in the `counters!` list below, with its meaning. The list
//! generates the shared atomic counters ([`CrawlCounters`]), their plain values for
//! `summary.json` ([`CounterValues`], same names), one URL's share of them ([`PageCounts`],
//! the `counts` of its record in `pages.jsonl`), and the by-name map a checkpoint stores and
//! a resume reads back. Adding a counter is one line here; nothing else needs to learn its
//! name unless it prints it in a sentence.
//!
//! # Why a URL's counts travel with its record
//!
//! A resumed crawl's summary must equal an uninterrupted one's. So what a URL adds to the
//! counters (its response class, bytes, parse, the fate of each of its links) is gathered in
//! its record's [`PageCounts`] while it is fetched and parsed, and added to the shared
//! counters by the dispatcher in the step that sends the record to `pages.jsonl` (the output
//! thread adds what the archive wrote, before the line is encoded). A checkpoint, taken by
//! the same task between two such steps with the output flushed, then holds exactly the
//! counts of the records it covers; a resume adds the `counts` of the records written after
//! it, and the URLs in flight at a crash, whose records were lost, count once, when fetched
//! again. What is not a URL's (robots.txt fetches, parse CPU time, descriptor pauses) is
//! counted directly and checkpointed as it stands: those are figures of the runs, not of
//! the web (see `summary.rs`).
//!
//! Counters are relaxed atomics: they are figures for people, never used to decide
//! anything that must be exact (the dispatcher keeps `accepted` itself, in the one task
//! that writes it, which is what makes `max_urls` exact).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::scope::OutOfScope;

macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Counters shared by every stage; read by the progress display and the summary.
        #[derive(Debug, Default)]
        pub struct CrawlCounters {
            $($(#[doc = $doc])* pub $name: AtomicU64,)*
            /// Links and redirect targets refused by the scope rules, by reason (indexed
            /// like [`OutOfScope::ALL`]).
            pub(crate) out_of_scope: [AtomicU64; OutOfScope::ALL.len()],
        }

        /// The counters' values at one instant, under the same names (`summary.json`).
        #[derive(Debug, Clone, Default, Serialize)]
        pub struct CounterValues {
            $($(#[doc = $doc])* pub $name: u64,)*
            /// Links and redirect targets refused by the scope rules, by reason.
            pub out_of_scope: BTreeMap<&'static str, u64>,
        }

        /// One URL's share of the counters (the `counts` of its record): plain numbers,
        /// gathered by the stages that handle the URL and added to [`CrawlCounters`] when its
        /// record is sent (see the module doc). In `pages.jsonl` only the counters it moved
        /// are written, by name; `finished` (the record itself) and `accepted` (its
        /// `new_links`) are never among them.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct PageCounts {
            $($(#[doc = $doc])* pub $name: u64,)*
            /// Links and redirect targets refused by the scope rules, by reason (indexed
            /// like [`OutOfScope::ALL`]).
            pub(crate) out_of_scope: [u64; OutOfScope::ALL.len()],
        }

        impl PageCounts {
            /// Every counter it moved, by name (`out_of_scope.<reason>` for the scope
            /// reasons), as a checkpoint names them.
            pub fn nonzero(&self) -> Vec<(String, u64)> {
                let mut moved = Vec::new();
                self.each_moved(|name, n| moved.push((name.to_string(), n)));
                moved
            }

            /// Calls `f` with each counter it moved, by name, without allocating (but for
            /// the rare scope reasons): a record's line is encoded for every page.
            fn each_moved(&self, mut f: impl FnMut(&str, u64)) {
                $(if self.$name != 0 {
                    f(stringify!($name), self.$name);
                })*
                for (reason, n) in OutOfScope::ALL.iter().zip(&self.out_of_scope) {
                    if *n != 0 {
                        f(&format!("out_of_scope.{}", reason.as_str()), *n);
                    }
                }
            }

            /// How many counters it moved.
            fn moved(&self) -> usize {
                let mut moved = 0;
                $(moved += usize::from(self.$name != 0);)*
                moved + self.out_of_scope.iter().filter(|n| **n != 0).count()
            }

            /// Sets the counter called `name`; false for a name it does not know.
            fn set(&mut self, name: &str, value: u64) -> bool {
                match name {
                    $(stringify!($name) => self.$name = value,)*
                    _ => {
                        let Some(index) = name
                            .strip_prefix("out_of_scope.")
                            .and_then(|r| OutOfScope::ALL.iter().position(|o| o.as_str() == r))
                        else {
                            return false;
                        };
                        self.out_of_scope[index] = value;
                    }
                }
                true
            }
        }

        impl CrawlCounters {
            /// Adds one URL's counts (see [`PageCounts`]).
            pub(crate) fn add_page(&self, counts: &PageCounts) {
                $(if counts.$name != 0 {
                    self.$name.fetch_add(counts.$name, Ordering::Relaxed);
                })*
                for (n, add) in self.out_of_scope.iter().zip(&counts.out_of_scope) {
                    if *add != 0 {
                        n.fetch_add(*add, Ordering::Relaxed);
                    }
                }
            }

            /// The values now.
            pub(crate) fn values(&self) -> CounterValues {
                CounterValues {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                    out_of_scope: OutOfScope::ALL
                        .iter()
                        .zip(&self.out_of_scope)
                        .map(|(reason, n)| (reason.as_str(), n.load(Ordering::Relaxed)))
                        .collect(),
                }
            }

            /// Every counter by name (`out_of_scope.<reason>` for the scope reasons), as a
            /// checkpoint stores them.
            pub(crate) fn to_map(&self) -> BTreeMap<String, u64> {
                let mut map = BTreeMap::new();
                $(map.insert(stringify!($name).to_string(), self.$name.load(Ordering::Relaxed));)*
                for (reason, n) in OutOfScope::ALL.iter().zip(&self.out_of_scope) {
                    map.insert(format!("out_of_scope.{}", reason.as_str()), n.load(Ordering::Relaxed));
                }
                map
            }

            /// Counters restored from a checkpoint (unknown names are ignored, missing ones
            /// start at zero, so a checkpoint from before a counter existed still loads).
            pub(crate) fn from_map(map: &BTreeMap<String, u64>) -> Self {
                let counters = CrawlCounters::default();
                $(if let Some(v) = map.get(stringify!($name)) {
                    counters.$name.store(*v, Ordering::Relaxed);
                })*
                for (reason, n) in OutOfScope::ALL.iter().zip(&counters.out_of_scope) {
                    if let Some(v) = map.get(&format!("out_of_scope.{}", reason.as_str())) {
                        n.store(*v, Ordering::Relaxed);
                    }
                }
                counters
            }
        }
    };
}

counters!(
    /// URLs taken on (seeds included): never more than `max_urls`.
    accepted,
    /// Accepted URLs that reached their end (a record was written).
    finished,
    /// Responses with a 2xx status.
    ok,
    /// `304 Not Modified` answers to a recrawl's conditional requests (`crate::recrawl`):
    /// the page is as the earlier generation archived it; no body, no links taken.
    not_modified,
    /// Redirect responses.
    redirects,
    /// 4xx responses.
    client_errors,
    /// 5xx or 429 responses after all retries.
    server_errors,
    /// No response after all retries (timeouts, refused connections…).
    network_errors,
    /// Retries made for the URLs done (a record's attempts beyond its first).
    retries,
    /// Body bytes of the responses recorded (decoded for a parsed page, as received
    /// otherwise; a response that was retried is not counted, its retry's is).
    bytes,
    /// Pages parsed for links.
    parsed,
    /// Links found in parsed pages.
    links_found,
    /// Links dropped because they are not http(s) (mailto:, javascript:, …).
    links_not_http,
    /// Links that did not resolve to a URL.
    links_invalid,
    /// Links not followed because of rel=nofollow.
    links_nofollow,
    /// Links already seen (in the seen-set, or repeated on one page).
    links_seen,
    /// Links not queued because they were deeper than `max_depth`.
    links_too_deep,
    /// Links not taken because the page had more than `crawl.max_links_per_page` (or its
    /// resolved links outgrew the page's memory budget).
    links_over_page_cap,
    /// Pages parsed whose host had already produced a page identical to them but for their
    /// digits (`crate::near_duplicate`): recorded with `duplicate_of`, links not followed.
    near_duplicate_pages,
    /// Links of those pages, not followed.
    links_near_duplicate,
    /// Links not queued because `max_urls` had been reached.
    links_over_cap,
    /// Redirect chains cut at `max_redirects`.
    redirects_over_limit,
    /// Sitemaps fetched and read (2xx; `crawl.sitemaps`).
    sitemaps_read,
    /// Entries (page or sitemap URLs) listed by the sitemaps read, within the limits.
    sitemap_entries,
    /// Sitemap entries past the protocol's 50,000 per file: counted, not taken.
    sitemap_entries_cut,
    /// Sitemaps cut at 50 MiB uncompressed, or not readable to their end (malformed XML,
    /// corrupt gzip, not a sitemap): their entries before the problem are taken.
    sitemap_errors,
    /// URLs not fetched because robots.txt disallows them.
    disallowed,
    /// URLs not fetched because their host's Crawl-delay is over
    /// `politeness.max_crawl_delay_secs`.
    deferred,
    /// URLs given up because their host's robots.txt stayed unreachable.
    robots_unavailable,
    /// robots.txt fetches made.
    robots_fetches,
    /// New links not queued because their host reached `scope.max_pages_per_host`.
    links_host_cap,
    /// Expected number of new URLs wrongly reported as seen, in millionths.
    false_positive_micros,
    /// CPU time of the parse threads, in nanoseconds.
    parse_cpu_ns,
    /// Times dispatching paused because file descriptors ran short (see
    /// `crate::descriptors`).
    descriptor_pauses,
    /// URLs whose fetch or parse panicked (a crawler bug): recorded with the panic's
    /// message, counted as failures; the crawl goes on.
    panics,
    /// WARC records written (requests, responses and revisits; not the warcinfo records).
    warc_records,
    /// Bytes of WARC records written (compressed, as on disk).
    warc_bytes,
    /// Payload bytes archived in full (uncompressed, as received): with `warc_bytes`, the
    /// compression ratio.
    warc_payload_bytes,
    /// Responses archived as `revisit` records: their payload was already archived.
    warc_revisits,
    /// Payload bytes not archived again thanks to revisit records.
    warc_bytes_saved,
    /// Responses archived in full whose gzip member is stored, not deflated: payloads
    /// compressed already, `output.warc_gzip_level = 0`, small records, and, with
    /// `output.warc_deflate = "spare-cpu"`, those no spare CPU deflated in time.
    warc_stored,
);

impl PageCounts {
    /// Adds what the archive wrote for one fetch.
    pub(crate) fn add_archive(&mut self, tally: crate::warc::ArchiveTally) {
        self.warc_records += tally.records;
        self.warc_bytes += tally.bytes;
        self.warc_payload_bytes += tally.payload_bytes;
        self.warc_revisits += tally.revisits;
        self.warc_bytes_saved += tally.bytes_saved;
        self.warc_stored += tally.stored;
    }

    /// Counts `n` URLs refused by the scope rules for `reason`.
    pub(crate) fn add_out_of_scope(&mut self, reason: OutOfScope, n: u64) {
        let index = OutOfScope::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(0);
        self.out_of_scope[index] += n;
    }
}

/// In `pages.jsonl`: an object of the counters it moved, by name.
impl Serialize for PageCounts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.moved()))?;
        let mut written = Ok(());
        self.each_moved(|name, n| {
            if written.is_ok() {
                written = map.serialize_entry(name, &n);
            }
        });
        written?;
        map.end()
    }
}

/// Names it does not know (a later crawler's counters) are ignored, as a checkpoint's are.
impl<'de> Deserialize<'de> for PageCounts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, u64>::deserialize(deserializer)?;
        let mut counts = PageCounts::default();
        for (name, value) in &map {
            counts.set(name, *value);
        }
        Ok(counts)
    }
}

impl CrawlCounters {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The value of `counter` now.
    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Fetch failures that make the exit code 1: no usable answer after all retries,
    /// including URLs given up because their host's robots.txt never answered, and URLs
    /// lost to a panic.
    pub(crate) fn failures(&self) -> u64 {
        Self::get(&self.server_errors)
            + Self::get(&self.network_errors)
            + Self::get(&self.robots_unavailable)
            + Self::get(&self.panics)
    }
}

impl CounterValues {
    /// Fetch failures that make the exit code 1 (see [`CrawlCounters::failures`]).
    pub(crate) fn failures(&self) -> u64 {
        self.server_errors + self.network_errors + self.robots_unavailable + self.panics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_round_trip_keeps_every_counter() {
        let counters = CrawlCounters::default();
        CrawlCounters::add(&counters.accepted, 7);
        CrawlCounters::add(&counters.parse_cpu_ns, 11);
        let mut scope = PageCounts::default();
        scope.add_out_of_scope(OutOfScope::ALL[1], 1);
        counters.add_page(&scope);
        let map = counters.to_map();
        assert_eq!(map.get("accepted"), Some(&7));
        assert_eq!(map.get("parse_cpu_ns"), Some(&11));
        let back = CrawlCounters::from_map(&map);
        assert_eq!(back.to_map(), map);
        let values = back.values();
        assert_eq!(values.accepted, 7);
        assert_eq!(
            values.out_of_scope.get(OutOfScope::ALL[1].as_str()),
            Some(&1)
        );
    }

    #[test]
    fn summary_json_names_match_checkpoint_names() {
        let counters = CrawlCounters::default();
        let json = serde_json::to_value(counters.values()).unwrap_or_default();
        let object = json.as_object().cloned().unwrap_or_default();
        for name in counters.to_map().keys() {
            if let Some(reason) = name.strip_prefix("out_of_scope.") {
                assert!(object["out_of_scope"].get(reason).is_some(), "{name}");
            } else {
                assert!(object.contains_key(name), "{name} missing from summary");
            }
        }
    }

    #[test]
    fn page_counts_are_written_by_name_only_when_moved_and_read_back() {
        let mut counts = PageCounts {
            parsed: 1,
            links_found: 27,
            ..PageCounts::default()
        };
        counts.add_out_of_scope(OutOfScope::ALL[0], 2);
        let json = serde_json::to_string(&counts).unwrap_or_default();
        assert_eq!(
            json,
            format!(
                r#"{{"parsed":1,"links_found":27,"out_of_scope.{}":2}}"#,
                OutOfScope::ALL[0].as_str()
            )
        );
        let back: PageCounts = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(back, counts);
        // A later crawler's counter is ignored, as a checkpoint's is.
        let later: PageCounts =
            serde_json::from_str(r#"{"ok":1,"no_such_counter":5}"#).unwrap_or_default();
        assert_eq!(later.ok, 1);
        // Added to the crawl's counters, it moves exactly those.
        let crawl = CrawlCounters::default();
        crawl.add_page(&counts);
        crawl.add_page(&counts);
        let values = crawl.values();
        assert_eq!((values.parsed, values.links_found, values.ok), (2, 54, 0));
        assert_eq!(values.out_of_scope[OutOfScope::ALL[0].as_str()], 4);
    }

    #[test]
    fn unknown_names_are_ignored_and_missing_are_zero() {
        let mut map = BTreeMap::new();
        map.insert("no_such_counter".to_string(), 5);
        map.insert("ok".to_string(), 3);
        let counters = CrawlCounters::from_map(&map);
        assert_eq!(CrawlCounters::get(&counters.ok), 3);
        assert_eq!(CrawlCounters::get(&counters.finished), 0);
    }
}
