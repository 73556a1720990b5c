//! Ground truth of the synthetic web checked by hand on tiny webs, feature by feature, and
//! determinism of pages and truth.

use std::collections::BTreeSet;

use testweb::{CrawlRules, Features, PageKind, Web, WebSpec};

fn tiny(hosts: usize, pages: usize, features: Features) -> Web {
    Web::new(WebSpec {
        hosts,
        pages,
        seed: 1,
        links_per_page: 6,
        page_bytes: 512,
        features,
    })
}

fn set(urls: &[&str]) -> BTreeSet<String> {
    urls.iter().map(|s| s.to_string()).collect()
}

#[test]
fn one_host_tree_by_hand() {
    // 4 pages, branching 2: / → /p/1, /p/2; /p/1 → /p/3.
    let web = tiny(1, 4, Features::none());
    let seeds = web.seeds();
    assert_eq!(seeds, vec!["http://h0.test/".to_string()]);
    let all = web.ground_truth(&seeds, &CrawlRules::default());
    assert_eq!(
        all.urls(),
        set(&[
            "http://h0.test/",
            "http://h0.test/p/1",
            "http://h0.test/p/2",
            "http://h0.test/p/3"
        ])
    );
    assert!(all.order_independent());
    let depth = |url: &str| all.get(url).map(|p| p.depth);
    assert_eq!(depth("http://h0.test/"), Some(0));
    assert_eq!(depth("http://h0.test/p/2"), Some(1));
    assert_eq!(depth("http://h0.test/p/3"), Some(2));
    assert!(all
        .pages()
        .all(|p| p.requests == 1 && p.status == Some(200)));

    let rules = |max_depth| CrawlRules {
        max_depth,
        ..CrawlRules::default()
    };
    assert_eq!(
        web.ground_truth(&seeds, &rules(1)).urls(),
        set(&[
            "http://h0.test/",
            "http://h0.test/p/1",
            "http://h0.test/p/2"
        ])
    );
    assert_eq!(
        web.ground_truth(&seeds, &rules(0)).urls(),
        set(&["http://h0.test/"])
    );
    // Any spelling of a seed is the same seed; a seed outside the web is ignored.
    let odd = web.ground_truth(
        &[
            "HTTP://H0.TEST:80/p/./1#x".to_string(),
            "http://elsewhere.test/".to_string(),
        ],
        &rules(1),
    );
    assert_eq!(odd.get("http://h0.test/p/1").map(|p| p.depth), Some(0));
    assert_eq!(odd.get("http://h0.test/p/3").map(|p| p.depth), Some(1));
    assert_eq!(
        odd.get("http://h0.test/").map(|p| p.depth),
        Some(1),
        "every page links home"
    );
    assert!(!odd.order_independent());
}

#[test]
fn redirects_by_hand() {
    // Three hosts of one page each: only home pages plus the redirect pages on h1.
    let web = tiny(
        3,
        3,
        Features {
            redirects: true,
            ..Features::none()
        },
    );
    let truth = web.ground_truth(&web.seeds(), &CrawlRules::default());
    let h1 = |p: &str| format!("http://h1.test{p}");
    let mut expected: BTreeSet<String> = web.seeds().into_iter().collect();
    for p in [
        "/redirect/chain/1",
        "/redirect/chain/2",
        "/redirect/chain/3",
        "/redirect/chain/end",
        "/redirect/chain/end-child",
        "/redirect/loop/a",
        "/redirect/loop/b",
        "/redirect/self",
        "/redirect/offsite",
        "/redirect/to-tree",
    ] {
        expected.insert(h1(p));
    }
    // max_redirects 5: long/0 is the link, long/1..long/5 are hops 1..5, long/6 would be hop 6.
    for n in 0..=5 {
        expected.insert(h1(&format!("/redirect/long/{n}")));
    }
    expected.insert("http://h2.test/redirect/landing".to_string());
    assert_eq!(truth.urls(), expected);

    let page = |url: &str| {
        truth
            .get(url)
            .cloned()
            .unwrap_or_else(|| panic!("{url} missing"))
    };
    let end = page(&h1("/redirect/chain/end"));
    assert_eq!(
        (end.depth, end.redirect_hops, end.status),
        (1, 3, Some(200))
    );
    let child = page(&h1("/redirect/chain/end-child"));
    assert_eq!((child.depth, child.redirect_hops), (2, 0));
    assert_eq!(page(&h1("/redirect/chain/1")).status, Some(301));
    assert_eq!(page(&h1("/redirect/chain/2")).status, Some(302));
    assert_eq!(page(&h1("/redirect/chain/3")).status, Some(307));
    assert_eq!(page(&h1("/redirect/loop/b")).status, Some(308));
    assert_eq!(page(&h1("/redirect/long/5")).redirect_hops, 5);
    assert_eq!(page("http://h2.test/redirect/landing").depth, 1);
    assert_eq!(truth.count(PageKind::Redirect), 3 + 2 + 1 + 1 + 1 + 6);
    assert!(truth.pages().all(|p| p.requests == 1));

    // No redirects followed at all: only the first URL of each chain.
    let none = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            max_redirects: 0,
            ..CrawlRules::default()
        },
    );
    assert!(none.get(&h1("/redirect/chain/2")).is_none());
    assert!(none.get(&h1("/redirect/long/1")).is_none());
    assert!(none.get(&h1("/redirect/chain/1")).is_some());
    // Enough hops for the whole long chain.
    let long = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            max_redirects: 12,
            ..CrawlRules::default()
        },
    );
    assert_eq!(
        long.get(&h1("/redirect/long/end")).map(|p| p.redirect_hops),
        Some(12)
    );
}

#[test]
fn errors_and_retries_by_hand() {
    let web = tiny(
        3,
        3,
        Features {
            errors: true,
            ..Features::none()
        },
    );
    let truth = web.ground_truth(&web.seeds(), &CrawlRules::default());
    let get = |t: &testweb::GroundTruth, p: &str| {
        t.get(&format!("http://h2.test{p}"))
            .map(|e| (e.status, e.requests))
    };
    assert_eq!(get(&truth, "/error/404"), Some((Some(404), 1)));
    assert_eq!(get(&truth, "/error/410"), Some((Some(410), 1)));
    assert_eq!(get(&truth, "/error/500"), Some((Some(500), 3)));
    assert_eq!(get(&truth, "/error/503-then-ok"), Some((Some(200), 2)));
    assert_eq!(get(&truth, "/error/429-then-ok"), Some((Some(200), 2)));
    assert_eq!(
        get(&truth, "/error/503-then-ok/child"),
        Some((Some(200), 1))
    );
    assert_eq!(truth.total_requests(), 3 + 1 + 1 + 3 + 2 + 2 + 1 + 1);

    let no_retry = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            retries: 0,
            ..CrawlRules::default()
        },
    );
    assert_eq!(get(&no_retry, "/error/500"), Some((Some(500), 1)));
    assert_eq!(get(&no_retry, "/error/503-then-ok"), Some((Some(503), 1)));
    assert_eq!(get(&no_retry, "/error/503-then-ok/child"), None);
}

#[test]
fn robots_by_hand() {
    let web = tiny(
        5,
        5,
        Features {
            robots: true,
            ..Features::none()
        },
    );
    let truth = web.ground_truth(&web.seeds(), &CrawlRules::default());
    let private = ["/private/page", "/private/open", "/private/doc.html"];
    let mut disallowed = BTreeSet::new();
    let mut fetched: BTreeSet<String> = web.seeds().into_iter().collect();
    // h0: BadBot group ignored, * disallows /private/. h1: 404. h2: 503 then /private/.
    // h3: Allow /private/open. h4: /private/*.html$ and /private/page.
    for (host, allowed) in [
        (0, vec![]),
        (1, vec![0, 1, 2]),
        (2, vec![]),
        (3, vec![1]),
        (4, vec![1]),
    ] {
        for (i, p) in private.iter().enumerate() {
            let url = format!("http://h{host}.test{p}");
            if allowed.contains(&i) {
                fetched.insert(url);
                let after = [
                    "/after-private/page",
                    "/after-private/open",
                    "/after-private/doc",
                ][i];
                fetched.insert(format!("http://h{host}.test{after}"));
            } else {
                disallowed.insert(url);
            }
        }
    }
    assert_eq!(truth.urls(), fetched);
    assert_eq!(truth.disallowed(), disallowed);
    assert!(truth
        .pages()
        .filter(|p| p.disallowed)
        .all(|p| p.requests == 0 && p.status.is_none()));
    assert_eq!(truth.robots_hosts().len(), 5);

    let ignoring = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            respect_robots: false,
            ..CrawlRules::default()
        },
    );
    assert_eq!(ignoring.urls().len(), 5 + 5 * 6);
    assert!(ignoring.disallowed().is_empty());
}

#[test]
fn nofollow_trap_big_and_files_by_hand() {
    let features = Features {
        nofollow: true,
        trap: true,
        big: true,
        non_html: true,
        ..Features::none()
    };
    let web = tiny(5, 5, features);
    let rules = CrawlRules {
        max_depth: 5,
        ..CrawlRules::default()
    };
    let truth = web.ground_truth(&web.seeds(), &rules);
    let has = |url: &str| truth.get(url).is_some();
    assert!(!has("http://h2.test/nofollow/a"));
    assert!(!has("http://h2.test/nofollow/b"));
    assert!(has("http://h2.test/nofollow/lookalike"));
    // The entry month and its neighbours: the other months are near-duplicates of the
    // entry (the same page but for its digits), whose links are not followed.
    assert_eq!(truth.count(PageKind::Trap), 3);
    assert!(has("http://h1.test/calendar/2026/10"));
    assert!(has("http://h1.test/calendar/2026/12"));
    assert!(!has("http://h1.test/calendar/2027/01"));
    assert_eq!(
        truth
            .get("http://h1.test/calendar/2026/12")
            .map(|p| p.depth),
        Some(2)
    );
    // The big page's tail link lies past the default 10 MiB cap.
    assert!(has("http://h4.test/big/page"));
    assert!(!has("http://h4.test/big/beyond-cap"));
    // Non-HTML bodies are not parsed; XHTML is.
    for f in [
        "/files/image.png",
        "/files/doc.pdf",
        "/files/notes.txt",
        "/files/page.xhtml",
        "/files/xhtml-child",
    ] {
        assert!(has(&format!("http://h0.test{f}")), "{f}");
    }
    assert!(!has("http://h0.test/files/hidden"));

    let follow = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            follow_nofollow: true,
            max_body_bytes: u64::MAX,
            ..rules.clone()
        },
    );
    assert!(follow.get("http://h2.test/nofollow/a").is_some());
    assert!(follow.get("http://h4.test/big/beyond-cap").is_some());
    let deep = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            max_depth: 200,
            ..rules
        },
    );
    // Depth no longer matters to the calendar: it ends at the entry's neighbours.
    assert_eq!(deep.count(PageKind::Trap), 3);
}

#[test]
fn slow_pages_by_hand() {
    let web = tiny(
        5,
        5,
        Features {
            slow: true,
            too_slow: true,
            ..Features::none()
        },
    );
    let rules = CrawlRules {
        timeout: std::time::Duration::from_secs(1),
        ..CrawlRules::default()
    };
    let truth = web.ground_truth(&web.seeds(), &rules);
    let slow = truth.get("http://h3.test/slow/page").cloned();
    assert_eq!(
        slow.map(|p| (p.status, p.requests, p.kind)),
        Some((Some(200), 1, PageKind::Slow))
    );
    assert!(truth.get("http://h3.test/slow/child").is_some());
    let too = truth.get("http://h3.test/slow/too-slow").cloned();
    assert_eq!(too.map(|p| (p.status, p.requests)), Some((None, 3)));
}

#[test]
fn small_web_truth_covers_everything() {
    let web = Web::new(WebSpec::small(11));
    let truth = web.ground_truth(&web.seeds(), &CrawlRules::default());
    // Every tree page is reachable within the default depth.
    let urls = truth.urls();
    for url in web.tree_urls() {
        assert!(urls.contains(&url), "{url}");
    }
    for kind in [
        PageKind::Redirect,
        PageKind::Error,
        PageKind::Flaky,
        PageKind::Slow,
        PageKind::Big,
        PageKind::NonHtml,
        PageKind::Trap,
    ] {
        assert!(truth.count(kind) > 0, "{kind:?}");
    }
    // Decoys and non-HTML-only targets are never reached.
    for p in [
        "/decoy/comment",
        "/decoy/script",
        "/decoy/style",
        "/decoy/textarea",
        "/files/hidden",
    ] {
        assert!(truth.get(&format!("http://h0.test{p}")).is_none(), "{p}");
    }
    // Every page's depth is its layer (the seeds are all home pages).
    for page in truth.pages() {
        assert_eq!(web.layer_of(&page.url), Some(page.depth), "{}", page.url);
    }
}

#[test]
fn same_seed_same_web() {
    let a = Web::new(WebSpec::small(5));
    let b = Web::new(WebSpec::small(5));
    let c = Web::new(WebSpec::small(6));
    let mut differs = 0;
    for url in a.tree_urls() {
        let pa = a.render(&url, 0).expect("page");
        assert_eq!(Some(&pa), b.render(&url, 0).as_ref(), "{url}");
        if c.render(&url, 0).as_ref() != Some(&pa) {
            differs += 1;
        }
    }
    assert!(
        differs > 250,
        "another seed should give another web ({differs} pages differ)"
    );
    let ta = a.ground_truth(&a.seeds(), &CrawlRules::default());
    let tb = b.ground_truth(&b.seeds(), &CrawlRules::default());
    assert_eq!(
        ta.pages().cloned().collect::<Vec<_>>(),
        tb.pages().cloned().collect::<Vec<_>>()
    );
}

#[test]
fn bench_web_is_large_and_shallow() {
    let web = Web::new(WebSpec::bench(1));
    assert!(web.host_count() >= 20);
    let truth = web.ground_truth(&web.seeds(), &CrawlRules::default());
    assert!(truth.urls().len() >= 30_000, "{}", truth.urls().len());
    assert!(truth.max_depth() <= 6);
    let page = web.render("http://h3.test/p/100", 0).expect("page");
    assert!(page.body.len() >= 15 * 1024 && page.body.len() <= 18 * 1024);
    assert_eq!(
        web.links_of("http://h3.test/p/100").map(|l| l.len()),
        Some(80)
    );
}

#[test]
fn advanced_variants_are_urls_of_their_own_unless_fully_normalized() {
    let mut spec = WebSpec::small(2);
    spec.features.advanced_variants = true;
    let web = Web::new(spec);
    let basic = web.ground_truth(&web.seeds(), &CrawlRules::default());
    assert!(
        basic.count(PageKind::Variant) > 50,
        "{}",
        basic.count(PageKind::Variant)
    );
    for page in basic.pages().filter(|p| p.kind == PageKind::Variant) {
        assert_eq!((page.requests, page.status), (1, Some(200)));
        assert_eq!(web.layer_of(&page.url), Some(page.depth));
    }
    assert!(
        basic.get("http://h0.test/p/1?").is_some() || basic.urls().iter().any(|u| u.ends_with('?'))
    );
    let full = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            full_normalization: true,
            ..CrawlRules::default()
        },
    );
    assert_eq!(full.count(PageKind::Variant), 0);
    let urls = full.urls();
    assert!(web.tree_urls().iter().all(|u| urls.contains(u)));
}

#[test]
fn page_level_nofollow_by_hand() {
    let web = tiny(
        5,
        5,
        Features {
            meta_robots: true,
            ..Features::none()
        },
    );
    let obey = web.ground_truth(&web.seeds(), &CrawlRules::default());
    let ignore = web.ground_truth(
        &web.seeds(),
        &CrawlRules {
            follow_nofollow: true,
            ..CrawlRules::default()
        },
    );
    for page in ["/nofollow/meta", "/nofollow/header"] {
        let url = format!("http://h2.test{page}");
        let child = format!("{url}-child");
        assert!(
            obey.get(&url).is_some() && obey.get(&child).is_none(),
            "{page}"
        );
        assert_eq!(ignore.get(&child).map(|p| p.depth), Some(2), "{page}");
    }
}
