//! Pages that change, and the validators that let a client ask whether they did: the
//! synthetic web's side of a recrawl (`ETag`, `Last-Modified`, `If-None-Match`,
//! `If-Modified-Since`, `304 Not Modified`).
//!
//! # What changes
//! Only tree pages (home pages included) change; their links never do, only their bytes (a
//! revision comment at the end), so the graph and its ground truth stay what they are. A
//! page's *revision* is the number of changes that picked it so far, from two sources:
//! - **Change events** ([`crate::Web::change_pages`]): each picks a fraction of the tree
//!   pages by a hash of (seed, event number, page): deterministic, so a test knows exactly
//!   which pages changed ([`crate::Web::revision_of`]).
//! - **Change rates** ([`crate::Web::set_change_rates`]): each page falls in a class by
//!   hash (a share of the pages per class) and its revision grows by one every `period` of
//!   its class from the moment the rates were set; a class with no period never changes.
//!   For a continuous recrawl, which should fetch the fast class more often than the still one.
//!
//! # Which hosts validate
//! Real servers vary, so do the hosts: `h3` (or the last host, in a web of fewer than four)
//! sends neither validator; of the others, host `i % 3 == 0` sends both, `1` only `ETag`, `2`
//! only `Last-Modified` ([`Validators::of_host`]). A request whose validator matches the
//! page's current one is answered `304` with no body (RFC 9110 §13.2.2: `If-None-Match`
//! wins over `If-Modified-Since`); the request log records the status, so a test counts
//! 304s there.
//!
//! # Why built this way
//! Nothing per page is stored: revisions are computed from the events' list and the rates'
//! start, as the rest of the web is computed from its seed. `Last-Modified` is the time of
//! the change (to the second, as HTTP dates go), so a page that changes twice within one
//! second looks unchanged to a client that only has the date: the weakness of the real
//! header, kept on purpose.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::graph::{hash4, mix, Node, Page};

/// The `Last-Modified` of every page that never changed: 2026-01-01T00:00:00Z.
const FIRST_PUBLISHED: u64 = 1_767_225_600;

/// Hash tags, so the choices here are independent of the graph's.
const TAG_EVENT: u64 = 0x6368_616e_6765; // "change"
const TAG_CLASS: u64 = 0x7261_7465; // "rate"

/// Which validators a host sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validators {
    pub etag: bool,
    pub last_modified: bool,
}

impl Validators {
    /// The validators of host `host` of `hosts` (see the module doc).
    pub fn of_host(host: u32, hosts: usize) -> Validators {
        let neither = if hosts > 3 {
            3
        } else {
            hosts.saturating_sub(1) as u32
        };
        if host == neither {
            return Validators {
                etag: false,
                last_modified: false,
            };
        }
        Validators {
            etag: host % 3 != 2,
            last_modified: host % 3 != 1,
        }
    }
}

/// One class of pages changing at one rate: `share` of the tree pages, changing every
/// `period` (never, for `None`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChangeRate {
    pub share: f64,
    pub period: Option<Duration>,
}

#[derive(Debug)]
struct Event {
    fraction: f64,
    at: SystemTime,
}

#[derive(Debug)]
struct Rates {
    classes: Vec<ChangeRate>,
    since: SystemTime,
}

/// The web's changes so far (shared by the server and the tests through [`crate::Web`]).
#[derive(Debug, Default)]
pub(crate) struct Freshness {
    events: Mutex<Vec<Event>>,
    rates: Mutex<Option<Rates>>,
}

/// A page's state now: its revision and when it last changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Revision {
    pub(crate) number: u32,
    /// Seconds since the epoch.
    pub(crate) modified: u64,
}

/// `x` as a uniform fraction in [0, 1).
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The tree page a node shows (its variants show the same page), if it is one.
fn tree_page(node: Node) -> Option<u32> {
    match node.page {
        Page::Tree(k) | Page::TreeVariant(k, _) => Some(k),
        _ => None,
    }
}

impl Freshness {
    /// Adds a change event picking `fraction` of the tree pages; returns its number.
    pub(crate) fn change(&self, fraction: f64) -> usize {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events.push(Event {
            fraction: fraction.clamp(0.0, 1.0),
            at: SystemTime::now(),
        });
        events.len() - 1
    }

    pub(crate) fn set_rates(&self, classes: Vec<ChangeRate>) {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        *rates = Some(Rates {
            classes,
            since: SystemTime::now(),
        });
    }

    /// The class (index into the rates given) of a tree page, if rates are set.
    pub(crate) fn class_of(&self, seed: u64, node: Node) -> Option<usize> {
        let k = tree_page(node)?;
        let rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let rates = rates.as_ref()?;
        Some(class_index(&rates.classes, seed, node.host, k))
    }

    /// The revision of `node` now (`None` for pages that never change: not tree pages).
    pub(crate) fn revision(&self, seed: u64, node: Node) -> Option<Revision> {
        let k = tree_page(node)?;
        let mut revision = Revision {
            number: 0,
            modified: FIRST_PUBLISHED + mix(seed ^ u64::from(node.host) ^ u64::from(k)) % 86_400,
        };
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        for (i, event) in events.iter().enumerate() {
            let pick = hash4(
                seed,
                TAG_EVENT ^ i as u64,
                u64::from(node.host),
                u64::from(k),
            );
            if unit(pick) < event.fraction {
                revision.number += 1;
                revision.modified = revision.modified.max(epoch_secs(event.at));
            }
        }
        drop(events);
        let rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rates) = rates.as_ref() {
            let class = class_index(&rates.classes, seed, node.host, k);
            if let Some(period) = rates.classes.get(class).and_then(|c| c.period) {
                let elapsed = SystemTime::now()
                    .duration_since(rates.since)
                    .unwrap_or_default();
                let changes = (elapsed.as_secs_f64() / period.as_secs_f64().max(1e-3)) as u32;
                if changes > 0 {
                    revision.number += changes;
                    let at = rates.since + period.mul_f64(f64::from(changes));
                    revision.modified = revision.modified.max(epoch_secs(at));
                }
            }
        }
        Some(revision)
    }
}

fn class_index(classes: &[ChangeRate], seed: u64, host: u32, k: u32) -> usize {
    let x = unit(hash4(seed, TAG_CLASS, u64::from(host), u64::from(k)));
    let total: f64 = classes.iter().map(|c| c.share.max(0.0)).sum();
    let mut acc = 0.0;
    for (i, class) in classes.iter().enumerate() {
        acc += class.share.max(0.0) / total.max(f64::MIN_POSITIVE);
        if x < acc {
            return i;
        }
    }
    classes.len().saturating_sub(1)
}

/// The `ETag` of a page at a revision: strong, opaque, different for every revision.
pub(crate) fn etag(seed: u64, node: Node, revision: Revision) -> String {
    let k = tree_page(node).unwrap_or(0);
    let h = hash4(
        seed,
        u64::from(revision.number),
        u64::from(node.host),
        u64::from(k),
    );
    format!("\"{h:016x}\"")
}

/// An HTTP date (IMF-fixdate) of seconds since the epoch.
pub(crate) fn http_date(secs: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Whether a request with these conditional headers gets `304` for a page whose current
/// validators are `etag` / `modified` (each `None` when the host does not send it).
pub(crate) fn not_modified(
    if_none_match: Option<&str>,
    if_modified_since: Option<&str>,
    etag: Option<&str>,
    modified: Option<u64>,
) -> bool {
    if let Some(list) = if_none_match {
        // Weak comparison (RFC 9110 §8.8.3.2): `W/` prefixes do not matter here.
        let Some(current) = etag else {
            return false;
        };
        let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
        return list.trim() == "*" || list.split(',').any(|t| bare(t) == bare(current));
    }
    match (
        if_modified_since.and_then(|d| httpdate::parse_http_date(d).ok()),
        modified,
    ) {
        (Some(since), Some(modified)) => modified <= epoch_secs(since),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: u32, k: u32) -> Node {
        Node {
            host,
            page: Page::Tree(k),
        }
    }

    #[test]
    fn one_host_sends_neither_and_the_others_vary() {
        let all: Vec<Validators> = (0..6).map(|h| Validators::of_host(h, 6)).collect();
        let neither = all.iter().filter(|v| !v.etag && !v.last_modified).count();
        assert_eq!(neither, 1);
        assert!(all.iter().any(|v| v.etag && !v.last_modified));
        assert!(all.iter().any(|v| !v.etag && v.last_modified));
        assert!(all.iter().any(|v| v.etag && v.last_modified));
    }

    #[test]
    fn a_change_event_picks_about_its_fraction_and_the_same_pages_each_time() {
        let f = Freshness::default();
        let before: Vec<u32> = (0..10_000)
            .map(|k| f.revision(7, node(k % 5, k)).map_or(0, |r| r.number))
            .collect();
        assert!(before.iter().all(|&r| r == 0));
        f.change(0.1);
        let changed = (0..10_000)
            .filter(|&k| f.revision(7, node(k % 5, k)).is_some_and(|r| r.number == 1))
            .count();
        assert!((900..1100).contains(&changed), "{changed}");
        let again = Freshness::default();
        again.change(0.1);
        for k in 0..1000 {
            assert_eq!(f.revision(7, node(1, k)), again.revision(7, node(1, k)));
        }
    }

    #[test]
    fn conditions_follow_rfc_9110() {
        let date = http_date(FIRST_PUBLISHED + 10);
        assert!(not_modified(Some("\"a\""), None, Some("\"a\""), None));
        assert!(not_modified(
            Some("W/\"a\", \"b\""),
            None,
            Some("\"a\""),
            None
        ));
        assert!(!not_modified(Some("\"a\""), None, Some("\"b\""), None));
        // If-None-Match wins over a matching If-Modified-Since.
        assert!(!not_modified(
            Some("\"a\""),
            Some(&date),
            Some("\"b\""),
            Some(FIRST_PUBLISHED)
        ));
        assert!(not_modified(
            None,
            Some(&date),
            None,
            Some(FIRST_PUBLISHED + 10)
        ));
        assert!(!not_modified(
            None,
            Some(&date),
            None,
            Some(FIRST_PUBLISHED + 11)
        ));
        assert!(!not_modified(None, Some("yesterday"), None, Some(0)));
        assert!(!not_modified(None, None, Some("\"a\""), Some(0)));
    }

    #[test]
    fn rate_classes_split_the_pages_by_share() {
        let classes = vec![
            ChangeRate {
                share: 0.25,
                period: Some(Duration::from_secs(1)),
            },
            ChangeRate {
                share: 0.75,
                period: None,
            },
        ];
        let fast = (0..4000)
            .filter(|&k| class_index(&classes, 7, 0, k) == 0)
            .count();
        assert!((800..1200).contains(&fast), "{fast}");
    }
}
