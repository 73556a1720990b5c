//! End to end over real HTTP: a small, sequential reference crawler (scraper for links, the
//! crawler's semantics for depth, redirects, retries, robots and nofollow) crawls the small
//! web, and the server's request log must equal the ground truth exactly. This checks the
//! server, the ground truth and their agreement at once, and shows how crawler tests use
//! `GroundTruth::diff_log`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use scraper::{Html, Selector};
use testweb::{max_concurrency, CrawlRules, TestWebServer, Web, WebSpec};
use url::Url;

struct Client {
    reader: BufReader<TcpStream>,
}

struct Reply {
    status: u16,
    content_type: String,
    location: Option<String>,
    body: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        Client {
            reader: BufReader::new(stream),
        }
    }

    fn get(&mut self, url: &Url) -> Reply {
        let host = url.host_str().expect("host");
        let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: reference-crawler\r\n\r\n"
        );
        self.reader
            .get_mut()
            .write_all(request.as_bytes())
            .expect("write");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status code");
        let (mut len, mut content_type, mut location) = (0usize, String::new(), None);
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').expect("header");
            match n.to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().expect("length"),
                "content-type" => content_type = v.trim().to_string(),
                "location" => location = Some(v.trim().to_string()),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body).expect("body");
        Reply {
            status,
            content_type,
            location,
            body,
        }
    }
}

/// RFC 9309 for the `*` group, small and independent of the crate's own.
fn robots_allows(robots: &str, path: &str) -> bool {
    fn matches(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => true,
            Some((b'$', [])) => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|i| matches(rest, &s[i..])),
            Some((c, rest)) => s.first() == Some(c) && matches(rest, &s[1..]),
        }
    }
    let (mut star, mut agents_open, mut best) = (false, false, (0usize, true));
    for line in robots.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "user-agent" {
            star = if agents_open {
                star || v == "*"
            } else {
                v == "*"
            };
            agents_open = true;
            continue;
        }
        agents_open = false;
        if star
            && (k == "allow" || k == "disallow")
            && !v.is_empty()
            && matches(v.as_bytes(), path.as_bytes())
        {
            let allow = k == "allow";
            if v.len() > best.0 || (v.len() == best.0 && allow) {
                best = (v.len(), allow);
            }
        }
    }
    best.1
}

fn extract(page: &Url, body: &[u8]) -> Vec<(Url, bool)> {
    let doc = Html::parse_document(&String::from_utf8_lossy(body));
    let base = doc
        .select(&Selector::parse("base[href]").expect("sel"))
        .next()
        .and_then(|b| b.value().attr("href"))
        .and_then(|h| page.join(h).ok())
        .unwrap_or_else(|| page.clone());
    let sel = Selector::parse("a[href], area[href], frame[src], iframe[src]").expect("sel");
    doc.select(&sel)
        .filter_map(|el| {
            let v = el.value();
            let mut url = base.join(v.attr("href").or_else(|| v.attr("src"))?).ok()?;
            url.set_fragment(None);
            let nofollow = v.attr("rel").is_some_and(|r| {
                r.split_ascii_whitespace()
                    .any(|t| t.eq_ignore_ascii_case("nofollow"))
            });
            (url.scheme() == "http").then_some((url, nofollow))
        })
        .collect()
}

/// A sequential crawl with the crawler's semantics.
fn crawl(addr: SocketAddr, seeds: &[String], rules: &CrawlRules) {
    let mut client = Client::connect(addr);
    let mut seen: HashSet<String> = HashSet::new();
    // Each parsed page's bytes without digits, and each URL's parent (the page that linked it).
    let mut shapes: HashMap<String, Vec<u8>> = HashMap::new();
    let mut parents: HashMap<String, String> = HashMap::new();
    let mut queue: VecDeque<(Url, u32, u32)> = VecDeque::new();
    for s in seeds {
        let url = Url::parse(s).expect("seed");
        if seen.insert(url.to_string()) {
            queue.push_back((url, 0, 0));
        }
    }
    let mut robots: HashMap<String, String> = HashMap::new();
    while let Some((url, depth, hops)) = queue.pop_front() {
        let host = url.host_str().expect("host").to_string();
        if rules.respect_robots {
            let rules_text = robots.entry(host.clone()).or_insert_with(|| {
                let robots_url = url.join("/robots.txt").expect("robots url");
                // A 5xx robots.txt blocks the host until it can be fetched: ask again.
                for _ in 0..5 {
                    let r = client.get(&robots_url);
                    match r.status {
                        200..=299 => return String::from_utf8_lossy(&r.body).into_owned(),
                        500..=599 => continue,
                        _ => return String::new(),
                    }
                }
                "User-agent: *\nDisallow: /\n".to_string()
            });
            let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
            if !robots_allows(rules_text, target) {
                continue;
            }
        }
        let mut reply = client.get(&url);
        for _ in 0..rules.retries {
            if reply.status < 500 && reply.status != 429 {
                break;
            }
            reply = client.get(&url);
        }
        if (300..400).contains(&reply.status) {
            let Some(target) = reply.location.as_deref().and_then(|l| url.join(l).ok()) else {
                continue;
            };
            let mut target = target;
            target.set_fragment(None);
            if hops < rules.max_redirects && seen.insert(target.to_string()) {
                // Same depth: to the front, so the queue stays ordered by depth.
                queue.push_front((target, depth, hops + 1));
            }
            continue;
        }
        let html = reply.content_type.starts_with("text/html")
            || reply.content_type.starts_with("application/xhtml+xml");
        if !(200..300).contains(&reply.status) || !html || depth >= rules.max_depth {
            continue;
        }
        // A page that is its parent (same host) but for its digits is a near-duplicate: its
        // links are not followed (the crawler's trap rule, done the plain way here).
        let digitless: Vec<u8> = reply
            .body
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_digit())
            .collect();
        let like_parent = parents.get(url.as_str()).is_some_and(|parent| {
            Url::parse(parent).is_ok_and(|p| p.host_str() == url.host_str())
                && shapes.get(parent) == Some(&digitless)
        });
        shapes.insert(url.to_string(), digitless);
        if rules.near_duplicates && like_parent {
            continue;
        }
        let cap = (rules.max_body_bytes as usize).min(reply.body.len());
        for (link, nofollow) in extract(&url, &reply.body[..cap]) {
            if (nofollow && !rules.follow_nofollow) || !seen.insert(link.to_string()) {
                continue;
            }
            parents.insert(link.to_string(), url.to_string());
            queue.push_back((link, depth + 1, 0));
        }
    }
}

fn check(spec: WebSpec, rules: CrawlRules) {
    let web = Arc::new(Web::new(spec));
    let server = TestWebServer::start(Arc::clone(&web)).expect("server");
    crawl(server.addr(), &web.seeds(), &rules);
    let log = server.log();
    let truth = web.ground_truth(&web.seeds(), &rules);
    let diff = truth.diff_log(&log);
    assert!(diff.is_empty(), "{diff}");
    assert_eq!(max_concurrency(&log, |_| true), 1, "a sequential crawl");
    let robots_requests = log.iter().filter(|r| r.path == "/robots.txt").count();
    if rules.respect_robots {
        // One per host, plus one retry for the host whose robots.txt answers 503 first.
        assert_eq!(robots_requests, truth.robots_hosts().len() + 1);
    } else {
        assert_eq!(robots_requests, 0);
    }
}

#[test]
fn reference_crawl_matches_the_truth() {
    check(
        WebSpec::small(21),
        CrawlRules {
            max_body_bytes: 64 * 1024,
            ..CrawlRules::default()
        },
    );
}

#[test]
fn reference_crawl_matches_the_truth_under_other_rules() {
    check(
        WebSpec::small(22),
        CrawlRules {
            max_depth: 2,
            follow_nofollow: true,
            retries: 0,
            max_redirects: 2,
            respect_robots: false,
            max_body_bytes: 64 * 1024,
            ..CrawlRules::default()
        },
    );
}

#[test]
fn reference_crawl_with_advanced_variants() {
    let mut spec = WebSpec::small(23);
    spec.features.advanced_variants = true;
    spec.features.slow = false;
    check(
        spec,
        CrawlRules {
            max_body_bytes: 64 * 1024,
            max_depth: 3,
            ..CrawlRules::default()
        },
    );
}
