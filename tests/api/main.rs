//! The library's API tests, one binary: each module is one subject, tested through the public
//! API of `crawler` without a crawl (`cargo test --test api`, or `cargo test --test api store`
//! for one subject).
//!
//! Shared helpers: `tests/extract_support/` (the scraper reference extractor and the
//! differential comparison, also used by `benches/extract.rs` and the `fuzz/` crate).
//!
//! Property tests keep their failures beside their module (`<module>.proptest-regressions`,
//! `FileFailurePersistence::WithSource`): proptest's default would put them under
//! `tests/proptest-regressions/`, since this directory holds a `main.rs`.

mod extract_corpus;
mod extract_differential;
mod extract_semantics;
mod extract_soak;
#[path = "../extract_support/mod.rs"]
mod extract_support;
mod normalize_props;
mod normalize_table;
mod robots_suites;
mod scope_rules;
mod seen_api;
mod store_basic;
mod store_model;
mod whatwg_url;
