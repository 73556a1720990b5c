//! What the operator sees while a crawl runs.
//!
//! On a terminal: an indicatif bar; off a terminal (a log file, CI): one plain line every
//! `output.progress_interval_secs`, because a redrawn bar in a log is noise. Both say the
//! same thing in plain words (`describe`): pages done of the work known so far (done,
//! queued, in flight: the crawl cannot know more, and `max_urls` is a cap, not a goal),
//! the rate, failures, and how full the seen-set is against the `max_urls` it was sized
//! for. indicatif is used rather than hand-drawn escape codes: it handles terminal width,
//! redraw rate limiting and clean teardown.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The figures one progress line shows, taken by the dispatcher.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProgressFigures {
    pub(crate) finished: u64,
    pub(crate) failures: u64,
    pub(crate) queued: u64,
    pub(crate) in_flight: u64,
    /// URLs in the seen-set over the `max_urls` it is sized for (past 1, its false
    /// positives pass the configured rate).
    pub(crate) seen_full: f64,
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
    /// Starts the display of a run; `done` is what earlier runs finished (the rate is this
    /// run's).
    pub(crate) fn start(mode: ProgressMode, interval: Duration, done: u64) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let (bar, lines) = match mode {
            ProgressMode::Auto if terminal => (Some(make_bar()), false),
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
            last: (now, done),
        }
    }

    /// How often the display wants to be updated.
    pub(crate) fn interval(&self) -> Duration {
        self.interval
    }

    /// Pages per second since the last call (or the start), with `finished` done now.
    fn rate_now(&mut self, finished: u64) -> f64 {
        let now = Instant::now();
        let dt = now.duration_since(self.last.0).as_secs_f64().max(1e-6);
        let rate = (finished.saturating_sub(self.last.1)) as f64 / dt;
        self.last = (now, finished);
        rate
    }

    pub(crate) fn update(&mut self, f: &ProgressFigures) {
        let rate = self.rate_now(f.finished);
        if let Some(bar) = &self.bar {
            bar.set_length(f.finished + f.queued + f.in_flight);
            bar.set_position(f.finished);
            bar.set_message(describe(f, rate));
        } else if self.lines {
            eprintln!("{}", line(f, rate, self.started.elapsed().as_secs_f64()));
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

fn make_bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar
}

/// The figures in plain words: `12,345 done, 3,210 queued, 8 in flight · 410 pages/s ·
/// 1 failure · seen-set 3% full` (the failures only when there are some).
pub(crate) fn describe(f: &ProgressFigures, rate: f64) -> String {
    let failures = match f.failures {
        0 => String::new(),
        1 => " · 1 failure".to_string(),
        n => format!(" · {} failures", grouped(n)),
    };
    let full = f.seen_full * 100.0;
    let full = if full > 0.0 && full < 10.0 {
        format!("{full:.1}")
    } else {
        format!("{full:.0}")
    };
    format!(
        "{} done, {} queued, {} in flight · {} pages/s{failures} · seen-set {full}% full",
        grouped(f.finished),
        grouped(f.queued),
        grouped(f.in_flight),
        grouped(rate.round() as u64),
    )
}

/// One progress line (lines mode): the figures, the time, and the host with most queued.
pub(crate) fn line(f: &ProgressFigures, rate: f64, elapsed_secs: f64) -> String {
    let busiest = f
        .busiest
        .as_ref()
        .map(|(host, now, total)| {
            format!(
                "; busiest host {host}: {} queued of {} ever",
                grouped(*now as u64),
                grouped(*total)
            )
        })
        .unwrap_or_default();
    format!(
        "progress: {} · {elapsed_secs:.0} s{busiest}",
        describe(f, rate)
    )
}

/// `n` with a comma every three digits, as people read large counts.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> ProgressFigures {
        ProgressFigures {
            finished: 12_345,
            failures: 0,
            queued: 3_210,
            in_flight: 8,
            seen_full: 0.031,
            busiest: None,
        }
    }

    #[test]
    fn a_line_says_known_work_and_plain_words() {
        assert_eq!(
            line(&figures(), 409.6, 42.4),
            "progress: 12,345 done, 3,210 queued, 8 in flight · 410 pages/s · seen-set 3.1% full · 42 s"
        );
    }

    #[test]
    fn failures_and_the_busiest_host_are_said_when_there_are_some() {
        let mut f = figures();
        f.failures = 1;
        f.seen_full = 0.25;
        f.busiest = Some(("http://h2.test".into(), 32, 1_225));
        assert_eq!(
            line(&f, 0.0, 7.0),
            "progress: 12,345 done, 3,210 queued, 8 in flight · 0 pages/s · 1 failure · seen-set 25% full · 7 s; busiest host http://h2.test: 32 queued of 1,225 ever"
        );
        f.failures = 2_000;
        assert!(describe(&f, 0.0).contains(" · 2,000 failures · "));
    }

    #[test]
    fn a_resumed_run_rates_its_own_pages_only() {
        let mut progress = Progress::start(ProgressMode::Quiet, Duration::from_secs(1), 5_000);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            progress.rate_now(5_000),
            0.0,
            "earlier runs' pages are not this run's"
        );
        assert!(progress.rate_now(5_010) > 0.0);
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
