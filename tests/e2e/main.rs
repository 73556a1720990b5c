//! End-to-end tests, one binary: whole crawls against the synthetic web (`testweb`), checked
//! against its ground truth and its request log, and the `crawler` binary run as a user runs
//! it (`cargo test --test e2e`, or `cargo test --test e2e resume` for one subject).

mod adaptive;
mod cli;
mod crawl_e2e;
mod descriptors;
mod discovery;
mod distributed;
mod faults;
mod fetch_controls;
mod hostile;
mod kill_resume;
mod monitor;
mod parity;
mod politeness_e2e;
mod real_size;
mod recrawl;
mod resume_e2e;
mod robots_cli;
mod site_e2e;
mod state_store;
mod support;
mod tls;
mod warc;
#[path = "../warcio_support/mod.rs"]
mod warcio_support;
