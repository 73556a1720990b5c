//! `crawler` as a library: the whole crawl pipeline, usable from tests, benches and the CLI.
//!
//! Data flows one way: seeds → frontier → fetch workers → extractor → normalizer →
//! scope rules → seen-set → frontier. Each stage is one module with one job; [`crawl`]
//! wires them together and owns shutdown. `main.rs` only parses the command line, loads
//! the configuration, runs the crawl and maps errors to exit codes.

pub mod allocator;
pub mod canonical;
pub mod charset;
pub mod checkpoint;
pub mod config;
pub(crate) mod content_coding;
pub mod cookie_jar;
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
pub mod near_duplicate;
pub mod normalize;
pub mod output;
pub mod output_lock;
pub mod quantity;
pub mod robots;
pub mod scope;
pub mod seeds;
pub mod seen;
pub mod site;
pub mod sitemap;
pub mod warc;

pub use crawl::{run_crawl, CrawlRequest, CrawlSummary, ShutdownHandle};
