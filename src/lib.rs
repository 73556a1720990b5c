//! `crawler` as a library: the whole crawl pipeline, usable from tests, benches and the CLI.
//!
//! Data flows one way: seeds → frontier → fetch workers → extractor → normalizer →
//! scope rules → seen-set → frontier. Each stage is one module with one job; [`crawl`]
//! wires them together and owns shutdown. `main.rs` only parses the command line, loads
//! the configuration, runs the crawl and maps errors to exit codes.
//!
//! # Layout
//!
//! ```text
//! src/
//!   main.rs          the CLI: arguments, configuration, exit codes
//!   lib.rs           this map
//!   crawl/           orchestration: run_crawl, the one driver, its two sources of work
//!     driver.rs        set-up, the work pump, teardown (once for every source)
//!     source.rs        the interface between the driver and a source of work
//!     local_source.rs  the disk frontier with checkpoints and resume
//!     lease_source.rs  one process of a crawl shared through Redis
//!   distributed/     the Redis side of a distributed crawl: scripts (*.lua), their calls
//!                    (session.rs), lease bookkeeping (leases.rs), sealing, status
//!   frontier/        per-host queues on disk, politeness, robots.txt cache, address budgets
//!   seen/            the concurrent Bloom filter and its sizing
//!   state_store/     per-URL state on disk (recrawl) and the exact admitted set (seen.exact)
//!   checkpoint.rs    checkpoint files, the queue log, resume
//!   output.rs        the journal (pages.jsonl) and the output directory's file names
//!   output_lock.rs   one crawl per output directory (a flock held for a process's life)
//!   recrawl/         generations of a collection: what they read from the state store, schedule
//!   warc/            the archive: a sink beside the journal
//!   fetch.rs gate.rs dns.rs cookie_jar.rs  HTTP client, the request gate, name
//!                    resolution, the opt-in cookie jar
//!   robots/ sitemap.rs extract.rs charset.rs canonical.rs content_coding.rs
//!   near_duplicate.rs  parsing (near_duplicate: pages identical but for their digits)
//!   site.rs          [[site]] sections: per-site politeness
//!   monitor/         live figures over HTTP: /metrics, /status.json, the status page
//!   normalize/ scope.rs seeds.rs host.rs  URLs: canonical form, scope rules, seed lists,
//!                    host identity (one key and one name per host)
//!   config.rs quantity.rs counters.rs durable.rs descriptors.rs cpu_time.rs allocator.rs
//! ```
//!
//! # Layers
//!
//! A module imports (`use`) only from its own layer or those below it; nothing below
//! `crawl/` imports `crawl/`, which is what lets a reader start at the bottom.
//!
//! 1. Foundations: `config`, `quantity`, `counters`, `durable`, `descriptors`,
//!    `cpu_time`, `allocator`; URLs: `host`, `normalize`, `scope`, `seeds`; parsing: `extract`,
//!    `charset`, `canonical`, `content_coding`, `sitemap`, `near_duplicate`, `site`.
//! 2. Network: `dns`, `gate` (config, dns, scope), `cookie_jar`, `fetch`, `robots`.
//! 3. State: `state_store` (below `seen`, which fronts its admitted set), `seen`, `frontier`, `output` with `warc` (its sink), `output_lock`,
//!    `checkpoint`, `recrawl`.
//! 4. `distributed`: Redis (state kept there instead of on disk); `monitor`: the figures
//!    served (counters, frontier reports, handed a snapshot by the driver).
//! 5. `crawl`: everything above, wired; `main.rs` on top.
//!
//! `pub` means "used outside the crate" (the CLI, tests, benches): the `unreachable_pub`
//! lint below keeps it so (CI denies warnings); everything else is `pub(crate)`. It is set
//! here rather than in `Cargo.toml`'s `[lints]`, which would also apply it to the test and
//! bench binaries, where `pub` means nothing.

#![warn(unreachable_pub)]

pub mod allocator;
pub mod canonical;
pub mod charset;
pub mod checkpoint;
pub mod config;
pub(crate) mod content_coding;
pub mod cookie_jar;
pub mod counters;
pub mod cpu_time;
pub mod crawl;
pub(crate) mod descriptors;
pub mod distributed;
pub(crate) mod dns;
pub mod durable;
pub mod extract;
pub(crate) mod fetch;
pub mod frontier;
pub(crate) mod gate;
pub mod host;
pub mod monitor;
pub mod near_duplicate;
pub mod normalize;
pub mod output;
pub mod output_lock;
pub mod quantity;
pub mod recrawl;
pub mod robots;
pub mod scope;
pub mod seeds;
pub mod seen;
pub mod site;
pub mod sitemap;
pub mod state_store;
pub mod warc;

pub use crawl::{run_crawl, CrawlRequest, CrawlSummary, ShutdownHandle};
