//! Ground truth: what a correct crawler fetches from given seeds under given rules.
//!
//! Computed by walking the generated graph with the very functions the server answers with
//! ([`Graph::head`] for statuses and redirects, [`Graph::links`] for links), so the truth can
//! never drift from the web. The walk is a shortest-path search on (depth, redirect hops):
//! a link adds one to the depth, a redirect keeps the depth and adds one hop, exactly as the
//! crawler counts them; a URL beyond `max_depth` or `max_redirects` is not taken on, and
//! the links of a near-duplicate page ([`Graph::near_duplicate`]: a calendar month other
//! than the first) are not followed.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::time::Duration;

use super::graph::{BodyKind, Graph, Node, Page, PageKind, Rel, Special};
use super::render;
use super::robots;

/// The crawler settings the ground truth depends on. `Default` mirrors the crawler's
/// defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrawlRules {
    pub max_depth: u32,
    pub respect_robots: bool,
    /// Follow links marked nofollow: by `rel`, and (with `features.meta_robots`) whole pages
    /// marked by `<meta name="robots">` or `X-Robots-Tag`.
    pub follow_nofollow: bool,
    pub max_redirects: u32,
    /// Extra attempts after a 5xx, 429 or timeout.
    pub retries: u32,
    /// Body cap: links past it (only the big page has any) are not seen.
    pub max_body_bytes: u64,
    /// Request timeout: a page slower than this counts as a timeout (only `/slow/too-slow`).
    pub timeout: Duration,
    /// The crawler's normalization also strips tracking and session parameters and a trailing
    /// `?`, and decodes percent-encoded unreserved characters (its `[normalize]` rules): then
    /// the advanced variants of a page are that page. Off: they are distinct URLs, each
    /// fetched once.
    pub full_normalization: bool,
    /// The crawler stops near-duplicate pages (`crawl.near_duplicates`): the links of a page
    /// its host already served but for its digits are not followed ([`Graph::near_duplicate`]).
    pub near_duplicates: bool,
}

impl Default for CrawlRules {
    fn default() -> Self {
        CrawlRules {
            max_depth: 16,
            respect_robots: true,
            follow_nofollow: false,
            max_redirects: 5,
            retries: 2,
            max_body_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            full_normalization: false,
            near_duplicates: true,
        }
    }
}

/// What the crawler should do with one URL it takes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedPage {
    /// Canonical URL, as `Url::parse(..).to_string()` spells it.
    pub url: String,
    /// Depth at discovery (seeds 0, +1 per link, +0 per redirect).
    pub depth: u32,
    /// Redirect hops that led here (0 unless reached through a redirect).
    pub redirect_hops: u32,
    /// Status of the last answer; `None` when never answered in time, or not requested.
    pub status: Option<u16>,
    /// Requests the crawler must send for it (retries included); 0 when disallowed.
    pub requests: u32,
    pub kind: PageKind,
    /// Discovered but excluded by robots.txt (not requested).
    pub disallowed: bool,
}

/// The expected outcome of a crawl; see [`crate::Web::ground_truth`].
#[derive(Clone, Debug)]
pub struct GroundTruth {
    pages: BTreeMap<String, ExpectedPage>,
    order_independent: bool,
    robots_hosts: BTreeSet<String>,
}

impl GroundTruth {
    /// Every URL the crawler must request (each at least once: see `requests`).
    pub fn urls(&self) -> BTreeSet<String> {
        self.pages
            .values()
            .filter(|p| !p.disallowed)
            .map(|p| p.url.clone())
            .collect()
    }

    /// Every URL taken on: requested ones plus those excluded by robots.txt.
    pub fn discovered(&self) -> BTreeSet<String> {
        self.pages.keys().cloned().collect()
    }

    /// URLs discovered but not to be requested because robots.txt disallows them.
    pub fn disallowed(&self) -> BTreeSet<String> {
        self.pages
            .values()
            .filter(|p| p.disallowed)
            .map(|p| p.url.clone())
            .collect()
    }

    pub fn get(&self, url: &str) -> Option<&ExpectedPage> {
        self.pages.get(url)
    }

    pub fn pages(&self) -> impl Iterator<Item = &ExpectedPage> {
        self.pages.values()
    }

    /// URL → number of requests the server must see for it (disallowed URLs left out).
    pub fn expected_requests(&self) -> BTreeMap<String, u32> {
        self.pages
            .values()
            .filter(|p| !p.disallowed)
            .map(|p| (p.url.clone(), p.requests))
            .collect()
    }

    /// Total page requests (robots.txt excluded).
    pub fn total_requests(&self) -> u64 {
        self.pages.values().map(|p| u64::from(p.requests)).sum()
    }

    /// Number of URLs taken on (requested + disallowed).
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Deepest depth reached.
    pub fn max_depth(&self) -> u32 {
        self.pages.values().map(|p| p.depth).max().unwrap_or(0)
    }

    pub fn count(&self, kind: PageKind) -> usize {
        self.pages.values().filter(|p| p.kind == kind).count()
    }

    /// True when the seeds are exactly all home pages: then every page is first discovered at
    /// its shortest depth whatever order a concurrent crawler works in, so the truth is exact
    /// for any correct crawler. With other seeds it is the strict-BFS answer, which a
    /// concurrent crawler may legitimately miss at the depth limit.
    pub fn order_independent(&self) -> bool {
        self.order_independent
    }

    /// Hosts (`hN.test`) whose robots.txt a robots-respecting crawler must request: every
    /// host with a URL taken on.
    pub fn robots_hosts(&self) -> &BTreeSet<String> {
        &self.robots_hosts
    }
}

/// Simulates the crawler's retries against the server's answers for `node`: returns the
/// final answer (None for a timeout) and the number of requests.
fn simulate(graph: &Graph, node: Node, rules: &CrawlRules) -> (Option<super::graph::Head>, u32) {
    let mut requests = 0;
    let mut last = None;
    for attempt in 0..=rules.retries {
        requests += 1;
        let head = graph.head(node, attempt);
        let timed_out = head.delay.is_some_and(|d| d >= rules.timeout);
        let retryable = timed_out || head.status >= 500 || head.status == 429;
        last = (!timed_out).then_some(head);
        if !retryable {
            break;
        }
    }
    (last, requests)
}

pub fn compute(
    graph: &Graph,
    seeds: &[Node],
    rules: &CrawlRules,
    order_independent: bool,
) -> GroundTruth {
    // best[(node)] = (depth, hops); a heap ordered by (depth, hops) pops each node once at its
    // best state.
    let mut best: HashMap<Node, (u32, u32)> = HashMap::new();
    let mut heap = BinaryHeap::new();
    for &seed in seeds {
        if best.insert(seed, (0, 0)).is_none() {
            heap.push(Reverse((0u32, 0u32, seed)));
        }
    }
    let mut robots_cache: HashMap<u32, Vec<robots::Rule>> = HashMap::new();
    let mut pages = BTreeMap::new();
    let mut robots_hosts = BTreeSet::new();
    let mut links = Vec::new();
    let mut path = String::new();
    while let Some(Reverse((depth, hops, node))) = heap.pop() {
        if best.get(&node) != Some(&(depth, hops)) {
            continue;
        }
        let url = graph.url(node);
        robots_hosts.insert(Graph::host_name(node.host));
        let kind = graph.kind(node);
        path.clear();
        graph.push_path(&mut path, node.page);
        let disallowed = rules.respect_robots
            && !robots::allowed(
                robots_cache
                    .entry(node.host)
                    .or_insert_with(|| robots::rules_for(graph, node.host)),
                &path,
            );
        if disallowed {
            pages.insert(
                url.clone(),
                ExpectedPage {
                    url,
                    depth,
                    redirect_hops: hops,
                    status: None,
                    requests: 0,
                    kind,
                    disallowed,
                },
            );
            continue;
        }
        let (head, requests) = if graph.exists(node) {
            simulate(graph, node, rules)
        } else {
            (None, 1)
        };
        let status = head.as_ref().map(|h| h.status);
        pages.insert(
            url.clone(),
            ExpectedPage {
                url,
                depth,
                redirect_hops: hops,
                status,
                requests,
                kind,
                disallowed,
            },
        );
        let Some(head) = head else { continue };
        let mut relax = |target: Node, state: (u32, u32), heap: &mut BinaryHeap<_>| {
            if best.get(&target).is_none_or(|&b| state < b) {
                best.insert(target, state);
                heap.push(Reverse((state.0, state.1, target)));
            }
        };
        if (300..400).contains(&head.status) {
            if let Some(target) = head.redirect {
                if hops < rules.max_redirects {
                    relax(target, (depth, hops + 1), &mut heap);
                }
            }
            continue;
        }
        let is_html = head.content_type.starts_with("text/html")
            || head.content_type.starts_with("application/xhtml+xml");
        let page_nofollow = graph.page_nofollow(node) && !rules.follow_nofollow;
        if !(200..300).contains(&head.status)
            || !is_html
            || depth >= rules.max_depth
            || page_nofollow
            || (rules.near_duplicates && graph.near_duplicate(node))
        {
            continue;
        }
        links.clear();
        graph.links(node, &mut links);
        for link in &links {
            if link.rel == Rel::Nofollow && !rules.follow_nofollow {
                continue;
            }
            if head.body == BodyKind::Big
                && link.target.page == Page::Special(Special::BeyondCap)
                && rules.max_body_bytes
                    < render::big_tail_link_end(node.host, super::graph::BIG_PAGE_BYTES)
            {
                continue;
            }
            let target = if rules.full_normalization {
                graph.content_node(link.target)
            } else {
                link.target
            };
            relax(target, (depth + 1, 0), &mut heap);
        }
    }
    GroundTruth {
        pages,
        order_independent,
        robots_hosts,
    }
}

/// How a server request log differs from the ground truth (robots.txt requests left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogDiff {
    /// Expected URLs never requested.
    pub missing: Vec<String>,
    /// URLs requested that the truth does not expect at all (disallowed ones included).
    pub unexpected: Vec<String>,
    /// (URL, expected requests, actual requests) where both are > 0 but differ.
    pub wrong_count: Vec<(String, u32, u32)>,
}

impl LogDiff {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty() && self.wrong_count.is_empty()
    }
}

impl std::fmt::Display for LogDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOW: usize = 20;
        write!(
            f,
            "{} missing, {} unexpected, {} with a wrong request count",
            self.missing.len(),
            self.unexpected.len(),
            self.wrong_count.len()
        )?;
        for url in self.missing.iter().take(SHOW) {
            write!(f, "\n  missing    {url}")?;
        }
        for url in self.unexpected.iter().take(SHOW) {
            write!(f, "\n  unexpected {url}")?;
        }
        for (url, want, got) in self.wrong_count.iter().take(SHOW) {
            write!(f, "\n  requested {got}× (expected {want}×) {url}")?;
        }
        Ok(())
    }
}

/// URL (`http://{host}{path}`) → number of requests in a log, robots.txt left out.
pub fn requests_per_url(log: &[super::RequestRecord]) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    for record in log.iter().filter(|r| r.path != "/robots.txt") {
        *counts.entry(record.url()).or_insert(0) += 1;
    }
    counts
}

impl GroundTruth {
    /// Compares a server log with the truth: every expected URL requested exactly its
    /// expected number of times, nothing else requested. `assert!(d.is_empty(), "{d}")`.
    pub fn diff_log(&self, log: &[super::RequestRecord]) -> LogDiff {
        let actual = requests_per_url(log);
        let expected = self.expected_requests();
        let mut diff = LogDiff::default();
        for (url, &want) in &expected {
            match actual.get(url) {
                None => diff.missing.push(url.clone()),
                Some(&got) if got != want => diff.wrong_count.push((url.clone(), want, got)),
                Some(_) => {}
            }
        }
        diff.unexpected = actual
            .keys()
            .filter(|url| !expected.contains_key(*url))
            .cloned()
            .collect();
        diff
    }
}

/// The largest number of requests in progress at once in `log`, counting only requests for
/// which `include` is true (for example one host's). Server-side intervals lie inside the
/// client's, so this never exceeds the client's true concurrency.
pub fn max_concurrency(
    log: &[super::RequestRecord],
    include: impl Fn(&super::RequestRecord) -> bool,
) -> usize {
    let mut events: Vec<(std::time::Duration, i32)> = Vec::new();
    for r in log.iter().filter(|r| include(r)) {
        events.push((r.started, 1));
        events.push((r.finished, -1));
    }
    // At equal times an end comes before a start: back-to-back requests do not overlap.
    events.sort();
    let mut now = 0i32;
    let mut max = 0i32;
    for (_, delta) in events {
        now += delta;
        max = max.max(now);
    }
    max as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Rng;
    use crate::{Features, WebSpec};

    /// A crawl that takes its frontier in random order (the worst a concurrent crawler can
    /// do) and keeps the depth of first discovery, like the crawler's seen-set.
    fn random_order_crawl(
        graph: &Graph,
        seeds: &[Node],
        rules: &CrawlRules,
        order_seed: u64,
    ) -> BTreeMap<String, u32> {
        let mut rng = Rng::new(order_seed);
        let mut seen: HashMap<Node, u32> = HashMap::new();
        let mut frontier: Vec<(Node, u32, u32)> = Vec::new();
        for &s in seeds {
            if seen.insert(s, 0).is_none() {
                frontier.push((s, 0, 0));
            }
        }
        let mut links = Vec::new();
        while !frontier.is_empty() {
            let at = rng.below(frontier.len() as u64) as usize;
            let (node, depth, hops) = frontier.swap_remove(at);
            let (head, _) = simulate(graph, node, rules);
            let Some(head) = head else { continue };
            if let Some(target) = head.redirect.filter(|_| (300..400).contains(&head.status)) {
                if hops < rules.max_redirects {
                    if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(target) {
                        e.insert(depth);
                        frontier.push((target, depth, hops + 1));
                    }
                }
                continue;
            }
            if head.status != 200
                || depth >= rules.max_depth
                || graph.page_nofollow(node)
                || (rules.near_duplicates && graph.near_duplicate(node))
            {
                continue;
            }
            links.clear();
            graph.links(node, &mut links);
            for link in &links {
                if link.rel == Rel::Nofollow
                    || link.target.page == Page::Special(Special::BeyondCap)
                {
                    continue;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(link.target) {
                    e.insert(depth + 1);
                    frontier.push((link.target, depth + 1, 0));
                }
            }
        }
        seen.into_iter().map(|(n, d)| (graph.url(n), d)).collect()
    }

    #[test]
    fn any_crawl_order_finds_the_truth_with_home_seeds() {
        let mut spec = WebSpec::small(31);
        spec.features = Features {
            robots: false,
            advanced_variants: true,
            meta_robots: true,
            ..Features::all()
        };
        for (spec, max_depth) in [
            (spec.clone(), 3),
            (spec, 16),
            (
                WebSpec {
                    hosts: 7,
                    pages: 2_000,
                    ..WebSpec::small(32)
                },
                3,
            ),
        ] {
            let graph = Graph::new(spec);
            let seeds: Vec<Node> = (0..graph.hosts()).map(Node::home).collect();
            let rules = CrawlRules {
                max_depth,
                respect_robots: false,
                ..CrawlRules::default()
            };
            let truth = compute(&graph, &seeds, &rules, true);
            let expected: BTreeMap<String, u32> =
                truth.pages().map(|p| (p.url.clone(), p.depth)).collect();
            for order in 0..8 {
                let got = random_order_crawl(&graph, &seeds, &rules, order);
                assert_eq!(got, expected, "order {order}, max_depth {max_depth}");
            }
        }
    }
}
