//! What the crawl benchmarks share: the synthetic web served by a *separate process* (the
//! benchmark's own executable started again with [`SERVE`]), so that the crawler's CPU time
//! and peak RSS are measured alone while both still share the machine's cores; and the
//! figures (rusage, medians).

// Each benchmark includes this file as a module of its own and uses a part of it.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testweb::{Features, ServerOptions, TestWebServer, TlsMode, Web, WebSpec};

/// The first argument that makes a benchmark's executable the server process:
/// `--serve-testweb PORT HOSTS PAGES SEED LINKS_PER_PAGE PAGE_BYTES ENCODINGS LATENCY_MS
/// FEATURES [TLS CA_FILE]` (TLS `off`, `h2` or `http1`; the CA certificate is written to
/// CA_FILE).
pub const SERVE: &str = "--serve-testweb";

/// How the server process answers, besides the web itself.
#[derive(Clone, Copy, Default)]
pub struct Serving {
    pub encodings: bool,
    pub latency_ms: u64,
    /// https (h2 and http/1.1 by ALPN, or http/1.1 only) under a CA made up at start.
    pub tls: TlsMode,
}

pub struct ServerProcess {
    child: Child,
    pub port: u16,
    /// The CA certificate to trust (`network.ca_file`) when serving TLS; the file lives in
    /// the temporary directory and is removed by [`ServerProcess::stop`].
    pub ca_file: Option<PathBuf>,
}

impl ServerProcess {
    /// Starts the server process for `spec` (its features given as testweb's feature list).
    pub fn start(spec: &WebSpec, features: &str, serving: Serving) -> ServerProcess {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let tls = match serving.tls {
            TlsMode::Off => "off",
            TlsMode::H2 => "h2",
            TlsMode::Http1Only => "http1",
        };
        let ca_file = (serving.tls != TlsMode::Off)
            .then(|| std::env::temp_dir().join(format!("bench-testweb-ca-{port}.pem")));
        let child = Command::new(std::env::current_exe().expect("this benchmark's path"))
            // The server keeps the system's allocator whatever the crawler's is
            // (`crawler::allocator`), so that the crawler's allocator, or a run with
            // `CRAWLER_ALLOCATOR=system`, is measured against the same server.
            .env("CRAWLER_ALLOCATOR", "system")
            .arg(SERVE)
            .args(
                [
                    port as u64,
                    spec.hosts as u64,
                    spec.pages as u64,
                    spec.seed,
                    spec.links_per_page as u64,
                    spec.page_bytes as u64,
                    serving.encodings as u64,
                    serving.latency_ms,
                ]
                .map(|n| n.to_string()),
            )
            .arg(features)
            .arg(tls)
            .arg(ca_file.clone().unwrap_or_default())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start testweb");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err()
            || ca_file.as_ref().is_some_and(|f| !f.exists())
        {
            assert!(Instant::now() < deadline, "testweb did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        ServerProcess {
            child,
            port,
            ca_file,
        }
    }

    /// The server process's id (to pin it to cores of its own).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// [`bench_config`] for this server: its port, and its CA trusted when it serves TLS.
    pub fn config(&self, out: &std::path::Path) -> crawler::config::Config {
        let mut config = bench_config(self.port, out);
        config.network.ca_file = self.ca_file.clone();
        config
    }

    /// The seeds of `spec` in this server's scheme.
    pub fn seeds(&self, spec: &WebSpec) -> Vec<url::Url> {
        let mut seeds = seeds(spec);
        if self.ca_file.is_some() {
            for seed in &mut seeds {
                // http -> https is a valid scheme change for the url crate (both special).
                let _ = seed.set_scheme("https");
            }
        }
        seeds
    }

    /// CPU time (user + system) the server process has used so far, from
    /// `/proc/PID/stat`: a benchmark with several server processes reads each one's share
    /// (getrusage's `RUSAGE_CHILDREN` only sums the children already waited for). 0 when
    /// unreadable.
    pub fn cpu_secs(&self) -> f64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) else {
            return 0.0;
        };
        // Fields after the command name (which may hold spaces, so split after its ')'):
        // state is field 3, utime 14 and stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        let ticks = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<f64>().ok());
        // SAFETY: sysconf reads a constant of the system.
        let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        match (ticks(14), ticks(15)) {
            (Some(user), Some(system)) if per_sec > 0.0 => (user + system) / per_sec,
            _ => 0.0,
        }
    }

    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(ca) = &self.ca_file {
            let _ = std::fs::remove_file(ca);
        }
    }
}

/// If this process was started as the server ([`SERVE`] first), serves until killed.
pub fn serve_if_asked() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(SERVE) {
        serve(&args[2..]);
    }
}

fn serve(args: &[String]) -> ! {
    let number = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{SERVE}: argument {i} of {args:?}"))
    };
    let features = args.get(8).map(String::as_str).unwrap_or("none");
    let spec = WebSpec {
        hosts: number(1) as usize,
        pages: number(2) as usize,
        seed: number(3),
        links_per_page: number(4) as usize,
        page_bytes: number(5) as usize,
        features: Features::parse(features).expect("features"),
    };
    let tls = args
        .get(9)
        .map(|t| TlsMode::parse(t).unwrap_or_else(|| panic!("{SERVE}: TLS mode {t:?}")))
        .unwrap_or_default();
    let options = ServerOptions {
        port: number(0) as u16,
        log_requests: false,
        encodings: number(6) == 1,
        latency: Duration::from_millis(number(7)),
        tls,
    };
    let server = TestWebServer::start_with(Arc::new(Web::new(spec)), options).expect("listen");
    if let (Some(pem), Some(path)) = (server.ca_pem(), args.get(10)) {
        // Written whole, then renamed: the parent waits for the file to exist.
        let partial = format!("{path}.partial");
        std::fs::write(&partial, pem).expect("write the CA certificate");
        std::fs::rename(&partial, path).expect("write the CA certificate");
    }
    loop {
        std::thread::park();
    }
}

/// The crawl the benchmarks measure, against the server on `port`, into `out`: politeness
/// off, concurrency 64, depth 16, room for a million URLs.
pub fn bench_config(port: u16, out: &std::path::Path) -> crawler::config::Config {
    let mut config = crawler::config::Config::default();
    config
        .network
        .resolve
        .insert("*.test".into(), format!("127.0.0.1:{port}"));
    config.output.dir = out.to_path_buf();
    config.politeness.enabled = false;
    config.politeness.respect_robots = false;
    config.crawl.concurrency = 64;
    config.crawl.max_urls = crawler::config::Count(1_000_000);
    config.crawl.max_depth = 16;
    config
}

/// The home page of every host of `spec`: the seeds of every benchmark crawl.
pub fn seeds(spec: &WebSpec) -> Vec<url::Url> {
    (0..spec.hosts)
        .map(|h| url::Url::parse(&format!("http://h{h}.test/")).expect("seed"))
        .collect()
}

/// The value after `name` on the bench's command line (`--runs 3`), if given.
pub fn arg_value(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

pub fn rusage(who: i32) -> libc::rusage {
    // SAFETY: getrusage fills the struct we own.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    }
}

pub fn cpu_secs(u: &libc::rusage) -> f64 {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// This process's peak resident set in MB: `VmHWM` of /proc/self/status. Not getrusage's
/// `ru_maxrss`, which Linux carries across `execve`: under `cargo bench` it reports cargo's
/// own ~90 MB when the benchmark stays below that.
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
