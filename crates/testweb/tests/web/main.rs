//! Tests of the synthetic web itself, over real HTTP and against its ground truth, one binary
//! (`cargo test -p testweb`).

mod crawl;
mod extract;
mod hostile;
mod http;
mod truth;
