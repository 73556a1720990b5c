//! Differential pass over a directory of real HTML files (ignored by default: it needs a
//! corpus and takes a while). It can be pointed at the synthetic web's pages:
//!
//! ```text
//! EXTRACT_CORPUS_DIR=/path/to/pages EXTRACT_CORPUS_LIMIT=5000 EXTRACT_CORPUS_STRIDE=1 \
//!     cargo test --release --test api extract_corpus -- --ignored --nocapture
//! ```
//!
//! Without `EXTRACT_CORPUS_DIR` it uses the Rust documentation that rustup installs, if
//! present. Each file's URL is `http://corpus.test/<path relative to the directory>`.

use std::path::{Path, PathBuf};

use crate::extract_support::{differential, Outcome};
use crawler::extract::ExtractOptions;
use url::Url;

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html" || e == "htm") {
            out.push(path);
        }
    }
}

fn default_corpus() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let toolchains = Path::new(&home).join(".rustup/toolchains");
    let mut dirs: Vec<_> = std::fs::read_dir(toolchains)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    dirs.sort_by_key(|d| d.path());
    dirs.into_iter()
        .map(|d| d.path().join("share/doc/rust/html"))
        .find(|p| p.is_dir())
}

#[test]
#[ignore = "needs a corpus directory; run with --ignored"]
fn extract_differential_corpus() {
    let dir = match std::env::var_os("EXTRACT_CORPUS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => match default_corpus() {
            Some(dir) => dir,
            None => {
                eprintln!("no corpus: set EXTRACT_CORPUS_DIR");
                return;
            }
        },
    };
    let limit = std::env::var("EXTRACT_CORPUS_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    // Every `stride`-th file, to sample a large tree evenly.
    let stride = std::env::var("EXTRACT_CORPUS_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let mut all = Vec::new();
    html_files(&dir, &mut all);
    let files: Vec<_> = all.into_iter().step_by(stride).take(limit).collect();
    // Both ways of resolving: links as `Url::join` gives them, and without their fragments
    // (the crawl's).
    let with_fragments = ExtractOptions::default();
    let without_fragments = ExtractOptions {
        drop_fragments: true,
        ..ExtractOptions::default()
    };
    let (mut agreed, mut known, mut links, mut bytes) = (0usize, 0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    for path in &files {
        let Ok(html) = std::fs::read(path) else {
            continue;
        };
        let rel = path.strip_prefix(&dir).unwrap_or(path).to_string_lossy();
        let Ok(url) = Url::parse("http://corpus.test/").and_then(|b| b.join(&rel)) else {
            continue;
        };
        bytes += html.len();
        let outcome = differential(&html, &url, None, &with_fragments)
            .and_then(|_| differential(&html, &url, None, &without_fragments));
        match outcome {
            Ok(Outcome::Agreed(found)) => {
                agreed += 1;
                links += found.links.len();
            }
            Ok(Outcome::KnownDifference { reason, .. }) => {
                known += 1;
                eprintln!("known difference in {}: {reason}", path.display());
            }
            Err(m) => failures.push(format!("{}:\n{m}", path.display())),
        }
    }
    eprintln!(
        "{} files ({} MB) from {}: {agreed} agreed ({links} links), {known} known differences, {} mismatches",
        files.len(),
        bytes / 1_000_000,
        dir.display(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
