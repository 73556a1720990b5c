//! Tests of the frontier through its API: scheduling, politeness, robots.txt, eviction,
//! checkpoints and what is in flight at them.

use std::sync::Arc;

use super::snapshot::HOSTS_FILE;
use super::*;
use crate::robots::{unavailable_backoff, RobotsRules, MAX_UNAVAILABLE_ATTEMPTS};

struct TestFrontier {
    frontier: Frontier,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for TestFrontier {
    type Target = Frontier;
    fn deref(&self) -> &Frontier {
        &self.frontier
    }
}

impl std::ops::DerefMut for TestFrontier {
    fn deref_mut(&mut self) -> &mut Frontier {
        &mut self.frontier
    }
}

fn options(dir: &Path, host_memory: u64) -> FrontierOptions {
    FrontierOptions {
        dir: dir.join("frontier"),
        queue_memory: 1 << 20,
        host_memory,
        robots_agent: "crawler".into(),
    }
}

fn frontier(policy: FrontierPolicy) -> TestFrontier {
    let dir = tempfile::tempdir().unwrap();
    let frontier = Frontier::create(policy, options(dir.path(), 64 << 20)).unwrap();
    TestFrontier {
        frontier,
        _dir: dir,
    }
}

fn policy(rps: f64, burst: u32, conc: u32) -> FrontierPolicy {
    FrontierPolicy::from_config(&PolitenessSection {
        per_host_rps: rps,
        per_host_burst: burst,
        per_host_concurrency: conc,
        respect_robots: false,
        ..PolitenessSection::default()
    })
}

fn fetch(work: Result<Option<Work>, FrontierError>) -> Dispatch {
    match work {
        Ok(Some(Work::Fetch(d))) => d,
        other => panic!("expected a fetch, got {other:?}"),
    }
}

fn nothing(work: Result<Option<Work>, FrontierError>) {
    match work {
        Ok(None) => {}
        other => panic!("expected nothing, got {other:?}"),
    }
}

fn item(url: &str) -> QueuedUrl {
    QueuedUrl::new(url.to_string(), 0, None, 0)
}

fn rules(text: &str) -> RobotsOutcome {
    RobotsOutcome::Rules {
        rules: Arc::new(RobotsRules::parse("crawler", text.as_bytes())),
        body: Some(text.as_bytes().to_vec()),
    }
}

#[test]
fn hosts_take_turns_and_concurrency_is_capped() {
    let mut f = frontier(policy(1000.0, 1000, 1));
    for i in 0..3 {
        f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
    }
    f.push("http://b", item("http://b/0")).unwrap();
    let now = Instant::now();
    let first = fetch(f.pop_ready(now));
    let second = fetch(f.pop_ready(now));
    assert_ne!(first.host, second.host, "b must not wait behind a");
    // Both hosts are at their cap of one in flight.
    nothing(f.pop_ready(now));
    assert_eq!(f.in_flight(), 2);
    f.complete(first);
    let third = fetch(f.pop_ready(Instant::now()));
    assert_eq!(third.item.url, "http://a/1");
}

#[test]
fn rate_limit_delays_the_host() {
    let mut f = frontier(policy(10.0, 1, 100));
    f.push("http://a", item("http://a/0")).unwrap();
    f.push("http://a", item("http://a/1")).unwrap();
    let now = Instant::now();
    fetch(f.pop_ready(now));
    nothing(f.pop_ready(now));
    let next = f.next_ready_at().unwrap();
    let wait = next - now;
    assert!(
        wait > Duration::from_millis(50) && wait <= Duration::from_millis(110),
        "{wait:?}"
    );
}

#[test]
fn retry_goes_first_and_waits() {
    let mut f = frontier(policy(1000.0, 1000, 4));
    f.push("http://a", item("http://a/0")).unwrap();
    f.push("http://a", item("http://a/1")).unwrap();
    let d = fetch(f.pop_ready(Instant::now()));
    f.retry(d, Duration::from_millis(200));
    assert_eq!(f.queued(), 2);
    nothing(f.pop_ready(Instant::now()));
    let later = Instant::now() + Duration::from_millis(250);
    let again = fetch(f.pop_ready(later));
    assert_eq!(again.item.url, "http://a/0");
    assert_eq!(again.item.attempts, 1);
}

#[test]
fn finished_only_when_nothing_queued_or_in_flight() {
    let mut f = frontier(policy(1000.0, 1000, 4));
    assert!(f.is_finished());
    f.push("http://a", item("http://a/0")).unwrap();
    assert!(!f.is_finished());
    let d = fetch(f.pop_ready(Instant::now()));
    assert!(!f.is_finished());
    f.complete(d);
    assert!(f.is_finished());
}

#[test]
fn robots_comes_first_then_gates_each_url() {
    let mut p = policy(1000.0, 1000, 4);
    p.respect_robots = true;
    let mut f = frontier(p);
    f.push("http://a", item("http://a/private/x")).unwrap();
    f.push("http://a", item("http://a/open")).unwrap();
    let now = Instant::now();
    let Ok(Some(Work::Robots(host))) = f.pop_ready(now) else {
        panic!("robots.txt first")
    };
    assert_eq!(host.url, "http://a/robots.txt");
    // Nothing else for the host while its robots.txt is in flight.
    nothing(f.pop_ready(now));
    let given_up = f
        .robots_done(host, rules("User-agent: *\nDisallow: /private/\n"))
        .unwrap();
    assert!(given_up.is_empty());
    match f.pop_ready(Instant::now()) {
        Ok(Some(Work::Disallowed(item))) => assert_eq!(item.url, "http://a/private/x"),
        other => panic!("{other:?}"),
    }
    assert_eq!(fetch(f.pop_ready(Instant::now())).item.url, "http://a/open");
}

#[test]
fn unreachable_robots_blocks_then_gives_up() {
    let mut p = policy(1000.0, 1000, 4);
    p.respect_robots = true;
    let mut f = frontier(p);
    f.push("http://a", item("http://a/1")).unwrap();
    let mut now = Instant::now();
    for attempt in 1..=MAX_UNAVAILABLE_ATTEMPTS {
        let Ok(Some(Work::Robots(host))) = f.pop_ready(now) else {
            panic!("attempt {attempt}: robots.txt again")
        };
        let given_up = f
            .robots_done(
                host,
                RobotsOutcome::Unavailable {
                    reason: "HTTP 503".into(),
                    permanent: false,
                },
            )
            .unwrap();
        // Nothing is fetched from the host meanwhile.
        nothing(f.pop_ready(Instant::now()));
        if attempt < MAX_UNAVAILABLE_ATTEMPTS {
            assert!(given_up.is_empty());
            now = Instant::now() + unavailable_backoff(attempt) + Duration::from_millis(1);
        } else {
            assert_eq!(given_up.len(), 1);
            assert!(f.is_finished());
        }
    }
}

#[test]
fn a_permanently_unusable_robots_txt_gives_the_host_up_at_once() {
    let mut p = policy(1000.0, 1000, 4);
    p.respect_robots = true;
    let mut f = frontier(p);
    f.push("https://a", item("https://a/1")).unwrap();
    f.push("https://a", item("https://a/2")).unwrap();
    let Ok(Some(Work::Robots(host))) = f.pop_ready(Instant::now()) else {
        panic!("robots.txt first")
    };
    let outcome = RobotsOutcome::Unavailable {
        reason: "robots.txt: certificate rejected".into(),
        permanent: true,
    };
    assert!(outcome.give_up_reason().ends_with("not asked again"));
    let given_up = f.robots_done(host, outcome).unwrap();
    assert_eq!(given_up.len(), 2);
    assert!(f.is_finished());
}

#[test]
fn crawl_delay_slows_the_host() {
    let mut p = policy(1000.0, 1000, 4);
    p.respect_robots = true;
    let mut f = frontier(p);
    for i in 0..3 {
        f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
    }
    let Ok(Some(Work::Robots(host))) = f.pop_ready(Instant::now()) else {
        panic!()
    };
    f.robots_done(host, rules("User-agent: *\nCrawl-delay: 2\n"))
        .unwrap();
    let now = Instant::now();
    fetch(f.pop_ready(now));
    nothing(f.pop_ready(now));
    let wait = f.next_ready_at().unwrap() - now;
    assert!(wait > Duration::from_millis(1500), "{wait:?}");
}

/// With room for a handful of hosts, serving 200 hosts in turn evicts idle ones; each
/// comes back with its robots.txt rules (disallow and crawl-delay) from the disk cache,
/// so robots.txt is fetched once per host, never again.
#[test]
fn evicted_hosts_come_back_with_their_rules() {
    let dir = tempfile::tempdir().unwrap();
    // 1e6 requests/s: a host's limiter is full again a microsecond after its request.
    let mut p = policy(1e6, 1, 4);
    p.respect_robots = true;
    let mut f = Frontier::create(p, options(dir.path(), 8 * 1024)).unwrap();
    let hosts = 200;
    for h in 0..hosts {
        for i in 0..3 {
            let key = format!("http://h{h}.test");
            f.push(&key, item(&format!("{key}/private/{i}"))).unwrap();
            f.push(&key, item(&format!("{key}/open/{i}"))).unwrap();
        }
    }
    let body = "User-agent: *\nDisallow: /private/\n";
    let (mut robots, mut fetched, mut disallowed) = (0, 0, 0);
    while !f.is_finished() {
        let now = Instant::now();
        match f.pop_ready(now).unwrap() {
            Some(Work::Robots(host)) => {
                robots += 1;
                f.robots_done(host, rules(body)).unwrap();
            }
            Some(Work::Fetch(d)) => {
                assert!(d.item.url.contains("/open/"), "{}", d.item.url);
                fetched += 1;
                f.complete(d);
            }
            Some(Work::Disallowed(item)) => {
                assert!(item.url.contains("/private/"));
                disallowed += 1;
            }
            Some(other @ Work::Deferred { .. }) => panic!("{other:?}"),
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    assert_eq!(robots, hosts, "robots.txt fetched once per host");
    assert_eq!((fetched, disallowed), (3 * hosts, 3 * hosts));
    let stats = f.stats();
    assert!(stats.evictions > 0, "{stats:?}");
    assert!(stats.restores > hosts as u64, "{stats:?}");
    assert!(stats.resident_bytes <= 8 * 1024 + 1024, "{stats:?}");
}

/// `host_memory` bounds what the resident hosts really hold: the map of their states and the
/// map of their names' budgets, at whatever load those arrays have, not only the structs.
/// (Charging 256 bytes a host, as before, let 1 MiB of budget hold ~3 MiB of arrays.)
#[test]
fn resident_hosts_hold_no_more_than_host_memory() {
    let dir = tempfile::tempdir().unwrap();
    let host_memory = 1 << 20;
    let mut f = Frontier::create(policy(1e6, 1, 4), options(dir.path(), host_memory)).unwrap();
    let hosts = 5000;
    for h in 0..hosts {
        let key = format!("http://h{h}.test");
        f.push(&key, item(&format!("{key}/a"))).unwrap();
    }
    let mut fetched = 0;
    let mut most = 0;
    while !f.is_finished() {
        match f.pop_ready(Instant::now()).unwrap() {
            Some(Work::Fetch(d)) => {
                fetched += 1;
                f.complete(d);
                let held = f.resident.memory_bytes() + f.budgets.memory_bytes();
                assert!(
                    held <= host_memory,
                    "{held} bytes held for {} resident hosts, budget {host_memory}",
                    f.resident.hosts.len()
                );
                most = most.max(f.resident.hosts.len());
            }
            Some(other) => panic!("{other:?}"),
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    assert_eq!(fetched, hosts);
    // The budget is used, not starved: it holds hundreds of hosts.
    assert!(most >= 500, "at most {most} hosts resident");
    assert!(f.stats().evictions > 0, "{:?}", f.stats());
}

/// A checkpoint holds queued and in-flight URLs; resuming it drops what was recorded
/// after it, and what was pushed after it is the caller's to push again.
#[test]
fn resume_restores_the_checkpointed_queues() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(1e6, 1000, 100);
    let mut f = Frontier::create(p.clone(), options(dir.path(), 1 << 20)).unwrap();
    for i in 0..10 {
        f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
        f.push("http://b", item(&format!("http://b/{i}"))).unwrap();
    }
    let now = Instant::now();
    let in_flight = fetch(f.pop_ready(now));
    let done = fetch(f.pop_ready(now));
    let done_url = done.item.url.clone();
    f.complete(done);
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let snapshot = f.begin_checkpoint().unwrap();
    let saved = snapshot.write(&ckpt).unwrap();
    f.finish_checkpoint(&saved).unwrap();
    assert_eq!(saved.queued, 19);
    // After the checkpoint: one more fetched and recorded, one pushed (then lost).
    let recorded = fetch(f.pop_ready(Instant::now()));
    f.push("http://c", item("http://c/0")).unwrap();
    drop(f);

    let hosts = saved.check(&ckpt, &dir.path().join("frontier")).unwrap();
    let mut f = Frontier::resume(
        p,
        options(dir.path(), 1 << 20),
        &saved,
        hosts,
        [url_hash(&recorded.item.url)],
    )
    .unwrap();
    assert_eq!(f.host_total_queued("http://a"), 10);
    let mut urls = Vec::new();
    while let Some(Work::Fetch(d)) = f.pop_ready(Instant::now()).unwrap() {
        urls.push(d.item.url.clone());
        f.complete(d);
    }
    assert!(urls.contains(&in_flight.item.url), "in flight comes back");
    assert!(!urls.contains(&done_url), "done before stays done");
    assert!(
        !urls.contains(&recorded.item.url),
        "recorded after is dropped"
    );
    assert!(!urls.iter().any(|u| u.starts_with("http://c")));
    assert_eq!(urls.len(), 18);
    let unique: HashSet<&String> = urls.iter().collect();
    assert_eq!(unique.len(), 18);
}

#[test]
fn damaged_hosts_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = Frontier::create(policy(10.0, 1, 1), options(dir.path(), 1 << 20)).unwrap();
    f.push("http://a", item("http://a/0")).unwrap();
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let saved = f.begin_checkpoint().unwrap().write(&ckpt).unwrap();
    let path = ckpt.join(HOSTS_FILE);
    let good = std::fs::read(&path).unwrap();
    for at in [0, 9, 20, 33, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&path, &bad).unwrap();
        let e = saved
            .check(&ckpt, &dir.path().join("frontier"))
            .unwrap_err();
        assert!(e.to_string().contains("hosts.bin"), "{e}");
    }
    std::fs::write(&path, &good[..good.len() - 3]).unwrap();
    let e = saved
        .check(&ckpt, &dir.path().join("frontier"))
        .unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    std::fs::write(&path, &good).unwrap();
    saved.check(&ckpt, &dir.path().join("frontier")).unwrap();
}

/// Takes a checkpoint of `f` in `dir/ckpt`, drops `f` (a crash right after) and resumes.
fn checkpoint_and_resume(
    mut f: Frontier,
    dir: &Path,
    p: FrontierPolicy,
) -> (SavedFrontier, Frontier) {
    let ckpt = dir.join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let saved = f.begin_checkpoint().unwrap().write(&ckpt).unwrap();
    f.finish_checkpoint(&saved).unwrap();
    drop(f);
    let hosts = saved.check(&ckpt, &dir.join("frontier")).unwrap();
    let f = Frontier::resume(p, options(dir, 1 << 20), &saved, hosts, []).unwrap();
    (saved, f)
}

/// Every URL the frontier hands out from now on, each completed at once.
fn drain(f: &mut impl FrontierBackend) -> Vec<QueuedUrl> {
    let mut items = Vec::new();
    while let Some(Work::Fetch(d)) = f.pop_ready(Instant::now()).unwrap() {
        items.push(d.item.clone());
        f.complete(d);
    }
    items
}

fn urls(items: &[QueuedUrl]) -> Vec<&str> {
    items.iter().map(|i| i.url.as_str()).collect()
}

/// Popped and neither completed nor retried: the frontier keeps it, and a checkpoint puts it
/// at the head of its host's queue, in the order handed out, before what was still queued.
#[test]
fn in_flight_is_at_the_head_of_its_queue_in_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(1e6, 1000, 2);
    let mut f = Frontier::create(p.clone(), options(dir.path(), 1 << 20)).unwrap();
    for i in 0..4 {
        f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
    }
    f.push("http://b", item("http://b/0")).unwrap();
    let now = Instant::now();
    let mut flying = Vec::new();
    while let Some(work) = f.pop_ready(now).unwrap() {
        let Work::Fetch(d) = work else { panic!() };
        flying.push(d);
    }
    // a/0 and a/1 (a's cap is two) and b/0 are in flight; a/2 and a/3 are queued.
    assert_eq!(f.in_flight(), 3);
    assert_eq!(f.dispatched.len(), 3);
    assert_eq!(f.queued(), 2);
    let (saved, mut f) = checkpoint_and_resume(f, dir.path(), p);
    assert_eq!(saved.queued, 5);
    let mut items = drain(&mut f);
    items.sort_by_key(|i| i.url.starts_with("http://b"));
    assert_eq!(
        urls(&items),
        [
            "http://a/0",
            "http://a/1",
            "http://a/2",
            "http://a/3",
            "http://b/0"
        ]
    );
    assert!(items.iter().all(|i| i.attempts == 0));
    drop(flying);
}

/// Completed: gone from the frontier's keeping and from the checkpoint. Retried: back at
/// the head of its queue once, with its attempt counted, as before.
#[test]
fn completed_and_retried_leave_the_in_flight_set() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(1e6, 1000, 4);
    let mut f = Frontier::create(p.clone(), options(dir.path(), 1 << 20)).unwrap();
    for i in 0..4 {
        f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
    }
    let now = Instant::now();
    let first = fetch(f.pop_ready(now));
    let second = fetch(f.pop_ready(now));
    let third = fetch(f.pop_ready(now));
    assert_eq!(f.dispatched.len(), 3);
    f.complete(first);
    f.retry(second, Duration::ZERO);
    assert_eq!(f.in_flight(), 1);
    assert_eq!(f.dispatched.len(), 1);
    assert_eq!(f.queued(), 2, "the retried one and a/3");
    // Still in flight: a/2, ahead of the retried a/1 and of a/3.
    let (saved, mut f) = checkpoint_and_resume(f, dir.path(), p);
    assert_eq!(saved.queued, 3);
    let items = drain(&mut f);
    assert_eq!(urls(&items), ["http://a/2", "http://a/1", "http://a/3"]);
    assert_eq!(items[1].attempts, 1, "the retry is counted");
    assert!(f.dispatched.is_empty() && f.is_finished());
    drop(third);
}

/// A robots.txt fetch counts as in flight but holds no URL: nothing of it is recorded.
#[test]
fn robots_fetch_in_flight_records_no_url() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = policy(1e6, 1000, 4);
    p.respect_robots = true;
    let mut f = Frontier::create(p.clone(), options(dir.path(), 1 << 20)).unwrap();
    f.push("http://a", item("http://a/0")).unwrap();
    let Ok(Some(Work::Robots(_))) = f.pop_ready(Instant::now()) else {
        panic!("robots.txt first")
    };
    assert_eq!(f.in_flight(), 1);
    assert!(f.dispatched.is_empty());
    let (saved, _f) = checkpoint_and_resume(f, dir.path(), p);
    assert_eq!(saved.queued, 1);
}

/// The promises of [`FrontierBackend`] that hold without a clock: per-host order, each push
/// handed out once, a retried URL first again, in-flight counted until given back.
fn check_backend_promises(f: &mut impl FrontierBackend) {
    for i in 0..5 {
        for h in ["a", "b", "c"] {
            let key = format!("http://{h}");
            f.push(&key, item(&format!("{key}/{i}"))).unwrap();
        }
    }
    let first = fetch(f.pop_ready(Instant::now()));
    assert_eq!(f.in_flight(), 1);
    f.retry(first, Duration::ZERO);
    assert_eq!(f.in_flight(), 0);
    let mut seen: Vec<QueuedUrl> = Vec::new();
    while !f.is_finished() {
        match f.pop_ready(Instant::now()).unwrap() {
            Some(Work::Fetch(d)) => {
                seen.push(d.item.clone());
                f.complete(d);
            }
            Some(other) => panic!("{other:?}"),
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    assert_eq!(seen.len(), 15, "each push once");
    for h in ["a", "b", "c"] {
        let key = format!("http://{h}/");
        let order: Vec<&str> = seen
            .iter()
            .filter(|i| i.url.starts_with(&key))
            .map(|i| i.url.as_str())
            .collect();
        let pushed: Vec<String> = (0..5).map(|i| format!("{key}{i}")).collect();
        assert_eq!(order, pushed, "in push order, the retried one first");
    }
    assert_eq!(seen.iter().filter(|i| i.attempts == 1).count(), 1);
}

#[test]
fn the_disk_frontier_keeps_the_backend_promises() {
    let mut f = frontier(policy(1e6, 1000, 2));
    check_backend_promises(&mut f.frontier);
}

/// A host whose robots.txt stays unreachable gives its queued URLs up to be recorded; one
/// already recorded after the checkpoint resumed from is not given up (recorded) again.
#[test]
fn robots_give_up_after_resume_skips_what_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = policy(1000.0, 1000, 4);
    p.respect_robots = true;
    let mut f = Frontier::create(p.clone(), options(dir.path(), 1 << 20)).unwrap();
    for i in 0..3 {
        f.push("http://a", item(&format!("http://a/{i}"))).unwrap();
    }
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let saved = f.begin_checkpoint().unwrap().write(&ckpt).unwrap();
    f.finish_checkpoint(&saved).unwrap();
    drop(f);
    let hosts = saved.check(&ckpt, &dir.path().join("frontier")).unwrap();
    // http://a/1 was recorded after the checkpoint (its record is in pages.jsonl).
    let mut f = Frontier::resume(
        p,
        options(dir.path(), 1 << 20),
        &saved,
        hosts,
        [url_hash("http://a/1")],
    )
    .unwrap();
    // A resumed host's first request waits one rate period (1 ms here).
    let mut now = Instant::now() + Duration::from_millis(2);
    let mut given_up = Vec::new();
    for attempt in 1..=MAX_UNAVAILABLE_ATTEMPTS {
        let Ok(Some(Work::Robots(fetch))) = f.pop_ready(now) else {
            panic!("attempt {attempt}: robots.txt again")
        };
        let unavailable = RobotsOutcome::Unavailable {
            reason: "HTTP 503".into(),
            permanent: false,
        };
        given_up.extend(f.robots_done(fetch, unavailable).unwrap());
        now = Instant::now() + unavailable_backoff(attempt) + Duration::from_millis(1);
    }
    assert_eq!(urls(&given_up), ["http://a/0", "http://a/2"]);
    assert!(f.is_finished());
}

/// A resumed frontier does not know when each host was last sent a request: every host's
/// first request waits one rate period from the resume.
#[test]
fn a_resumed_host_waits_one_period_before_its_first_request() {
    let dir = tempfile::tempdir().unwrap();
    let p = policy(10.0, 1, 1);
    let mut f = Frontier::create(p.clone(), options(dir.path(), 1 << 20)).unwrap();
    f.push("http://a", item("http://a/0")).unwrap();
    let before = Instant::now();
    let (_, mut f) = checkpoint_and_resume(f, dir.path(), p);
    nothing(f.pop_ready(Instant::now()));
    let at = f.next_ready_at().expect("scheduled");
    assert!(
        at >= before + Duration::from_millis(100),
        "{:?}",
        at - before
    );
    assert_eq!(fetch(f.pop_ready(at)).item.url, "http://a/0");
}

fn robots_work(work: Result<Option<Work>, FrontierError>) -> RobotsFetch {
    match work {
        Ok(Some(Work::Robots(fetch))) => fetch,
        other => panic!("expected a robots.txt request, got {other:?}"),
    }
}

fn redirect(to: &str) -> RobotsOutcome {
    RobotsOutcome::Redirect {
        to: url::Url::parse(to).unwrap(),
    }
}

#[test]
fn a_robots_redirect_on_the_same_host_waits_for_the_hosts_rate() {
    let mut p = policy(20.0, 1, 4);
    p.respect_robots = true;
    let mut f = frontier(p);
    f.push("http://a", item("http://a/page")).unwrap();
    let first = robots_work(f.pop_ready(Instant::now()));
    assert_eq!(
        (first.host, first.via, first.hops),
        (first.host, first.host, 0)
    );
    assert!(f
        .robots_done(first.clone(), redirect("http://a/real/robots.txt"))
        .unwrap()
        .is_empty());
    // The hop is a request to `a`: its token was spent by the first request, so nothing
    // goes out now, and the next time anything may is a rate period later.
    nothing(f.pop_ready(Instant::now()));
    let at = f.next_ready_at().expect("the hop is scheduled");
    assert!(at > Instant::now() + Duration::from_millis(25), "{at:?}");
    std::thread::sleep(at.saturating_duration_since(Instant::now()) + Duration::from_millis(5));
    let hop = robots_work(f.pop_ready(Instant::now()));
    assert_eq!(hop.url, "http://a/real/robots.txt");
    assert_eq!((hop.host, hop.via, hop.hops), (first.host, first.host, 1));
    assert_eq!(f.in_flight(), 1);
    f.robots_done(hop, rules("User-agent: *\nAllow: /\n"))
        .unwrap();
    assert_eq!(f.in_flight(), 0);
}

#[test]
fn a_robots_redirect_to_another_host_is_a_request_under_that_hosts_rate() {
    let mut p = policy(1.0, 1, 4);
    p.respect_robots = true;
    let mut f = frontier(p);
    f.push("http://a", item("http://a/page")).unwrap();
    let first = robots_work(f.pop_ready(Instant::now()));
    f.robots_done(first.clone(), redirect("http://b/robots.txt"))
        .unwrap();
    // `b` has never been requested: its token is there, so the hop goes out at once,
    // charged to `b`; `a`'s pages still wait for their robots.txt.
    let hop = robots_work(f.pop_ready(Instant::now()));
    assert_eq!(hop.url, "http://b/robots.txt");
    assert_eq!(hop.host, first.host);
    assert_eq!(hop.via, host_id("http://b"));
    nothing(f.pop_ready(Instant::now()));
    // A page of `b` queued now must wait for `b`'s next token: the hop spent it.
    f.push("http://b", item("http://b/page")).unwrap();
    f.robots_done(hop, rules("User-agent: *\nDisallow: /page\n"))
        .unwrap();
    // `a`'s rules are in: its page is disallowed, without a request.
    match f.pop_ready(Instant::now()) {
        Ok(Some(Work::Disallowed(item))) => assert_eq!(item.url, "http://a/page"),
        other => panic!("{other:?}"),
    }
    nothing(f.pop_ready(Instant::now()));
    let at = f.next_ready_at().expect("b is scheduled");
    assert!(at > Instant::now() + Duration::from_millis(500), "{at:?}");
}

#[test]
fn robots_redirects_end_at_the_limit_with_everything_allowed() {
    let mut p = policy(1000.0, 1000, 4);
    p.respect_robots = true;
    let mut f = frontier(p);
    f.push("http://a", item("http://a/page")).unwrap();
    let mut fetch = robots_work(f.pop_ready(Instant::now()));
    for hop in 1..=crate::robots::ROBOTS_MAX_REDIRECTS {
        f.robots_done(fetch, redirect(&format!("http://a/r{hop}")))
            .unwrap();
        fetch = robots_work(f.pop_ready(Instant::now()));
        assert_eq!(fetch.hops, hop);
    }
    f.robots_done(fetch, redirect("http://a/one-too-many"))
        .unwrap();
    assert_eq!(fetch_url(f.pop_ready(Instant::now())), "http://a/page");
}

fn fetch_url(work: Result<Option<Work>, FrontierError>) -> String {
    fetch(work).item.url
}

#[test]
fn a_crawl_delay_over_the_limit_defers_the_host_without_requests() {
    let mut p = policy(1.0, 1, 4);
    p.respect_robots = true;
    p.max_crawl_delay = Duration::from_secs(30);
    let mut f = frontier(p);
    for i in 0..3 {
        f.push("http://slow", item(&format!("http://slow/{i}")))
            .unwrap();
    }
    f.push("http://ok", item("http://ok/1")).unwrap();
    let now = Instant::now();
    let first = robots_work(f.pop_ready(now));
    let second = robots_work(f.pop_ready(now));
    let (slow, ok) = if first.url.starts_with("http://slow") {
        (first, second)
    } else {
        (second, first)
    };
    f.robots_done(slow, rules("User-agent: *\nCrawl-delay: 86400\n"))
        .unwrap();
    f.robots_done(ok, rules("User-agent: *\nCrawl-delay: 30\n"))
        .unwrap();
    // Every URL of the slow host comes out at once, deferred, though its rate token was
    // spent by the robots.txt request: deferring sends nothing.
    // (One rate period on: the robots.txt request was charged to the name's rate.)
    let later = Instant::now() + Duration::from_secs(1);
    let mut deferred = Vec::new();
    let mut fetched = Vec::new();
    while let Ok(Some(work)) = f.pop_ready(later) {
        match work {
            Work::Deferred { item, crawl_delay } => {
                assert_eq!(crawl_delay, Duration::from_secs(86400));
                deferred.push(item.url);
            }
            Work::Fetch(d) => fetched.push(d.item.url),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        deferred,
        ["http://slow/0", "http://slow/1", "http://slow/2"]
    );
    // A delay at the limit is honoured, not deferred.
    assert_eq!(fetched, ["http://ok/1"]);
}

fn per_ip_policy(host_rps: f64, host_conc: u32, ip_rps: f64, ip_conc: u32) -> FrontierPolicy {
    FrontierPolicy::from_config(&PolitenessSection {
        per_host_rps: host_rps,
        per_host_burst: 1,
        per_host_concurrency: host_conc,
        per_ip_rps: ip_rps,
        per_ip_concurrency: ip_conc,
        respect_robots: false,
        ..PolitenessSection::default()
    })
}

/// Answers every pending lookup with `ip`, valid for `ttl` from `now`.
fn answer_lookups(f: &mut Frontier, ip: &str, now: Instant, ttl: Duration) -> usize {
    let lookups = f.take_lookups();
    let count = lookups.len();
    for lookup in lookups {
        f.address_resolved(lookup, Ok((ip.parse().unwrap(), now + ttl)));
    }
    count
}

fn drain_at(f: &mut Frontier, now: Instant) -> Vec<Dispatch> {
    let mut out = Vec::new();
    while let Some(work) = f.pop_ready(now).unwrap() {
        match work {
            Work::Fetch(d) => out.push(d),
            other => panic!("{other:?}"),
        }
    }
    out
}

#[test]
fn schemes_and_ports_of_one_name_share_its_budget() {
    let mut f = frontier(policy(1.0, 1, 1));
    for key in ["http://a", "https://a", "http://a:8080"] {
        f.push(key, item(&format!("{key}/1"))).unwrap();
    }
    f.push("http://b", item("http://b/1")).unwrap();
    let now = Instant::now();
    // One request of name `a` (its cap is 1, its rate 1/s) and one of `b`.
    let first = drain_at(&mut f, now);
    let names: Vec<&str> = first.iter().map(|d| d.item.url.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names.iter().filter(|u| u.contains("//a")).count(), 1);
    // Completed, the name's rate still holds the other two for one period each.
    for d in first {
        f.complete(d);
    }
    assert!(drain_at(&mut f, now + Duration::from_millis(500)).is_empty());
    let second = drain_at(&mut f, now + Duration::from_secs(1));
    assert_eq!(second.len(), 1, "{second:?}");
    f.complete(second.into_iter().next().unwrap());
    assert_eq!(drain_at(&mut f, now + Duration::from_secs(2)).len(), 1);
}

#[test]
fn an_address_rate_holds_across_its_names() {
    // 20 names on one address at 10 requests/s, each name allowed 1000/s.
    let mut f = frontier(per_ip_policy(1000.0, 4, 10.0, 100));
    for h in 0..20 {
        for p in 0..3 {
            f.push(&format!("http://h{h}"), item(&format!("http://h{h}/{p}")))
                .unwrap();
        }
    }
    let t0 = Instant::now();
    // Nothing before the addresses are known: every host is parked on its lookup.
    nothing(f.pop_ready(t0));
    assert_eq!(
        answer_lookups(&mut f, "10.0.0.1", t0, Duration::from_secs(3600)),
        20
    );
    let mut sent = Vec::new();
    for step in 0..60u32 {
        let now = t0 + Duration::from_millis(100) * step;
        let got = drain_at(&mut f, now);
        assert!(got.len() <= 1, "{} requests at step {step}", got.len());
        sent.extend(got.into_iter().map(|d| (step, d)));
        // Half-way, in flight or not makes no difference to a rate.
        if step % 2 == 1 {
            for (_, d) in sent.drain(..) {
                f.complete(d);
            }
        }
    }
    assert_eq!(f.queued(), 0, "all 60 sent at 10/s in 6 s");
}

#[test]
fn an_address_cap_parks_hosts_and_each_completion_wakes_one() {
    let mut f = frontier(per_ip_policy(1000.0, 4, 0.0, 2));
    for h in 0..5 {
        f.push(&format!("http://h{h}"), item(&format!("http://h{h}/0")))
            .unwrap();
    }
    let now = Instant::now();
    nothing(f.pop_ready(now));
    answer_lookups(&mut f, "10.0.0.1", now, Duration::from_secs(3600));
    let first = drain_at(&mut f, now);
    assert_eq!(first.len(), 2);
    // Parked, not polled: nothing is scheduled while the cap holds.
    assert_eq!(f.next_ready_at(), None);
    assert!(drain_at(&mut f, now + Duration::from_secs(10)).is_empty());
    let mut in_flight = first;
    let mut done = 0;
    while let Some(d) = in_flight.pop() {
        f.complete(d);
        done += 1;
        let got = drain_at(&mut f, now);
        assert!(
            got.len() <= 1,
            "{} handed out for one completion",
            got.len()
        );
        in_flight.extend(got);
        assert!(f.in_flight() <= 2);
    }
    assert_eq!(done, 5);
    assert!(f.is_finished());
}

#[test]
fn names_on_other_addresses_are_not_held_by_a_busy_one() {
    let mut f = frontier(per_ip_policy(1000.0, 4, 1.0, 1));
    f.push("http://a", item("http://a/0")).unwrap();
    f.push("http://a", item("http://a/1")).unwrap();
    f.push("http://b", item("http://b/0")).unwrap();
    let now = Instant::now();
    nothing(f.pop_ready(now));
    for lookup in f.take_lookups() {
        let ip = if lookup.name == "a" {
            "10.0.0.1"
        } else {
            "10.0.0.2"
        };
        f.address_resolved(
            lookup,
            Ok((ip.parse().unwrap(), now + Duration::from_secs(60))),
        );
    }
    let got = drain_at(&mut f, now);
    let mut urls: Vec<&str> = got.iter().map(|d| d.item.url.as_str()).collect();
    urls.sort();
    assert_eq!(urls, ["http://a/0", "http://b/0"]);
}

#[test]
fn an_expired_address_is_looked_up_again_and_a_failed_one_is_not_budgeted() {
    let mut f = frontier(per_ip_policy(1000.0, 4, 1000.0, 1));
    for p in 0..3 {
        f.push("http://a", item(&format!("http://a/{p}"))).unwrap();
    }
    let t0 = Instant::now();
    nothing(f.pop_ready(t0));
    answer_lookups(&mut f, "10.0.0.1", t0, Duration::from_millis(100));
    let d = fetch(f.pop_ready(t0));
    f.complete(d);
    // Within the TTL: no lookup.
    let d = fetch(f.pop_ready(t0 + Duration::from_millis(50)));
    assert!(f.take_lookups().is_empty());
    f.complete(d);
    // After it: parked on a new lookup, which fails; the host is then served without an
    // address budget (its fetch fails on the same answer and is recorded).
    nothing(f.pop_ready(t0 + Duration::from_millis(150)));
    let lookups = f.take_lookups();
    assert_eq!(lookups.len(), 1);
    assert_eq!(lookups[0].name, "a");
    f.address_resolved(lookups[0].clone(), Err("a: no such name".into()));
    let d = fetch(f.pop_ready(t0 + Duration::from_millis(150)));
    assert_eq!(d.item.url, "http://a/2");
}

#[test]
fn an_ip_literal_needs_no_lookup() {
    let mut f = frontier(per_ip_policy(1000.0, 4, 1000.0, 1));
    f.push("http://10.0.0.9", item("http://10.0.0.9/")).unwrap();
    f.push("http://[fd00::1]:8080", item("http://[fd00::1]:8080/"))
        .unwrap();
    let got = drain_at(&mut f, Instant::now());
    assert_eq!(got.len(), 2);
    assert!(f.take_lookups().is_empty());
}

#[test]
fn an_evicted_host_comes_back_under_its_names_rate() {
    // Room for no idle host: each is evicted as soon as it is idle.
    let dir = tempfile::tempdir().unwrap();
    let mut f = Frontier::create(policy(1.0, 1, 4), options(dir.path(), 1)).unwrap();
    f.push("http://a", item("http://a/0")).unwrap();
    let t0 = Instant::now();
    let d = fetch(f.pop_ready(t0));
    f.complete(d);
    // Another host's restore evicts `a` (idle: nothing in flight, no crawl-delay).
    f.push("http://b", item("http://b/0")).unwrap();
    let d = fetch(f.pop_ready(Instant::now()));
    f.complete(d);
    f.push("http://a", item("http://a/1")).unwrap();
    let evictions = f.stats().evictions;
    assert!(evictions >= 1, "{:?}", f.stats());
    // `a` is restored, but its name's budget outlived it: due one period from its request.
    nothing(f.pop_ready(Instant::now()));
    assert_eq!(f.next_ready_at(), Some(t0 + Duration::from_secs(1)));
    let d = fetch(f.pop_ready(t0 + Duration::from_secs(1)));
    assert_eq!(d.item.url, "http://a/1");
    // Once idle, the lingering budgets go.
    f.complete(d);
    f.evict_if_over_budget(t0 + Duration::from_secs(10));
    assert!(f.budgets.len() <= f.resident.hosts.len());
}

#[test]
fn a_queued_urls_key_is_read_from_its_text_only_where_parsing_gives_the_same() {
    assert_eq!(
        super::plain_key("http://www.site5.example.com/section-1/article-3.html"),
        Some("http://www.site5.example.com")
    );
    assert_eq!(
        super::plain_key("https://a-b.test:8443?x"),
        Some("https://a-b.test:8443")
    );
    assert_eq!(super::plain_key("https://a.test#f"), Some("https://a.test"));
    for url in [
        "http://A.test/",
        "http://a.test./",
        "http://1.2.3/",
        "http://10.0.0.1/",
        "http://0x7f.1/",
        "http://a.test:80/",
        "https://a.test:443/",
        "http://a.test:080/",
        "http://a.test:/",
        "http://a.test:99999/",
        "http://u@a.test/",
        "http://xn--abc.test/",
        "http://a..b/",
        "http://.a/",
        "http://[::1]/",
        "http://a%41.test/",
        "http://a.test\\x",
        "http:///x",
        "ftp://a.test/",
    ] {
        assert_eq!(super::plain_key(url), None, "{url}");
    }
}

proptest::proptest! {
    /// Whatever the text, a key read from it is the parser's.
    #[test]
    fn a_key_read_from_the_text_is_the_parsers(
        url in "https?://[a-zA-Z0-9.:@%_-]{0,14}[/?#\\\\]?[a-z.]{0,3}"
    ) {
        let parsed = super::key_of(&url);
        if let Some(key) = super::plain_key(&url) {
            proptest::prop_assert_eq!(key, parsed.as_str(), "{}", url);
        }
        proptest::prop_assert_eq!(super::queued_key(&url), super::key_of(&url), "{}", url);
    }
}
