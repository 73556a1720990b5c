//! The `crawler` command: parses the command line, loads the configuration, runs the
//! crawl (or a helper subcommand) and maps the outcome to an exit code:
//! 0 finished (or stopped cleanly), 1 finished with fetch failures, 2 usage or fatal error.
//! Everything else lives in the library.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use crawler::config::{Config, Flag};
use crawler::crawl::ProgressMode;
use crawler::output_lock::{DirectoryLock, Holding};
use crawler::quantity::{parse_byte_size, parse_count};
use crawler::{run_crawl, CrawlRequest, ShutdownHandle};

/// A web crawler built around a concurrent Bloom-filter URL-seen set.
///
/// Crawls from a seed list, fetching each URL at most once, politely per host, and
/// writes one JSON record per URL to OUT/pages.jsonl and a summary to OUT/summary.json.
#[derive(Parser, Debug)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    crawl: CrawlArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the seen-set (Bloom filter) the crawler would build for a crawl size, with
    /// the memory/false-positive trade-off, before writing config.toml.
    Plan(PlanArgs),
    /// Print the canonical form of each URL (arguments, or stdin lines), or why it is
    /// rejected: the form the seen-set deduplicates on.
    Normalize {
        /// URLs to normalize; reads one per line from stdin when none are given.
        urls: Vec<String>,
        /// Configuration file whose [normalize] rules apply.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override a config key, e.g. --set normalize.sort_query=true (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Crawl the built-in synthetic web (many virtual hosts on one loopback port): a
    /// complete offline demo and a quick check that everything works.
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
    /// Write a CDXJ index (FILE.cdxj, what pywb replays from) of each WARC file the crawl
    /// wrote under OUT/warc/.
    Index {
        /// `.warc.gz` files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Show a distributed crawl's state in Redis: running, stopped or finished, counters
    /// summed over its processes, queue and lease sizes, processes.
    Status {
        /// The Redis the crawl runs on, e.g. redis://127.0.0.1:6379/0 (default:
        /// distributed.redis of --config, which keeps a password off the command line).
        #[arg(long, value_name = "URL")]
        redis: Option<String>,
        /// The crawl's id (default: distributed.crawl_id of --config).
        #[arg(long, value_name = "ID")]
        crawl_id: Option<String>,
        /// Print the crawl-wide summary as JSON (what `OUT/summary.json` holds once the
        /// crawl is over).
        #[arg(long)]
        json: bool,
        /// Configuration file: its [distributed] redis and crawl_id, and the network.ca_file
        /// trusted for a rediss:// URL.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override a config key, e.g. --set network.ca_file=ca.pem (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Fetch the next generation of the crawl in --out DIR: every URL it recorded that is
    /// due (recrawl.min_interval; "0s": all), asked with its validators (a 304 is archived as
    /// a revisit), new links taken on as in a crawl; URLs gone (404/410) in two generations
    /// in a row are retired. Run it again after a crash or a stop to go on with the
    /// interrupted generation.
    Recrawl(RecrawlArgs),
    /// Print the effective configuration (defaults, --config file, --set overrides).
    Config {
        /// Configuration file (TOML).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override a config key, e.g. --set crawl.max_depth=5 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Say whether a robots.txt file lets USER_AGENT fetch each URL, and which rule (by
    /// its line in FILE) decides, as a crawl would. Exit 0 if all are allowed, 1 if any is
    /// not (the convention of Google's robots_main), 2 on bad input.
    Robots {
        /// The robots.txt file.
        file: PathBuf,
        /// The user agent, e.g. FooBot or "crawler/0.1 (+https://…)": its product token
        /// (up to the first '/' or space) is matched, as in a crawl.
        user_agent: String,
        /// Absolute URLs to check.
        #[arg(required = true)]
        urls: Vec<String>,
    },
}

#[derive(Args, Debug)]
struct PlanArgs {
    /// Number of URLs the crawl will take on (1e8, 100000000, 100_000_000, 100M).
    #[arg(long, value_name = "N", value_parser = parse_count_arg)]
    max_urls: u64,
    /// Target false-positive probability, e.g. 0.001.
    #[arg(
        long,
        value_name = "P",
        conflicts_with = "memory",
        required_unless_present = "memory"
    )]
    fpp: Option<f64>,
    /// Memory budget for the filter, e.g. 256MiB or 1GiB.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    memory: Option<u64>,
}

#[cfg(feature = "demo")]
#[derive(Args, Debug)]
struct DemoArgs {
    /// Virtual hosts in the synthetic web.
    #[arg(long, default_value_t = 20)]
    hosts: usize,
    /// Pages in the synthetic web (special pages come on top).
    #[arg(long, default_value_t = 5000)]
    pages: usize,
    /// Generator seed: the same seed gives the same web.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Output directory; an earlier demo's output there is replaced.
    #[arg(long, default_value = "demo-out")]
    out: PathBuf,
    /// Configuration file (TOML); the demo adds the resolve rule for *.test.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve live figures on this address: /metrics (Prometheus), /status.json and a
    /// status page at / (overrides monitor.listen), e.g. 127.0.0.1:9187.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Override any config key (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Progress display: auto, lines or quiet.
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "lines", "quiet"])]
    progress: String,
}

#[derive(Args, Debug)]
struct RecrawlArgs {
    /// The crawl's output directory (overrides output.dir).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Keep going: fetch each URL again whenever its adaptive interval (between
    /// recrawl.min_interval and max_interval) has passed, until stopped (Ctrl-C, SIGTERM,
    /// crawl.max_duration); resumable like a crawl.
    #[arg(long)]
    continuous: bool,
    /// Most URLs this generation takes on, the due ones first (default: the crawl's).
    #[arg(long, value_name = "N", value_parser = parse_count_arg)]
    max_urls: Option<u64>,
    /// Configuration file (TOML): give the crawl's own, a recrawl asks as it did.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Total fetches in flight (overrides crawl.concurrency).
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// Serve live figures on this address (overrides monitor.listen).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Override any config key, e.g. --set recrawl.min_interval=0s (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Progress display: auto, lines or quiet.
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "lines", "quiet"])]
    progress: String,
}

#[derive(Args, Debug)]
struct CrawlArgs {
    /// Seed list: one http(s) URL per line; blank lines are allowed, and '#' after
    /// whitespace (or at the start of a line) starts a comment. Optional with --resume,
    /// which takes the crawl's own seeds from its checkpoint.
    #[arg(long, value_name = "FILE")]
    seeds: Option<PathBuf>,
    /// Most URLs the crawl takes on, seeds included (1e8, 100000000, 100_000_000, 100M).
    /// Also sizes the seen-set. Overrides crawl.max_urls. With --resume, the crawl's own
    /// unless given (a larger one extends the crawl).
    #[arg(long, value_name = "N", value_parser = parse_count_arg)]
    max_urls: Option<u64>,
    /// Configuration file (TOML); see config.toml in the repository for every key and
    /// its default. Without it, the built-in defaults apply.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output directory (overrides output.dir).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Continue the unfinished crawl in the output directory.
    #[arg(long, conflicts_with = "fresh")]
    resume: bool,
    /// Discard an unfinished crawl in the output directory and start again.
    #[arg(long)]
    fresh: bool,
    /// Total fetches in flight (overrides crawl.concurrency).
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// Serve live figures on this address: /metrics (Prometheus), /status.json and a
    /// status page at / (overrides monitor.listen), e.g. 127.0.0.1:9187.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Override any config key, e.g. --set politeness.per_host_rps=2 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Progress display: auto (a bar on a terminal, lines otherwise), lines or quiet.
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "lines", "quiet"])]
    progress: String,
    /// Join a distributed crawl on this Redis (overrides distributed.redis), e.g.
    /// redis://127.0.0.1:6379/0 or rediss://USER:PASSWORD@HOST:6380/0; needs --crawl-id. A
    /// URL with a password is better in --config: any local user can see arguments (ps).
    #[arg(long, value_name = "URL", conflicts_with_all = ["resume", "fresh"])]
    redis: Option<String>,
    /// The distributed crawl to join (overrides distributed.crawl_id).
    #[arg(long, value_name = "ID")]
    crawl_id: Option<String>,
}

fn parse_count_arg(text: &str) -> Result<u64, String> {
    parse_count(text).map_err(|e| e.to_string())
}

fn parse_size_arg(text: &str) -> Result<u64, String> {
    parse_byte_size(text).map_err(|e| e.to_string())
}

/// The crawler's allocator (`crawler::allocator`): what users run.
#[global_allocator]
static ALLOCATOR: crawler::allocator::CrawlerAllocator = crawler::allocator::CrawlerAllocator;

fn main() -> ExitCode {
    crawler::allocator::limit_malloc_arenas();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        // Colour codes only for a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    tracing::debug!("allocator: {}", crawler::allocator::describe());
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("crawler: {}", one_line(&error));
            ExitCode::from(2)
        }
    }
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

fn one_line(error: &anyhow::Error) -> String {
    error
        .chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Plan(args)) => plan(args),
        Some(Command::Normalize { urls, config, set }) => {
            let config = Config::load(config.as_deref(), &set)?;
            normalize(urls, &config.normalizer()?)
        }
        Some(Command::Status {
            redis,
            crawl_id,
            json,
            config,
            set,
        }) => {
            let config = Config::load(config.as_deref(), &set)?;
            let Some(redis) = redis.or(config.distributed.redis) else {
                bail!("status: which Redis? give --redis URL, or --config FILE with [distributed] redis");
            };
            let Some(crawl_id) = crawl_id.or(config.distributed.crawl_id) else {
                bail!("status: which crawl? give --crawl-id ID, or --config FILE with [distributed] crawl_id");
            };
            let redis =
                crawler::distributed::RedisUrl::new(&redis, config.network.ca_file.as_deref());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let text = if json {
                runtime.block_on(crawler::distributed::status::summary_json(
                    &redis, &crawl_id,
                ))?
            } else {
                runtime.block_on(crawler::distributed::status::status(&redis, &crawl_id))?
            };
            write_stdout(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Recrawl(args)) => recrawl(args),
        Some(Command::Config { config, set }) => {
            let config = Config::load(config.as_deref(), &set)?;
            write_stdout(&config.to_toml())?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "demo")]
        Some(Command::Demo(args)) => demo(args),
        Some(Command::Index { files }) => {
            for file in &files {
                let (index, lines) = crawler::warc::cdxj::write_index(file)?;
                eprintln!("{}: {lines} records indexed", index.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Robots {
            file,
            user_agent,
            urls,
        }) => robots(&file, &user_agent, &urls),
        None => crawl(cli.crawl),
    }
}

fn progress_mode(text: &str) -> ProgressMode {
    match text {
        "lines" => ProgressMode::Lines,
        "quiet" => ProgressMode::Quiet,
        _ => ProgressMode::Auto,
    }
}

/// `crawler demo`, with the `demo` feature (a default one): the synthetic web of
/// crates/testweb started in-process and crawled.
#[cfg(feature = "demo")]
fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    use std::sync::Arc;
    use testweb::{TestWebServer, Web, WebSpec};
    let spec = WebSpec {
        hosts: args.hosts.max(1),
        pages: args.pages.max(args.hosts.max(1)),
        ..WebSpec::small(args.seed)
    };
    let web = Arc::new(Web::new(spec));
    let server =
        TestWebServer::start(web.clone()).context("demo: cannot start the synthetic web")?;
    let (pattern, addr) = server.resolve_entry();
    // Demo defaults: a fast but still polite crawl of the local web; --set wins.
    let mut overrides = vec![
        "politeness.per_host_rps=100".to_string(),
        "politeness.per_host_burst=10".to_string(),
        "politeness.per_host_concurrency=4".to_string(),
        "crawl.retries=1".to_string(),
        format!("network.resolve.\"{pattern}\"={addr}"),
    ];
    overrides.extend(args.set.iter().cloned());
    if let Some(addr) = &args.listen {
        overrides.push(format!("monitor.listen={}", toml_string(addr)));
    }
    let mut config = Config::load(args.config.as_deref(), &overrides)?;
    config.output.dir = args.out.clone();
    let (_lock, _) = claim_output(&config, false, true)?;
    eprintln!(
        "demo: synthetic web of {} hosts (h0.test … h{}.test) on {addr}, crawling into {}",
        args.hosts,
        args.hosts.saturating_sub(1),
        config.output.dir.display()
    );
    let seeds = web
        .seeds()
        .iter()
        .filter_map(|s| crawler::normalize::normalize_str(s).ok())
        .collect();
    let code = run_and_report(config, seeds, progress_mode(&args.progress), None)?;
    let served = server.request_count();
    server.shutdown();
    eprintln!("demo: the synthetic web served {served} requests");
    Ok(code)
}

fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let plan = match (args.fpp, args.memory) {
        (Some(p), _) => crawler::seen::Plan::for_fpp(args.max_urls, p),
        (None, Some(bytes)) => crawler::seen::Plan::for_memory(args.max_urls, bytes),
        (None, None) => bail!("plan: give --fpp P or --memory SIZE"),
    }
    .context("plan")?;
    write_stdout(&format!(
        "{}\n{}\n",
        plan.report(),
        crawler::distributed::redis_layout(&plan)
    ))?;
    Ok(ExitCode::SUCCESS)
}

fn normalize(
    urls: Vec<String>,
    normalizer: &crawler::normalize::Normalizer,
) -> anyhow::Result<ExitCode> {
    let inputs: Vec<String> = if urls.is_empty() {
        std::io::stdin()
            .lines()
            .collect::<Result<_, _>>()
            .context("stdin")?
    } else {
        urls
    };
    let mut rejected = 0;
    let mut out = String::new();
    for input in inputs.iter().filter(|l| !l.trim().is_empty()) {
        match normalizer.normalize_str(input.trim()) {
            Ok(url) => {
                out.push_str(url.as_str());
                out.push('\n');
            }
            Err(reason) => {
                rejected += 1;
                out.push_str(&format!("rejected: {reason}: {input:?}\n"));
            }
        }
    }
    write_stdout(&out)?;
    Ok(if rejected > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `crawler robots`: the verdict for each URL, from the rules a crawl would take from FILE
/// (its first `ROBOTS_MAX_BYTES`, as fetched).
fn robots(file: &Path, user_agent: &str, urls: &[String]) -> anyhow::Result<ExitCode> {
    use crawler::robots::{agent_token, source_line, Reason, RobotsRules, ROBOTS_MAX_BYTES};
    // Every URL is checked before anything is printed: bad input is one line and exit 2.
    for input in urls {
        match url::Url::parse(input) {
            Ok(url) if !url.cannot_be_a_base() => {}
            Ok(_) => bail!("robots: URL {input:?} has no path to match"),
            Err(e) => bail!("robots: URL {input:?} does not parse: {e}"),
        }
    }
    let body =
        std::fs::read(file).with_context(|| format!("robots: cannot read {}", file.display()))?;
    let limit = usize::try_from(ROBOTS_MAX_BYTES).unwrap_or(usize::MAX);
    if body.len() > limit {
        eprintln!(
            "{}: {} bytes; only the first {limit} are read, as in a crawl",
            file.display(),
            body.len()
        );
    }
    let body = &body[..body.len().min(limit)];
    let rules = RobotsRules::parse(&agent_token(user_agent), body);
    for note in rules.notes() {
        // `line N: reason` reads as `FILE:N: reason`, like a compiler's message.
        match note.strip_prefix("line ").and_then(|n| n.split_once(": ")) {
            Some((line, reason)) => eprintln!("{}:{line}: {reason}; line skipped", file.display()),
            None => eprintln!("{}: {note}", file.display()),
        }
    }
    let mut out = String::new();
    let mut all_allowed = true;
    for url in urls {
        let verdict = rules.verdict(url);
        all_allowed &= verdict.allowed;
        let word = if verdict.allowed {
            "ALLOWED"
        } else {
            "DISALLOWED"
        };
        let why = match verdict.reason {
            Reason::Rule { line, .. } => {
                let text = source_line(body, line).unwrap_or_default();
                format!("by line {line}: {}", text.trim())
            }
            Reason::NoMatchingRule => "(no rule matches)".to_string(),
            Reason::RobotsTxt => "(/robots.txt is always allowed)".to_string(),
        };
        out.push_str(&format!("{url}: {word} {why}\n"));
    }
    write_stdout(&out)?;
    Ok(if all_allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes to stdout; a reader that went away (`crawler plan ... | head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("stdout"),
    }
}

fn crawl(args: CrawlArgs) -> anyhow::Result<ExitCode> {
    if args.seeds.is_none() && !args.resume {
        bail!("--seeds FILE is required to crawl (see crawler --help); --resume uses the seeds of the crawl it resumes");
    }
    let mut flags = Vec::new();
    let mut flag = |name: String, assignment: String| flags.push(Flag { name, assignment });
    if let Some(n) = args.max_urls {
        flag(format!("--max-urls {n}"), format!("crawl.max_urls={n}"));
    }
    if let Some(n) = args.concurrency {
        flag(
            format!("--concurrency {n}"),
            format!("crawl.concurrency={n}"),
        );
    }
    if let Some(addr) = &args.listen {
        flag(
            format!("--listen {addr}"),
            format!("monitor.listen={}", toml_string(addr)),
        );
    }
    // As TOML strings, so that any URL or id is taken literally.
    if let Some(url) = &args.redis {
        flag(
            "--redis".into(),
            format!("distributed.redis={}", toml_string(url)),
        );
    }
    if let Some(id) = &args.crawl_id {
        flag(
            format!("--crawl-id {id}"),
            format!("distributed.crawl_id={}", toml_string(id)),
        );
    }
    let mut config = Config::load_with_flags(args.config.as_deref(), &args.set, &flags)?;
    if let Some(out) = &args.out {
        config.output.dir = out.clone();
    }
    // Read (and their bad lines reported) before the output directory is touched.
    let given_seeds = match args.seeds.as_deref() {
        Some(path) => {
            let seeds = crawler::seeds::read_seeds(path, &config.normalizer()?)?;
            for bad in &seeds.bad {
                eprintln!("{bad}");
            }
            seeds.require_some(path)?;
            Some(seeds.urls)
        }
        None => None,
    };
    if config.distributed.redis.is_some() && (args.resume || args.fresh) {
        bail!(crawler::config::DISTRIBUTED_RESUME);
    }
    let (_lock, resume) = claim_output(&config, args.resume, args.fresh)?;
    if let Some(loaded) = &resume {
        // A resume keeps the crawl's max_urls unless --max-urls says otherwise.
        if args.max_urls.is_none() {
            config.crawl.max_urls = crawler::config::Count(loaded.manifest.max_urls);
        }
        if let Some(line) = resumed_max_urls(&config, loaded)? {
            eprintln!("{line}");
        }
    }
    // With --resume and no --seeds, the crawl's own (given ones are checked against them).
    let seeds = match given_seeds {
        Some(seeds) => seeds,
        None => crawler::checkpoint::load_seeds(&config.output.dir)?.with_context(|| {
            format!(
                "{}: the checkpoint holds no seed list (written by an older crawler): give the crawl's --seeds",
                config.output.dir.display()
            )
        })?,
    };
    run_and_report(config, seeds, progress_mode(&args.progress), resume)
}

/// `crawler recrawl`: the next generation of the crawl in the output directory, or the one
/// a crash or a stop interrupted there.
fn recrawl(args: RecrawlArgs) -> anyhow::Result<ExitCode> {
    let mut flags = Vec::new();
    if let Some(n) = args.max_urls {
        flags.push(Flag {
            name: format!("--max-urls {n}"),
            assignment: format!("crawl.max_urls={n}"),
        });
    }
    if let Some(n) = args.concurrency {
        flags.push(Flag {
            name: format!("--concurrency {n}"),
            assignment: format!("crawl.concurrency={n}"),
        });
    }
    if let Some(addr) = &args.listen {
        flags.push(Flag {
            name: format!("--listen {addr}"),
            assignment: format!("monitor.listen={}", toml_string(addr)),
        });
    }
    let mut config = Config::load_with_flags(args.config.as_deref(), &args.set, &flags)?;
    if let Some(out) = &args.out {
        config.output.dir = out.clone();
    }
    config.recrawl.active = true;
    config.recrawl.continuous = args.continuous;
    if config.distributed.redis.is_some() {
        // The one list of what distributed mode lacks says why.
        if let Some((key, reason)) = config
            .distributed_lacks()
            .into_iter()
            .find(|(key, _)| *key == "recrawl")
        {
            bail!("{key}: not supported with distributed.redis: {reason}");
        }
    }
    let dir = config.output.dir.clone();
    let _lock = DirectoryLock::acquire(&dir, Holding::Exclusive)?;
    let manifest = match crawler::checkpoint::current_manifest(&dir) {
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => bail!(
            "{}: its checkpoint cannot be read ({e}); resume the crawl with --resume first",
            dir.display()
        ),
        None => None,
    };
    let unfinished = manifest.as_ref().is_some_and(|m| !m.finished);
    let generation = crawler::recrawl::started_generation(&dir);
    let (resume, seeds) = match (unfinished, generation) {
        (true, Some(generation)) => {
            let loaded = crawler::checkpoint::load(&dir)?;
            eprintln!(
                "recrawl: going on with generation {generation} in {} (checkpoint of {})",
                dir.display(),
                loaded.manifest.created_at
            );
            let seeds = crawler::checkpoint::load_seeds(&dir)?.with_context(|| {
                format!("{}: the checkpoint holds no seed list", dir.display())
            })?;
            (Some(loaded), seeds)
        }
        (true, None) => bail!(
            "{}: holds an unfinished crawl; finish it first (crawler --resume --out {}), then recrawl",
            dir.display(),
            dir.display()
        ),
        (false, _) => (None, Vec::new()),
    };
    // The crawl's max_urls unless --max-urls says otherwise.
    if args.max_urls.is_none() {
        if let Some(m) = &manifest {
            config.crawl.max_urls = crawler::config::Count(m.max_urls);
        }
    }
    run_and_report(config, seeds, progress_mode(&args.progress), resume)
}

/// `--resume` with another max_urls: a larger one extends the crawl, whose seen-set keeps its
/// size (the line says what its false-positive rate becomes); a smaller one is refused.
fn resumed_max_urls(
    config: &Config,
    loaded: &crawler::checkpoint::Loaded,
) -> anyhow::Result<Option<String>> {
    let (then, now) = (loaded.manifest.max_urls, config.crawl.max_urls.0);
    if now < then {
        bail!(
            "max_urls {now}: the crawl in {} was started with max_urls {then} and has taken on {} URLs; a crawl can be extended, not shrunk: resume with --max-urls {then} or more, or start again with --fresh",
            config.output.dir.display(),
            loaded.manifest.counters.get("accepted").copied().unwrap_or(0)
        );
    }
    if now == then {
        return Ok(None);
    }
    let plan = loaded.seen.plan();
    let fpp = plan.expected_fpp_at(now);
    let mut line = format!(
        "max_urls {now}: the crawl grows from {then} to {now} URLs; its seen-set keeps its size ({} for {} URLs), so its expected false-positive rate at {now} URLs is {fpp:.2e} (it was {:.2e})",
        crawler::quantity::HumanBytes(plan.bytes),
        plan.sized_for(),
        plan.expected_fpp
    );
    if fpp > 0.01 {
        line.push_str(&format!(
            "; a new URL taken for seen is never crawled: for a seen-set sized for {now} URLs, crawl again with --fresh"
        ));
    }
    Ok(Some(line))
}

/// The one place a crawling command (a crawl, a distributed process, the demo) claims its
/// output directory: locks it for this process's life (see [`crawler::output_lock`]), and
/// only then looks at what an earlier crawl left there. The lock must be kept until exit.
fn claim_output(
    config: &Config,
    resume: bool,
    fresh: bool,
) -> anyhow::Result<(DirectoryLock, Option<crawler::checkpoint::Loaded>)> {
    let dir = &config.output.dir;
    if config.distributed.redis.is_some() {
        // Redis holds the crawl's state; each process writes files of its own
        // (pages-<process id>.jsonl), so the directory holds no checkpoint to check.
        return Ok((DirectoryLock::acquire(dir, Holding::Shared)?, None));
    }
    let lock = DirectoryLock::acquire(dir, Holding::Exclusive)?;
    Ok((lock, prepare_output_dir(dir, resume, fresh)?))
}

fn run_and_report(
    config: Config,
    seeds: Vec<url::Url>,
    progress: ProgressMode,
    resume: Option<crawler::checkpoint::Loaded>,
) -> anyhow::Result<ExitCode> {
    let shutdown = ShutdownHandle::new();
    let shutdown_for_limit = shutdown.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let summary = runtime
        .block_on(async {
            tokio::spawn(watch_signals(shutdown.clone()));
            run_crawl(CrawlRequest {
                config: config.clone(),
                seeds,
                progress,
                shutdown,
                resume,
            })
            .await
        })
        .map_err(|error| with_advice(error.into(), &config))?;
    eprintln!("{}", summary.human());
    if config.distributed.redis.is_some() {
        eprintln!(
            "output: {}/pages-<process id>.jsonl and summary-<process id>.json",
            config.output.dir.display()
        );
    } else {
        eprintln!(
            "output: {} and {}",
            crawler::output::journal_path(&config.output.dir).display(),
            crawler::output::summary_path(&config.output.dir).display()
        );
    }
    if summary.stopped && config.distributed.redis.is_some() {
        eprintln!(
            "stopped before the end: this process's unfinished URLs are back in the crawl's queues in Redis, for the other processes or this one started again"
        );
    } else if summary.stopped && shutdown_for_limit.stopped_by_time_limit() {
        eprintln!(
            "stopped by the time limit (crawl.max_duration = {}, counted per run) with {} URLs queued or in flight, all checkpointed; to go on, run the same command {}",
            config.crawl.max_duration.as_deref().unwrap_or_default(),
            summary.queued_left,
            if config.recrawl.active { "again" } else { "with --resume" }
        );
    } else if summary.stopped && config.recrawl.active {
        eprintln!(
            "stopped before the end with {} URLs queued or in flight, all checkpointed; to go on, run the same command again",
            summary.queued_left
        );
    } else if summary.stopped {
        eprintln!(
            "stopped before the end with {} URLs queued or in flight, all checkpointed; to go on, run the same command with --resume",
            summary.queued_left
        );
    }
    Ok(if summary.failures > 0 {
        eprintln!("{}", exit_1_reason(&summary));
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A crawl stopped by an I/O error ends its one line with what to do: free space (the
/// commonest such error is a full disk), or fix the cause, then resume, when the directory
/// holds a checkpoint to resume from.
fn with_advice(error: anyhow::Error, config: &Config) -> anyhow::Error {
    let io_errors: Vec<&std::io::Error> = error
        .chain()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .collect();
    if io_errors.is_empty() {
        return error;
    }
    let full = io_errors
        .iter()
        .any(|e| matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)));
    let resumable = config.distributed.redis.is_none()
        && matches!(
            crawler::checkpoint::current_manifest(&config.output.dir),
            Some(Ok(m)) if !m.finished
        );
    let advice = match (full, resumable) {
        (true, true) => "free space, then run the same command with --resume",
        (true, false) => "free space, then run the same command again",
        (false, true) => "fix the cause, then run the same command with --resume",
        (false, false) => return error,
    };
    anyhow::anyhow!("{}; {advice}", one_line(&error))
}

/// The closing line that says why the exit code is 1: the failed URLs, by what failed.
fn exit_1_reason(summary: &crawler::CrawlSummary) -> String {
    let c = &summary.counts;
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut causes = vec![
        plural(
            c.server_errors,
            "server error (5xx/429)",
            "server errors (5xx/429)",
        ),
        plural(c.network_errors, "network error", "network errors"),
        format!("{} given up: robots.txt unreachable", c.robots_unavailable),
    ];
    if c.panics > 0 {
        causes.push(format!("{} lost to a crawler bug", c.panics));
    }
    format!(
        "exit 1: {} failed ({}); each one's record says why",
        plural(summary.failures, "URL", "URLs"),
        causes.join(", ")
    )
}

/// Decides what to do with an earlier crawl in the output directory: refuse to mix a
/// new crawl into it, discard it (`--fresh`), or load its checkpoint (`--resume`).
fn prepare_output_dir(
    dir: &Path,
    resume: bool,
    fresh: bool,
) -> anyhow::Result<Option<crawler::checkpoint::Loaded>> {
    use crawler::checkpoint;
    let pages = crawler::output::journal_path(dir);
    let has_records = std::fs::metadata(&pages).is_ok_and(|m| m.len() > 0);
    if fresh {
        for path in [
            crawler::output::journal_path(dir),
            crawler::output::summary_path(dir),
        ] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("{}", path.display())),
            }
        }
        checkpoint::remove(dir)?;
        crawler::warc::remove_archive(dir)?;
        match std::fs::remove_file(crawler::recrawl::generation_path(dir)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("{}", dir.display())),
        }
        return Ok(None);
    }
    if let (true, Some(generation)) = (resume, crawler::recrawl::started_generation(dir)) {
        bail!(
            "{}: its latest run is generation {generation} of a recrawl; go on with `crawler recrawl --out {}`",
            dir.display(),
            dir.display()
        );
    }
    if resume {
        let loaded = checkpoint::load(dir)?;
        if let Some(reason) = &loaded.fell_back {
            eprintln!(
                "crawler: the latest checkpoint is damaged ({reason}); resuming from the previous one"
            );
        }
        if loaded.manifest.finished {
            bail!(
                "{}: the crawl checkpointed there finished at {}; nothing to resume (use --fresh to crawl again)",
                dir.display(),
                loaded.manifest.created_at
            );
        }
        return Ok(Some(loaded));
    }
    match checkpoint::current_manifest(dir) {
        Some(Ok(m)) if !m.finished => bail!(
            "{}: holds an unfinished crawl ({} URLs done, {} queued or in flight, checkpoint of {}); use --resume to go on or --fresh to discard it",
            dir.display(),
            m.pages_records,
            m.frontier.map_or(0, |f| f.queued),
            m.created_at
        ),
        Some(Err(e)) => bail!(
            "{}: holds a crawl whose checkpoint cannot be read ({e}); use --resume to try the previous checkpoint or --fresh to discard it",
            dir.display()
        ),
        _ if has_records => bail!(
            "{}: holds records of an earlier crawl; use --fresh to discard them, or another --out",
            dir.display()
        ),
        _ => Ok(None),
    }
}

/// First Ctrl-C or SIGTERM: stop cleanly. Second Ctrl-C: exit at once.
async fn watch_signals(shutdown: ShutdownHandle) {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    loop {
        #[cfg(unix)]
        let terminated = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let terminated = std::future::pending::<()>();
        tokio::select! {
            r = tokio::signal::ctrl_c() => { if r.is_err() { return; } }
            _ = terminated => {}
        }
        if shutdown.is_stopping() {
            eprintln!("crawler: second interrupt, exiting now");
            std::process::exit(130);
        }
        eprintln!("crawler: stopping: finishing fetches in flight (Ctrl-C again to exit now)");
        shutdown.stop();
    }
}
