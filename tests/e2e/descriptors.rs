//! A crawl of many hosts in a process with few file descriptors: it waits for descriptors
//! (closing idle keep-alive connections) instead of failing fetches or dying. The crawler
//! runs with its open-files limit lowered to 256, soft and hard, so it cannot raise it.
//! The same crawl over https (`tls.rs` runs it) shows that the client rebuilt to close
//! idle connections still trusts the configured CA, and the same crawl by one process of a
//! distributed crawl (on a `redis-server` of the test's own) shows that the budget holds in
//! that mode too (a distributed process once had none, and failed its fetches instead).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testweb::{Features, ServerOptions, TestWebServer, TlsMode, Web, WebSpec};

#[test]
fn many_hosts_with_few_descriptors_finish_without_failures() {
    let _load = crate::support::ordinary();
    many_hosts_with_few_descriptors(TlsMode::Off);
}

#[test]
fn a_distributed_process_with_few_descriptors_pauses_instead_of_failing() {
    let _load = crate::support::ordinary();
    let redis = crate::distributed::RedisServer::start(false);
    crawl_with_few_descriptors(TlsMode::Off, Some(&redis.url()));
}

/// The crawl of 1,500 hosts with 256 descriptors, over plain http or https (`tls`).
pub(crate) fn many_hosts_with_few_descriptors(tls: TlsMode) {
    crawl_with_few_descriptors(tls, None);
}

/// The same, as one process of a distributed crawl when `redis` is given (its crawl-wide
/// `summary.json` then has the same figures).
fn crawl_with_few_descriptors(tls: TlsMode, redis: Option<&str>) {
    let hosts = 1500;
    let web = Arc::new(Web::new(WebSpec {
        hosts,
        pages: hosts * 2,
        seed: 5,
        links_per_page: 4,
        page_bytes: 512,
        features: Features::none(),
    }));
    let server = TestWebServer::start_with(
        web.clone(),
        ServerOptions {
            tls,
            ..ServerOptions::default()
        },
    )
    .unwrap();
    let (pattern, addr) = server.resolve_entry();
    let dir = tempfile::tempdir().unwrap();
    let seeds: Vec<String> = web.seeds().iter().map(|s| server.url_for(s)).collect();
    std::fs::write(dir.path().join("seeds.txt"), seeds.join("\n")).unwrap();
    let resolve = format!("network.resolve.\"{pattern}\"={addr}");
    let mut trust = Vec::new();
    if let Some(pem) = server.ca_pem() {
        std::fs::write(dir.path().join("ca.pem"), pem).unwrap();
        trust.extend(["--set".to_string(), "network.ca_file=ca.pem".to_string()]);
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_crawler"));
    if let Some(url) = redis {
        command.args(["--redis", url, "--crawl-id", "few-descriptors"]);
    }
    command
        .args(["--seeds", "seeds.txt", "--max-urls", "1e5", "--out", "out"])
        .args([
            "--progress",
            "quiet",
            "--concurrency",
            "128",
            "--set",
            &resolve,
        ])
        .args(["--set", "politeness.respect_robots=false"])
        .args(["--set", "crawl.retries=0"])
        .args(&trust)
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("the crawl did not end within 180 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json"))
            .unwrap_or_else(|e| panic!("no summary ({e}): {stderr}")),
    )
    .unwrap();
    eprintln!(
        "{} hosts over {}, 256 descriptors: {} pages in {:.1} s, {} pauses, {} network errors",
        hosts,
        server.scheme(),
        summary["finished"],
        started.elapsed().as_secs_f64(),
        summary["descriptor_pauses"],
        summary["network_errors"]
    );
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(summary["network_errors"], 0);
    assert_eq!(summary["finished"], summary["accepted"]);
    assert!(summary["finished"].as_u64().unwrap() >= hosts as u64);
    assert!(
        summary["descriptor_pauses"].as_u64().unwrap() >= 1,
        "the budget was reached"
    );
}
