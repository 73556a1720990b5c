//! `/`: the status page. One HTML document with its CSS inline and its charts as SVG drawn
//! here, from the same [`Status`] as `/status.json`: nothing is loaded from elsewhere, no
//! script runs, and `<meta http-equiv="refresh">` reloads it every [`REFRESH_SECS`] s.
//!
//! The figures a program may want to read back from the rendered page carry ids and
//! `data-` attributes: `#pages-per-sec[data-value]` (the same number as `/status.json`'s
//! `pages_per_sec`), `#top-host[data-host]` (its `top_hosts[0].host`), and
//! `body[data-sample]` (its `sample`, which tells two readings of the same second apart).

use std::fmt::Write as _;

use super::status::HostFigures;
use super::Status;
use crate::quantity::HumanBytes;

/// Seconds between reloads of the page.
const REFRESH_SECS: u32 = 2;

const STYLE: &str = r#"
:root { --bg:#f3f5f9; --card:#fff; --ink:#1f2733; --mute:#687385; --line:#e3e7ee;
        --blue:#2563eb; --red:#dc2626; --green:#16a34a; --amber:#d97706; --gray:#6b7280; }
* { box-sizing:border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;
       background:var(--bg); color:var(--ink); }
header { display:flex; align-items:baseline; gap:14px; flex-wrap:wrap; padding:16px 24px;
         background:#111827; color:#f9fafb; }
header h1 { margin:0; font-size:20px; font-weight:650; letter-spacing:.2px; }
header .meta { color:#cbd5e1; font-size:13px; }
.badge { padding:2px 10px; border-radius:999px; font-size:12px; font-weight:600; text-transform:uppercase; letter-spacing:.5px; }
.running { background:#16a34a; color:#fff; } .finished { background:#2563eb; color:#fff; } .stopped { background:#d97706; color:#fff; }
main { padding:18px 24px 28px; display:grid; gap:16px; max-width:1280px; }
.figures { display:grid; grid-template-columns:repeat(auto-fit,minmax(150px,1fr)); gap:12px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 16px; box-shadow:0 1px 2px rgba(16,24,40,.04); }
.figure .label { color:var(--mute); font-size:12px; text-transform:uppercase; letter-spacing:.5px; }
.figure .value { font-size:26px; font-weight:650; font-variant-numeric:tabular-nums; margin-top:2px; }
.figure .sub { color:var(--mute); font-size:12px; }
.figure.main .value { color:var(--blue); font-size:32px; }
.figure.bad .value { color:var(--red); }
.grid2 { display:grid; grid-template-columns:repeat(auto-fit,minmax(420px,1fr)); gap:16px; }
.grid3 { display:grid; grid-template-columns:repeat(auto-fit,minmax(300px,1fr)); gap:16px; }
h2 { margin:0 0 10px; font-size:13px; color:var(--mute); text-transform:uppercase; letter-spacing:.6px; font-weight:600; }
svg { display:block; width:100%; height:auto; }
svg text { font:11px system-ui,sans-serif; fill:var(--mute); }
.stack { display:flex; height:14px; border-radius:7px; overflow:hidden; background:var(--line); margin:4px 0 12px; }
.legend { display:grid; grid-template-columns:auto 1fr auto; gap:4px 10px; align-items:center; }
.dot { width:10px; height:10px; border-radius:3px; display:inline-block; }
.num { text-align:right; font-variant-numeric:tabular-nums; }
dl { display:grid; grid-template-columns:1fr auto; gap:5px 12px; margin:0; }
dt { color:var(--mute); } dd { margin:0; text-align:right; font-variant-numeric:tabular-nums; font-weight:550; }
.bar { height:6px; background:var(--line); border-radius:3px; overflow:hidden; grid-column:1 / -1; }
.bar span { display:block; height:100%; background:var(--blue); }
table { width:100%; border-collapse:collapse; }
th { text-align:left; color:var(--mute); font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.4px; padding:6px 8px; border-bottom:1px solid var(--line); }
td { padding:6px 8px; border-bottom:1px solid var(--line); font-variant-numeric:tabular-nums; }
tr:last-child td { border-bottom:none; }
td.host { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:13px; overflow-wrap:anywhere; }
th, td.num { white-space:nowrap; }
th.num { text-align:right; }
.tag { font-size:11px; padding:1px 7px; border-radius:999px; background:var(--line); color:var(--ink); }
.tag.unavailable { background:#fee2e2; color:#991b1b; } .tag.ready { background:#dcfce7; color:#166534; }
.tag.fetching { background:#dbeafe; color:#1e40af; }
.empty { color:var(--mute); font-style:italic; }
footer { padding:0 24px 24px; color:var(--mute); font-size:12px; }
a { color:var(--blue); }
"#;

/// The page for `status`.
pub(crate) fn render(status: &Status) -> String {
    let mut html = String::with_capacity(24 * 1024);
    let c = &status.counters;
    let state = status.state;
    let _ = write!(
        html,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_SECS}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>crawler · {pages} pages/s · {state}</title>
<style>{STYLE}</style></head>
<body data-sample="{sample}" data-state="{state}">
<header><h1>crawler</h1><span class="badge {state}" id="state">{state}</span>
<span class="meta">started {started} · {elapsed} elapsed · refreshes every {REFRESH_SECS} s</span></header>
<main>
"#,
        pages = one_decimal(status.pages_per_sec),
        sample = status.sample,
        started = escape(&status.started_at),
        elapsed = duration(status.elapsed_secs),
    );

    // The figures first: what someone glancing at the page wants.
    html.push_str(r#"<section class="figures">"#);
    let _ = write!(
        html,
        r#"<div class="card figure main"><div class="label">pages / s</div><div class="value" id="pages-per-sec" data-value="{raw}">{shown}</div><div class="sub">last 5 s</div></div>"#,
        raw = status.pages_per_sec,
        shown = one_decimal(status.pages_per_sec),
    );
    let done_share = if status.max_urls > 0 {
        format!(
            "{:.1}% of {} max",
            100.0 * c.finished as f64 / status.max_urls as f64,
            count(status.max_urls)
        )
    } else {
        String::new()
    };
    figure(
        &mut html,
        "done",
        &count(c.finished),
        &done_share,
        "urls-finished",
        false,
    );
    figure(
        &mut html,
        "accepted",
        &count(c.accepted),
        "URLs taken on",
        "urls-accepted",
        false,
    );
    figure(
        &mut html,
        "queued",
        &count(status.frontier.queued),
        &format!("{} in flight", count(status.frontier.in_flight)),
        "urls-queued",
        false,
    );
    figure(
        &mut html,
        "hosts",
        &count(status.frontier.hosts),
        &format!("{} with URLs queued", count(status.frontier.hosts_queued)),
        "hosts",
        false,
    );
    figure(
        &mut html,
        "errors / s",
        &one_decimal(status.errors_per_sec),
        &format!("failures so far: {}", count(status.failures)),
        "errors-per-sec",
        status.errors_per_sec > 0.0,
    );
    figure(
        &mut html,
        "received",
        &HumanBytes(c.bytes).to_string(),
        "response bodies",
        "bytes",
        false,
    );
    html.push_str("</section>\n");

    // The charts.
    let pages: Vec<(f64, f64)> = status
        .history
        .iter()
        .map(|p| (p.t, p.pages_per_sec))
        .collect();
    let errors: Vec<(f64, f64)> = status
        .history
        .iter()
        .map(|p| (p.t, p.errors_per_sec))
        .collect();
    html.push_str(r#"<section class="grid2">"#);
    chart_card(
        &mut html,
        "pages per second",
        "chart-pages",
        &pages,
        "var(--blue)",
    );
    chart_card(
        &mut html,
        "errors per second (4xx, 5xx, no response)",
        "chart-errors",
        &errors,
        "var(--red)",
    );
    html.push_str("</section>\n");

    // Status classes, frontier and seen-set, checkpoint and archive.
    html.push_str(r#"<section class="grid3">"#);
    let classes = [
        ("2xx", c.ok, "var(--green)"),
        ("3xx", c.redirects, "var(--blue)"),
        ("4xx", c.client_errors, "var(--amber)"),
        ("5xx / 429", c.server_errors, "var(--red)"),
        ("no response", c.network_errors, "var(--gray)"),
    ];
    let total: u64 = classes.iter().map(|(_, n, _)| n).sum();
    html.push_str(r#"<div class="card" id="status-classes"><h2>responses by status class</h2><div class="stack">"#);
    for (name, n, color) in classes {
        if n > 0 {
            let _ = write!(
                html,
                r#"<span title="{name}: {n}" style="width:{:.3}%;background:{color}"></span>"#,
                100.0 * n as f64 / total.max(1) as f64
            );
        }
    }
    html.push_str(r#"</div><div class="legend">"#);
    for (name, n, color) in classes {
        let share = if total > 0 {
            format!("{:.1}%", 100.0 * n as f64 / total as f64)
        } else {
            "–".into()
        };
        let _ = write!(
            html,
            r#"<span><span class="dot" style="background:{color}"></span></span><span>{name} <span class="sub" style="color:var(--mute)">{share}</span></span><span class="num">{}</span>"#,
            count(n)
        );
    }
    html.push_str("</div></div>\n");

    html.push_str(r#"<div class="card" id="frontier"><h2>frontier and seen-set</h2><dl>"#);
    let fill_pct = (status.seen.fill * 100.0).clamp(0.0, 100.0);
    for (term, value) in [
        ("URLs queued", count(status.frontier.queued)),
        ("in flight", count(status.frontier.in_flight)),
        ("hosts known", count(status.frontier.hosts)),
        ("seen-set URLs", count(status.seen.insertions)),
        ("seen-set size", HumanBytes(status.seen.bytes).to_string()),
        ("seen-set fill", format!("{fill_pct:.2}%")),
    ] {
        let _ = write!(html, "<dt>{term}</dt><dd>{value}</dd>");
    }
    let _ = write!(
        html,
        r#"<div class="bar"><span style="width:{fill_pct:.2}%"></span></div><dt>estimated false-positive rate</dt><dd>{:.2e}</dd></dl></div>"#,
        status.seen.estimated_fpp
    );
    html.push('\n');

    html.push_str(r#"<div class="card" id="checkpoint"><h2>checkpoint and archive</h2><dl>"#);
    match &status.checkpoint {
        Some(cp) => {
            let seq = cp.seq.map_or_else(|| "–".to_string(), |s| s.to_string());
            let _ = write!(
                html,
                "<dt>last checkpoint</dt><dd>#{seq}, {} ago</dd><dt>taken at</dt><dd>{}</dd>",
                duration(cp.age_secs),
                escape(&cp.at)
            );
        }
        None => html.push_str("<dt>last checkpoint</dt><dd>none yet</dd>"),
    }
    if let Some(n) = status.redis_round_trips {
        let _ = write!(html, "<dt>Redis round trips</dt><dd>{}</dd>", count(n));
    }
    let _ = write!(
        html,
        "<dt>WARC records</dt><dd>{}</dd><dt>WARC bytes</dt><dd>{}</dd><dt>revisits</dt><dd>{}</dd><dt>retries</dt><dd>{}</dd><dt>robots.txt refusals</dt><dd>{}</dd><dt>descriptor pauses</dt><dd>{}</dd></dl></div>",
        count(c.warc_records),
        HumanBytes(c.warc_bytes),
        count(c.warc_revisits),
        count(c.retries),
        count(c.disallowed),
        count(c.descriptor_pauses),
    );
    html.push_str("</section>\n");

    // The hosts.
    let busiest: Vec<&HostFigures> = status.top_hosts.iter().filter(|h| h.busiest).collect();
    let mut failing: Vec<&HostFigures> = status.top_hosts.iter().filter(|h| h.errors > 0).collect();
    failing.sort_by(|a, b| b.errors.cmp(&a.errors).then_with(|| a.host.cmp(&b.host)));
    html.push_str(r#"<section class="grid2">"#);
    host_table(
        &mut html,
        "busiest hosts (most URLs queued)",
        "busiest-hosts",
        &busiest,
        true,
    );
    host_table(&mut html, "failing hosts", "failing-hosts", &failing, false);
    html.push_str("</section>\n</main>\n");
    let _ = write!(
        html,
        r#"<footer>sample {} · machine-readable: <a href="/status.json">/status.json</a> · <a href="/metrics">/metrics</a> (Prometheus)</footer>
</body></html>
"#,
        status.sample
    );
    html
}

fn figure(html: &mut String, label: &str, value: &str, sub: &str, id: &str, bad: bool) {
    let _ = write!(
        html,
        r#"<div class="card figure{}"><div class="label">{label}</div><div class="value" id="{id}">{value}</div><div class="sub">{sub}</div></div>"#,
        if bad { " bad" } else { "" }
    );
}

fn host_table(html: &mut String, title: &str, id: &str, hosts: &[&HostFigures], mark_top: bool) {
    let _ = write!(html, r#"<div class="card" id="{id}"><h2>{title}</h2>"#);
    if hosts.is_empty() {
        html.push_str(r#"<p class="empty">none</p></div>"#);
        return;
    }
    html.push_str(r#"<table><thead><tr><th>host</th><th class="num">queued</th><th class="num">ever</th><th class="num">pages/s</th><th class="num">errors</th><th>robots.txt</th><th class="num">next</th></tr></thead><tbody>"#);
    for (i, h) in hosts.iter().enumerate() {
        let host = escape(&h.host);
        let host_cell = if mark_top && i == 0 {
            format!(r#"<td class="host" id="top-host" data-host="{host}">{host}</td>"#)
        } else {
            format!(r#"<td class="host">{host}</td>"#)
        };
        let next = h.next_allowed_in_secs.map_or_else(
            || "–".to_string(),
            |s| {
                if s <= 0.0 {
                    "now".into()
                } else {
                    format!("{s:.1} s")
                }
            },
        );
        let _ = write!(
            html,
            r#"<tr>{host_cell}<td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td><span class="tag {robots}">{robots}</span></td><td class="num">{next}</td></tr>"#,
            count(h.queued),
            count(h.queued_ever),
            one_decimal(h.pages_per_sec),
            count(h.errors),
            robots = h.robots.replace('_', " "),
        );
    }
    html.push_str("</tbody></table></div>");
}

/// A line chart of `points` (seconds since start, value) as SVG: the last five minutes,
/// a scale rounded up to a readable number, the area under the line tinted.
fn chart_card(html: &mut String, title: &str, id: &str, points: &[(f64, f64)], color: &str) {
    const W: f64 = 600.0;
    const H: f64 = 180.0;
    const LEFT: f64 = 44.0;
    const BOTTOM: f64 = 22.0;
    const TOP: f64 = 10.0;
    // The last five minutes, or less while the crawl is younger (a minute at least), so a
    // short crawl fills the chart instead of a sliver at its right.
    let now = points.last().map_or(0.0, |p| p.0);
    let first = points.first().map_or(0.0, |p| p.0);
    let span = (now - first).clamp(60.0, super::history::KEPT as f64);
    let (max, steps) = nice_ceiling(points.iter().map(|p| p.1).fold(0.0, f64::max));
    let x = |t: f64| LEFT + (W - LEFT - 8.0) * (1.0 - ((now - t) / span).clamp(0.0, 1.0));
    let y = |v: f64| TOP + (H - TOP - BOTTOM) * (1.0 - (v / max).clamp(0.0, 1.0));
    let _ = write!(
        html,
        r#"<div class="card"><h2>{title}</h2><svg id="{id}" viewBox="0 0 {W} {H}" role="img" aria-label="{title}">"#
    );
    for i in 0..=steps {
        let v = max * i as f64 / steps as f64;
        let yy = y(v);
        let _ = write!(
            html,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e3e7ee" stroke-width="1"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - 8.0,
            LEFT - 6.0,
            yy + 4.0,
            axis_label(v)
        );
    }
    for quarter in 0..=4 {
        let ago = span * (4 - quarter) as f64 / 4.0;
        let label = match ago {
            a if a < 0.5 => "now".to_string(),
            a if span > 120.0 => format!("−{:.1} min", a / 60.0).replace(".0 min", " min"),
            a => format!("−{a:.0} s"),
        };
        let anchor = match quarter {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            html,
            r#"<text x="{:.1}" y="{}" text-anchor="{anchor}">{label}</text>"#,
            x(now - ago),
            H - 6.0
        );
    }
    if points.len() >= 2 {
        let mut line = String::new();
        for (i, (t, v)) in points.iter().enumerate() {
            let _ = write!(
                line,
                "{}{:.1},{:.1}",
                if i == 0 { "M" } else { " L" },
                x(*t),
                y(*v)
            );
        }
        let base = y(0.0);
        let first = x(points[0].0);
        let last = x(now);
        let _ = write!(
            html,
            r#"<path d="{line} L{last:.1},{base:.1} L{first:.1},{base:.1} Z" fill="{color}" fill-opacity="0.12" stroke="none"/><path d="{line}" fill="none" stroke="{color}" stroke-width="2" stroke-linejoin="round"/>"#
        );
    } else {
        let _ = write!(
            html,
            r#"<text x="{}" y="{}" text-anchor="middle">collecting samples…</text>"#,
            W / 2.0,
            H / 2.0
        );
    }
    html.push_str("</svg></div>");
}

/// The chart's scale: the smallest of 1, 2, 4, 5 × 10ⁿ at or above `v` (1 for nothing
/// yet), and into how many steps it divides so that every grid line is a round number
/// (1 → 5 × 0.2, 2 → 4 × 0.5, 4 → 4 × 1, 5 → 5 × 1).
fn nice_ceiling(v: f64) -> (f64, u32) {
    if !(v.is_finite() && v > 0.0) {
        return (1.0, 5);
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [(1.0, 5), (2.0, 4), (4.0, 4), (5.0, 5), (10.0, 5)]
        .iter()
        .map(|&(m, steps)| (m * magnitude, steps))
        .find(|(c, _)| *c >= v * (1.0 - 1e-12))
        .unwrap_or((10.0 * magnitude, 5))
}

fn axis_label(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0).replace(".0k", "k")
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}").trim_end_matches('0').to_string()
    }
}

fn one_decimal(v: f64) -> String {
    format!("{v:.1}")
}

/// `12345678` as `12 345 678` (thin spaces), easier to read at a glance.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 2);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('\u{2009}');
        }
        out.push(d);
    }
    out
}

fn duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

fn escape(text: &str) -> String {
    htmlize::escape_attribute(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_round_up_to_readable_numbers() {
        assert_eq!(nice_ceiling(0.0), (1.0, 5));
        assert_eq!(nice_ceiling(7.0), (10.0, 5));
        assert_eq!(nice_ceiling(180.0), (200.0, 4));
        assert_eq!(nice_ceiling(2100.0), (4000.0, 4));
        assert_eq!(nice_ceiling(2.0), (2.0, 4));
        assert_eq!(nice_ceiling(450.0), (500.0, 5));
        assert_eq!(axis_label(0.5), "0.5");
        assert_eq!(axis_label(0.25), "0.25");
        assert_eq!(axis_label(2500.0), "2.5k");
        assert_eq!(count(1234567), "1\u{2009}234\u{2009}567");
        assert_eq!(count(999), "999");
    }

    #[test]
    fn hosts_are_escaped() {
        assert_eq!(
            escape("http://a.test/<x>\"&"),
            "http://a.test/&lt;x&gt;&quot;&amp;"
        );
    }
}
