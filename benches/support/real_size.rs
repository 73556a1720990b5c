//! `cargo bench --bench crawl -- --real-size`: the crawl of pages of real size and shape
//! (testweb's `real_size`: log-normal sizes, mean ~240 KB, inline styles, scripts and JSON)
//! served gzip or br (or identity, a third of them, as `encodings` picks by content) over
//! https with HTTP/2, in a server process of its own. What it prints is what the issue's
//! goal is stated in: crawler CPU per page, user and sys apart (≤ 1 ms is the goal), pages/s,
//! decoded MB/s, and the same with the archive on (`output.warc`), interleaved within each
//! run so that the archive's cost is a ratio measured side by side; peak RSS at the end.

use super::testweb_process::{median, rusage, ServerProcess, Serving};
use super::{crawl_once, Run, FEATURES};
use testweb::{TlsMode, WebSpec};

/// One crawl's figures with its user and system CPU apart (rusage of this process around
/// the crawl, runtime start and stop included).
struct Measured {
    run: Run,
    user: f64,
    sys: f64,
}

fn measure(spec: &WebSpec, server: &ServerProcess, warc: bool) -> Measured {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let before = rusage(libc::RUSAGE_SELF);
    let run = crawl_once(spec, server, warc);
    let after = rusage(libc::RUSAGE_SELF);
    Measured {
        run,
        user: secs(after.ru_utime) - secs(before.ru_utime),
        sys: secs(after.ru_stime) - secs(before.ru_stime),
    }
}

pub(crate) fn real_size(runs: usize) {
    let spec = WebSpec::real_size(7);
    println!(
        "crawl benchmark, pages of real size (--real-size): {} hosts, {} pages of log-normal size (mean ~240 KB) with {} links, https h2, gzip/br, politeness off, concurrency 64, {} runs",
        spec.hosts, spec.pages, spec.links_per_page, runs
    );
    let server = ServerProcess::start(
        &spec,
        &format!("{FEATURES},real_size"),
        Serving {
            encodings: true,
            latency_ms: 0,
            tls: TlsMode::H2,
        },
    );
    // Warm-up: connection set-up paths, allocator, and the server's first renderings.
    let _ = crawl_once(&spec, &server, false);
    let mut tables: [Vec<Measured>; 2] = [Vec::new(), Vec::new()];
    let mut server_cpu: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for i in 0..runs {
        for (warc, table) in tables.iter_mut().enumerate() {
            let server_before = server.cpu_secs();
            let m = measure(&spec, &server, warc == 1);
            let pages = m.run.pages as f64;
            server_cpu[warc].push((server.cpu_secs() - server_before) / pages * 1000.0);
            println!(
                "run {i} {}: {} pages in {:.2} s = {:.0} pages/s, crawler CPU {:.3} ms/page (user {:.3}, sys {:.3}; fetch {:.3}, parse {:.3}, dispatch {:.3}), {:.0} MB/s decoded{}",
                if warc == 1 { "jsonl+warc" } else { "jsonl     " },
                m.run.pages,
                m.run.secs,
                pages / m.run.secs,
                m.run.cpu / pages * 1000.0,
                m.user / pages * 1000.0,
                m.sys / pages * 1000.0,
                m.run.fetch_cpu / pages * 1000.0,
                m.run.parse_cpu / pages * 1000.0,
                m.run.dispatch_cpu / pages * 1000.0,
                m.run.bytes as f64 / m.run.secs / 1e6,
                if warc == 1 {
                    format!(
                        ", WARC {:.1} MB for {:.1} MB of payload as sent",
                        m.run.warc_bytes as f64 / 1e6,
                        m.run.warc_payload as f64 / 1e6
                    )
                } else {
                    String::new()
                }
            );
            table.push(m);
        }
    }
    server.stop();
    let mut rate = [0.0; 2];
    for (warc, table) in tables.iter().enumerate() {
        let per_page = |f: &dyn Fn(&Measured) -> f64| {
            median(
                table
                    .iter()
                    .map(|m| f(m) / m.run.pages as f64 * 1000.0)
                    .collect(),
            )
        };
        rate[warc] = median(
            table
                .iter()
                .map(|m| m.run.pages as f64 / m.run.secs)
                .collect(),
        );
        println!(
            "--- medians over {runs} runs, {} ---",
            if warc == 1 {
                "pages.jsonl and WARC"
            } else {
                "pages.jsonl only"
            }
        );
        println!(
            "pages/s {:.0}; crawler CPU {:.3} ms/page (user {:.3}, sys {:.3}; fetch {:.3}, parse {:.3}, dispatch {:.3}); mean page {:.0} KB decoded; server {:.3} ms/page",
            rate[warc],
            per_page(&|m| m.run.cpu),
            per_page(&|m| m.user),
            per_page(&|m| m.sys),
            per_page(&|m| m.run.fetch_cpu),
            per_page(&|m| m.run.parse_cpu),
            per_page(&|m| m.run.dispatch_cpu),
            median(
                table
                    .iter()
                    .map(|m| m.run.bytes as f64 / m.run.pages as f64 / 1e3)
                    .collect()
            ),
            median(server_cpu[warc].clone()),
        );
        if warc == 1 {
            println!(
                "WARC bytes per run {:.1} MB for {:.1} MB of payload as sent ({:.2}:1)",
                median(
                    table
                        .iter()
                        .map(|m| m.run.warc_bytes as f64 / 1e6)
                        .collect()
                ),
                median(
                    table
                        .iter()
                        .map(|m| m.run.warc_payload as f64 / 1e6)
                        .collect()
                ),
                median(
                    table
                        .iter()
                        .map(|m| m.run.warc_payload as f64 / m.run.warc_bytes.max(1) as f64)
                        .collect()
                ),
            );
        }
    }
    println!("WARC on / off, pages/s: {:.2}", rate[1] / rate[0]);
    println!(
        "crawler peak RSS: {:.1} MB",
        super::testweb_process::peak_rss_mb()
    );
}
