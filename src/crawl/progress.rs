//! What the operator sees while a crawl runs.
//!
//! On a terminal: an indicatif bar (fetched of max, pages per second, queued, in flight,
//! errors, seen-set fill and estimated fpp). Off a terminal (a log file, CI): one plain
//! line every `output.progress_interval_secs`, because a redrawn bar in a log is noise.
//! indicatif is used rather than hand-drawn escape codes: it handles terminal width,
//! redraw rate limiting and clean teardown.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The figures one progress line shows, taken by the dispatcher.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProgressFigures {
    pub(crate) finished: u64,
    pub(crate) accepted: u64,
    pub(crate) failures: u64,
    pub(crate) queued: u64,
    pub(crate) in_flight: u64,
    pub(crate) seen_fill: f64,
    pub(crate) seen_fpp: f64,
    /// The host with the most URLs queued: key, queued now, ever queued.
    pub(crate) busiest: Option<(String, usize, u64)>,
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on a terminal, plain lines otherwise (decided from stderr).
    Auto,
    /// Plain lines on stderr.
    Lines,
    /// Nothing (tests, benchmarks).
    Quiet,
}

/// The live display.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    lines: bool,
    interval: Duration,
    started: Instant,
    last: (Instant, u64),
}

impl Progress {
    pub(crate) fn start(mode: ProgressMode, max_urls: u64, interval: Duration) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let (bar, lines) = match mode {
            ProgressMode::Auto if terminal => (Some(make_bar(max_urls)), false),
            ProgressMode::Auto | ProgressMode::Lines => (None, true),
            ProgressMode::Quiet => (None, false),
        };
        let interval = if bar.is_some() {
            Duration::from_millis(250)
        } else {
            interval
        };
        let now = Instant::now();
        Progress {
            bar,
            lines,
            interval,
            started: now,
            last: (now, 0),
        }
    }

    /// How often the display wants to be updated.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    pub(crate) fn update(&mut self, f: &ProgressFigures) {
        let busiest = f
            .busiest
            .as_ref()
            .map(|(host, now, total)| format!(", busiest host {host}: {now} queued of {total}"))
            .unwrap_or_default();
        let finished = f.finished;
        let (queued, in_flight, errors) = (f.queued, f.in_flight, f.failures);
        let now = Instant::now();
        let dt = now.duration_since(self.last.0).as_secs_f64().max(1e-6);
        let rate = (finished.saturating_sub(self.last.1)) as f64 / dt;
        self.last = (now, finished);
        if let Some(bar) = &self.bar {
            bar.set_position(finished);
            bar.set_message(format!(
                "{rate:.0}/s  queued {queued}  in flight {in_flight}  errors {errors}  seen fill {:.4} fpp≈{:.1e}{busiest}",
                f.seen_fill, f.seen_fpp
            ));
        } else if self.lines {
            eprintln!(
                "progress: {finished} fetched, {rate:.0} pages/s, {queued} queued, {in_flight} in flight, {errors} errors, {} accepted, seen fill {:.4} fpp≈{:.1e}, {:.0} s{busiest}",
                f.accepted,
                f.seen_fill,
                f.seen_fpp,
                self.started.elapsed().as_secs_f64()
            );
        }
    }

    /// The last line (or the bar's teardown) at the end of the crawl.
    pub(crate) fn finish(&mut self, f: &ProgressFigures) {
        if let Some(bar) = self.bar.take() {
            bar.set_position(f.finished);
            bar.finish_and_clear();
        } else if self.lines {
            self.update(f);
        }
    }
}

fn make_bar(max_urls: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(max_urls), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar
}
