//! `testweb`: serve the synthetic web on its own, for trying the crawler by hand.
//!
//! Prints the listening address, the `[network] resolve` line to paste into the crawler's
//! config and the seeds; serves until Ctrl-C; optionally writes the request log as JSON lines.
//! With `--hostile` it also serves the hostile corner (misbehaving hosts, the raw-socket
//! responder and the canary; see the crate doc) and lists those hosts with what each does.
//! With `--tls` it serves https (ALPN `h2` and `http/1.1`; `--tls-http1-only` for
//! `http/1.1` alone) and writes the CA certificate to trust to a file it names (`--ca-out`).
//! `--page-size real` serves pages of real size and shape (see `realsize.rs`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use testweb::{
    ChangeRate, Features, Hostile, RequestRecord, ServerOptions, TestWebServer, TlsMode, Web,
    WebSpec,
};

#[derive(Parser, Debug)]
#[command(about = "Serve the synthetic web used by the crawler's tests and benchmarks")]
struct Args {
    /// Number of virtual hosts (h0.test, h1.test, ...).
    #[arg(long, default_value_t = 50)]
    hosts: usize,
    /// Normal pages over all hosts (special pages come on top).
    #[arg(long, default_value_t = 20_000)]
    pages: usize,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Port on 127.0.0.1 (0 = any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Links per page, duplicates included.
    #[arg(long, default_value_t = 80)]
    links_per_page: usize,
    /// Target page size in bytes.
    #[arg(long, default_value_t = 16 * 1024)]
    page_bytes: usize,
    /// `fixed` (every tree page --page-bytes) or `real`: pages of real size and shape,
    /// log-normal around a median of 150 KB (mean ~240 KB, a tail to 6 MB) with inline
    /// styles, scripts and JSON (the `real_size` feature); serve them with --encodings and
    /// --tls for today's web.
    #[arg(long, default_value = "fixed", value_parser = ["fixed", "real"])]
    page_size: String,
    /// Comma-separated features: all, none, names, -name to remove
    /// (redirects, errors, slow, big, non_html, trap, robots, variants, nofollow, too_slow).
    #[arg(long, default_value = "all")]
    features: String,
    /// Write the seed URLs here, one per line.
    #[arg(long)]
    seeds_out: Option<PathBuf>,
    /// Write the request log here as JSON lines when stopping.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Also serve the hostile corner: NAME.hostile.test and NAME.raw.test hosts that
    /// misbehave on purpose, and a canary listener that nothing may connect to.
    #[arg(long)]
    hostile: bool,
    /// Send bodies gzip- or brotli-coded (when the client offers it) and some chunked, as
    /// real servers do; the pages are the same.
    #[arg(long)]
    encodings: bool,
    /// Milliseconds added before every answer (a distant server's round trip).
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Serve https: a CA made up at start, a certificate per host name, ALPN h2 and
    /// http/1.1 (the client's choice decides); pages link with https.
    #[arg(long)]
    tls: bool,
    /// Like --tls, offering http/1.1 only (a server without HTTP/2).
    #[arg(long)]
    tls_http1_only: bool,
    /// Change this fraction of the tree pages (their bytes, not their links) once, after
    /// --change-after seconds: what a recrawl then finds changed. Use with
    /// --features all,conditional for ETag / Last-Modified and 304 answers.
    #[arg(long, value_name = "FRACTION")]
    change_fraction: Option<f64>,
    /// Seconds to wait before --change-fraction applies (0: at start).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    change_after: u64,
    /// Pages changing at known rates from start, as SHARE:PERIOD_SECS or SHARE:never,
    /// comma-separated (e.g. 0.1:5,0.9:never): each page falls in one class by hash.
    #[arg(long, value_name = "LIST")]
    change_rates: Option<String>,
    /// Where to write the CA certificate (PEM) a crawler must trust, with --tls
    /// (default: testweb-ca-PORT.pem in the temporary directory).
    #[arg(long)]
    ca_out: Option<PathBuf>,
}

/// One request of the log; a tree page's also says its revision and change class when the
/// log is written (the ground truth of a recrawl: which pages changed, how often).
fn record_json(web: &Web, r: &RequestRecord) -> serde_json::Value {
    let url = r.url();
    serde_json::json!({
        "host": r.host,
        "path": r.path,
        "status": r.status,
        "started_us": r.started.as_micros() as u64,
        "finished_us": r.finished.as_micros() as u64,
        "user_agent": r.user_agent,
        "connection": r.connection,
        "version": r.version.as_str(),
        "revision": web.revision_of(&url),
        "change_class": web.change_class_of(&url),
        "conditional": r.header("if-none-match").is_some() || r.header("if-modified-since").is_some(),
    })
}

fn write_log(web: &Web, path: &PathBuf, log: &[RequestRecord]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for r in log {
        writeln!(out, "{}", record_json(web, r))?;
    }
    out.flush()
}

/// `SHARE:PERIOD_SECS` or `SHARE:never`, comma-separated.
fn parse_rates(list: &str) -> Result<Vec<ChangeRate>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let bad = || format!("{item:?} is not SHARE:PERIOD_SECS or SHARE:never");
            let (share, period) = item.split_once(':').ok_or_else(bad)?;
            let share: f64 = share.parse().map_err(|_| bad())?;
            let period = match period {
                "never" => None,
                secs => Some(std::time::Duration::from_secs_f64(
                    secs.parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s > 0.0)
                        .ok_or_else(bad)?,
                )),
            };
            Ok(ChangeRate { share, period })
        })
        .collect()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rates = match args.change_rates.as_deref().map(parse_rates).transpose() {
        Ok(rates) => rates,
        Err(e) => {
            eprintln!("--change-rates: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(f) = args.change_fraction.filter(|f| !(0.0..=1.0).contains(f)) {
        eprintln!("--change-fraction: {f} is not a fraction between 0 and 1");
        return ExitCode::from(2);
    }
    let mut features = match Features::parse(&args.features) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("--features: {e}");
            return ExitCode::from(2);
        }
    };
    features.real_size |= args.page_size == "real";
    let web = Arc::new(Web::new(WebSpec {
        hosts: args.hosts.max(1),
        pages: args.pages,
        seed: args.seed,
        links_per_page: args.links_per_page,
        page_bytes: args.page_bytes,
        features,
    }));
    let scheme = if args.tls || args.tls_http1_only {
        "https"
    } else {
        "http"
    };
    let seeds: Vec<String> = web
        .seeds()
        .into_iter()
        .map(|s| match s.strip_prefix("http://") {
            Some(rest) if scheme == "https" => format!("https://{rest}"),
            _ => s,
        })
        .collect();
    if let Some(path) = &args.seeds_out {
        if let Err(e) = std::fs::write(path, seeds.join("\n") + "\n") {
            eprintln!("{}: cannot write seeds: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    // Without --log nobody reads the log: do not let it grow for the whole run.
    let options = ServerOptions {
        port: args.port,
        log_requests: args.log.is_some(),
        encodings: args.encodings,
        latency: std::time::Duration::from_millis(args.latency_ms),
        tls: if args.tls_http1_only {
            TlsMode::Http1Only
        } else if args.tls {
            TlsMode::H2
        } else {
            TlsMode::Off
        },
    };
    let started = if args.hostile {
        TestWebServer::start_hostile(Arc::clone(&web), options)
    } else {
        TestWebServer::start_with(Arc::clone(&web), options)
    };
    let server = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "127.0.0.1:{}: cannot listen: {e}; choose another --port",
                args.port
            );
            return ExitCode::from(2);
        }
    };
    println!(
        "testweb: serving {} hosts, {} pages (seed {}) on {}://{}",
        web.host_count(),
        args.pages,
        args.seed,
        server.scheme(),
        server.addr()
    );
    if let Some(pem) = server.ca_pem() {
        let path = args.ca_out.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("testweb-ca-{}.pem", server.port()))
        });
        if let Err(e) = std::fs::write(&path, pem) {
            eprintln!("{}: cannot write the CA certificate: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("CA certificate to trust: {}", path.display());
        println!(
            "paste into the crawler's config.toml, [network]: ca_file = {:?}",
            path.display().to_string()
        );
    }
    println!("paste into the crawler's config.toml:");
    let entries: Vec<String> = server
        .resolve_entries()
        .iter()
        .map(|(pattern, addr)| format!("\"{pattern}\" = \"{addr}\""))
        .collect();
    println!("[network]\nresolve = {{ {} }}", entries.join(", "));
    match &args.seeds_out {
        Some(path) => println!("seeds ({}) written to {}", seeds.len(), path.display()),
        None => {
            println!("seeds:");
            for s in &seeds {
                println!("{s}");
            }
        }
    }
    if let Some(canary) = server.canary_addr() {
        println!("hostile hosts (seed, behaviour; what a crawler must do):");
        for h in Hostile::ALL {
            println!(
                "{}\n    {}\n    must: {}",
                h.seed(),
                h.behaviour(),
                h.crawler_must()
            );
        }
        println!("canary (never map it, never seed it; it must see no connection): {canary}");
    }
    if let Some(rates) = rates {
        web.set_change_rates(rates);
    }
    if let Some(fraction) = args.change_fraction {
        let web = Arc::clone(&web);
        let after = std::time::Duration::from_secs(args.change_after);
        std::thread::spawn(move || {
            std::thread::sleep(after);
            web.change_pages(fraction);
            println!("testweb: changed {:.1}% of the pages", fraction * 100.0);
        });
    }
    println!("Ctrl-C to stop");

    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("testweb: cannot start a runtime to wait for Ctrl-C: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = runtime.block_on(tokio::signal::ctrl_c()) {
        eprintln!("testweb: cannot wait for Ctrl-C: {e}");
    }
    let log = server.log();
    let served = server.request_count();
    let cpu = server.cpu_time();
    let canary = server.canary_connections();
    server.shutdown();
    println!(
        "testweb: served {served} requests, server CPU {:.3} s",
        cpu.as_secs_f64()
    );
    if args.hostile {
        println!("testweb: the canary saw {canary} connections");
    }
    if let Some(path) = &args.log {
        if let Err(e) = write_log(&web, path, &log) {
            eprintln!("{}: cannot write the request log: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("request log written to {}", path.display());
    }
    ExitCode::SUCCESS
}
