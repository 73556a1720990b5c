//! Differential fuzzing on the stable toolchain: the check of the fuzz target
//! (`fuzz/fuzz_targets/extract_differential.rs`: the scanner against the scraper reference,
//! whole and streamed, known differences only where documented) driven for a time budget by
//! random inputs, since `cargo fuzz` needs nightly. Ignored by default (it runs for minutes):
//!
//! ```text
//! EXTRACT_SOAK_SECS=600 cargo test --test api extract_soak -- --ignored --nocapture
//! cargo bench --bench extract -- --soak 600     # the same, optimized: far more inputs
//! ```
//!
//! Inputs are the differential test's generated documents (tag soup and tidy markup) and
//! mutations of its hand-written cases: tokens that switch the tokenizer's state (comments,
//! script escapes, raw-text and foreign-content tags, CDATA, quotes, entities) inserted at
//! random places, spans deleted, duplicated or spliced from another case, bytes
//! overwritten, the end cut off. `EXTRACT_SOAK_SEED` (or the bench's `--seed N`) replays a
//! run; every failure is printed with its input and the run fails at the end.

use std::time::{Duration, Instant};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::extract_differential::{document, page, CASES, KNOWN_DIFFERENCES};
use crate::extract_support::{differential, Outcome};
use crawler::extract::ExtractOptions;

/// Pieces that change what the tokenizer or the tree builder does next.
const TOKENS: &[&str] = &[
    "<a href=x>",
    "<a href='q'>",
    "<a href=\"d\">",
    "</a>",
    "<!--",
    "-->",
    "--!>",
    "<!-->",
    "<!--->",
    "-",
    "--",
    "<script>",
    "</script>",
    "</script ",
    "<!--<script>",
    "<script><!--",
    "<style>",
    "</style>",
    "</style ",
    "<textarea>",
    "</textarea>",
    "<title>",
    "</title>",
    "<xmp>",
    "</xmp>",
    "<noscript>",
    "</noscript>",
    "<noembed>",
    "<noframes>",
    "<iframe src=i>",
    "</iframe>",
    "<plaintext>",
    "<svg>",
    "</svg>",
    "<svg/>",
    "<math>",
    "</math>",
    "<mi>",
    "</mi>",
    "<mtext>",
    "<foreignObject>",
    "</foreignObject>",
    "<desc>",
    "</desc>",
    "<font color=r>",
    "<font>",
    "<p>",
    "</p>",
    "</br>",
    "<div>",
    "</div>",
    "<table>",
    "<select>",
    "<template>",
    "</template>",
    "<![CDATA[",
    "]]>",
    "<base href=/b/>",
    "<frameset>",
    "</frameset>",
    "<frame src=f>",
    "<area href=ar>",
    "<a rel=nofollow href=n>",
    "<link rel=canonical href=c>",
    "<meta name=robots content=nofollow>",
    "\"",
    "'",
    "=",
    ">",
    "<",
    "/",
    "/>",
    "</",
    "<?",
    "<!x",
    "<!DOCTYPE html>",
    "&amp;",
    "&#x41;",
    "&copy",
    "&",
    "\0",
    " ",
    "\t",
    "\n",
    "é",
    "<b>",
    "<button>",
    "</button>",
];

fn mutate(rng: &mut StdRng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for _ in 0..rng.random_range(1..8) {
        let at = rng.random_range(0..=bytes.len());
        match rng.random_range(0..10) {
            0..=4 => {
                let token = TOKENS[rng.random_range(0..TOKENS.len())].as_bytes();
                bytes.splice(at..at, token.iter().copied());
            }
            5 => {
                let end = rng.random_range(at..=bytes.len().min(at + 16));
                bytes.drain(at..end);
            }
            6 => {
                let end = rng.random_range(at..=bytes.len().min(at + 32));
                let span = bytes[at..end].to_vec();
                bytes.splice(at..at, span);
            }
            7 => {
                let from = rng.random_range(0..=other.len());
                let end = rng.random_range(from..=other.len().min(from + 64));
                bytes.splice(at..at, other[from..end].iter().copied());
            }
            8 if !bytes.is_empty() => {
                let i = rng.random_range(0..bytes.len());
                bytes[i] = rng.random();
            }
            _ => bytes.truncate(at),
        }
    }
    bytes.truncate(8192);
    bytes
}

#[test]
#[ignore = "a time-budgeted fuzzing run: EXTRACT_SOAK_SECS (default 600), --ignored"]
fn extract_soak() {
    let secs: u64 = std::env::var("EXTRACT_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let seed: u64 = std::env::var("EXTRACT_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    let report = soak(Duration::from_secs(secs), seed);
    assert_eq!(report.mismatches, 0, "{report:?}");
}

/// What a soak run did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SoakReport {
    pub inputs: u64,
    pub bytes: u64,
    pub known: u64,
    pub mismatches: u64,
}

/// Runs the differential check on random inputs for `budget`, printing each mismatch and a
/// summary line. Also driven by `cargo bench --bench extract -- --soak SECS`, which runs it
/// in an optimized build (many times the inputs per second of a debug test).
pub(crate) fn soak(budget: Duration, seed: u64) -> SoakReport {
    println!("extract_soak: seed {seed}, {} s", budget.as_secs());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut runner = TestRunner::deterministic();
    let generated = document();
    let corpus: Vec<&[u8]> = CASES
        .iter()
        .chain(KNOWN_DIFFERENCES)
        .map(|case| case.as_bytes())
        .collect();
    let deadline = Instant::now() + budget;
    let mut report = SoakReport {
        inputs: 0,
        bytes: 0,
        known: 0,
        mismatches: 0,
    };
    while Instant::now() < deadline {
        let html = if rng.random_bool(0.4) {
            match generated.new_tree(&mut runner) {
                Ok(tree) => tree.current(),
                Err(_) => continue,
            }
        } else {
            let base = corpus[rng.random_range(0..corpus.len())];
            let other = corpus[rng.random_range(0..corpus.len())];
            mutate(&mut rng, base, other)
        };
        let encoding = match rng.random_range(0..8) {
            0 => Some("windows-1252"),
            1 => Some("Shift_JIS"),
            2 => Some("utf-16le"),
            _ => None,
        };
        let opts = ExtractOptions {
            follow_nofollow: rng.random_bool(0.5),
            drop_fragments: rng.random_bool(0.5),
            ..ExtractOptions::default()
        };
        report.inputs += 1;
        report.bytes += html.len() as u64;
        match differential(&html, &page(), encoding, &opts) {
            Ok(Outcome::Agreed(_)) => {}
            Ok(Outcome::KnownDifference { .. }) => report.known += 1,
            Err(mismatch) => {
                println!(
                    "MISMATCH (encoding {encoding:?}, {opts:?}) on {:?}:\n{mismatch}",
                    String::from_utf8_lossy(&html)
                );
                report.mismatches += 1;
            }
        }
    }
    println!(
        "extract_soak: {} inputs ({} bytes), {} documented differences, {} mismatches, seed {seed}",
        report.inputs, report.bytes, report.known, report.mismatches
    );
    report
}
