//! Link extraction micro-benchmark: the streaming extractor (`crawler::extract`, lol_html)
//! against the scraper reference, on a synthetic ~16 KB page with 80 links.
//!
//! Run: `cargo bench --bench extract` (release profile, fat LTO). Prints the median, p10 and
//! p90 of per-page *thread CPU time* for each extractor (the machine is shared: wall time
//! would count time spent waiting for a core), measured interleaved in one run so that cache
//! and frequency noise hits all alike. `EXTRACT_BENCH_ROUNDS` sets the number of pages.
//! The extractor is timed with and without the near-duplicate digest
//! (`ExtractOptions::digest`, what the crawl runs), and the digest's share of the
//! extractor's CPU is printed: it must stay under 3% of parse CPU. The extractor (lol_html
//! and resolving the links) is the larger part of a page's parse; the crawl's parse threads
//! also normalize and screen the links, so the share of their CPU is lower than printed.

#[path = "../tests/extract_support/mod.rs"]
mod extract_support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use crawler::extract::{extract_links, ExtractOptions};
use url::Url;

/// A documentation-like page: head with meta, style and script, a nav, paragraphs of text,
/// 80 links of several shapes (relative, absolute, entities, nofollow), ~16 KB.
fn page(links: usize, target_bytes: usize) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Module docs &mdash; example</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"stylesheet\" href=\"/static/main.css\">\
         <style>body{font-family:sans-serif} a[href^=\"http\"]{color:#06c} .nav li{display:inline}</style>\
         <script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}\
         if (a < b && c > d) { document.title = '<a href=\"/not-a-link\">'; }</script>\
         </head><body><header class=\"top\"><nav class=\"nav\"><ul>",
    );
    let mut n = 0;
    let link = |html: &mut String, n: &mut usize| {
        let i = *n;
        *n += 1;
        let tag = match i % 8 {
            0 => format!("<a href=\"/docs/section-{}/page-{i}.html\" class=\"ref\">Page {i}</a>", i % 7),
            1 => format!("<a href=\"../guide/chapter{i}.html#sec-{i}\" title=\"Chapter {i}\">chapter {i}</a>"),
            2 => format!("<a href=\"https://other{}.example.org/path/{i}?a=1&amp;b={i}\">external</a>", i % 5),
            3 => format!("<a class=\"x\" href='item_{i}.html'>item&nbsp;{i}</a>"),
            4 => format!("<a href=\"/search?q=term{i}&amp;page=2&amp;sort=asc\" rel=\"nofollow\">search</a>"),
            5 => format!("<a href=\"#anchor-{i}\">#{i}</a>"),
            6 => format!("<a href=\"/api/v1/struct.Thing{i}.html#method.new\"><code>Thing{i}::new</code></a>"),
            _ => format!("<a href=\"//cdn.example.net/assets/img{i}.png\"><img src=\"/thumb/{i}.png\" alt=\"img {i}\"></a>"),
        };
        html.push_str(&tag);
    };
    for _ in 0..8 {
        html.push_str("<li>");
        link(&mut html, &mut n);
        html.push_str("</li>");
    }
    html.push_str("</ul></nav></header><main><h1 id=\"title\">Module <code>example</code></h1>");
    let text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do. ";
    let paragraphs = 36;
    let per_paragraph = (links - 8) / paragraphs;
    for p in 0..paragraphs {
        html.push_str(&format!(
            "<section id=\"s{p}\"><h2>Section {p}</h2><p class=\"docblock\">"
        ));
        for _ in 0..per_paragraph {
            html.push_str(text);
            link(&mut html, &mut n);
            html.push(' ');
        }
        html.push_str(
            "</p><pre><code>let x = vec![1, 2, 3]; // &lt;not a tag&gt;</code></pre></section>",
        );
    }
    while n < links {
        link(&mut html, &mut n);
    }
    html.push_str("<!-- <a href=\"/commented-out\"> --></main><footer>");
    while html.len() < target_bytes.saturating_sub(40) {
        html.push_str("<span class=\"pad\">footer text</span> ");
    }
    html.push_str("</footer></body></html>\n");
    html
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    Duration::from_nanos(crawler::cpu_time::thread_cpu_ns())
}

fn time<T>(samples: &mut Vec<Duration>, f: impl FnOnce() -> T) {
    let t = thread_cpu();
    black_box(f());
    samples.push(thread_cpu().saturating_sub(t));
}

/// lol_html alone, with the extractor's selectors and handlers that do nothing: the floor
/// under any lol_html-based extractor.
fn bare_lol_html(html: &[u8]) -> bool {
    use lol_html::{element, HtmlRewriter, Settings};
    let noop = |_el: &mut lol_html::html_content::Element<'_, '_>| Ok(());
    let settings = Settings::new()
        .with_strict(false)
        .append_element_content_handler(element!("a[href]", noop))
        .append_element_content_handler(element!("area[href]", noop))
        .append_element_content_handler(element!("iframe[src]", noop))
        .append_element_content_handler(element!("frameset", noop))
        .append_element_content_handler(element!("frame[src]", noop))
        .append_element_content_handler(element!("base[href]", noop))
        .append_element_content_handler(element!("meta[name]", noop));
    let mut rw = HtmlRewriter::new(settings, |_: &[u8]| {});
    rw.write(html).is_ok() && rw.end().is_ok()
}

fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.1), at(0.9))
}

fn main() {
    let html = page(80, 16 * 1024);
    let url = Url::parse("https://docs.example.test/crate/module/index.html").expect("static URL");
    let opts = ExtractOptions::default();
    let fast = extract_links(html.as_bytes(), &url, None, &opts);
    let reference = extract_support::reference_extract(html.as_bytes(), &url, None, &opts);
    extract_support::compare(&fast, &reference).expect("bench page: extractors disagree");
    let plain_scraper = || {
        let doc = scraper::Html::parse_document(&html);
        let sel = scraper::Selector::parse("a[href]").expect("static selector");
        doc.select(&sel)
            .filter_map(|a| a.value().attr("href").and_then(|h| url.join(h).ok()))
            .count()
    };
    println!(
        "page: {} bytes, {} links found + {} nofollow skipped (scraper a[href]: {})",
        html.len(),
        fast.links.len(),
        fast.nofollow_skipped,
        plain_scraper()
    );

    let rounds: usize = std::env::var("EXTRACT_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let (mut t_fast, mut t_ref, mut t_plain, mut t_bare) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if std::env::var_os("EXTRACT_BENCH_PROFILE").is_some() {
        // Only the fast extractor, for `perf record`.
        for _ in 0..rounds {
            black_box(extract_links(black_box(html.as_bytes()), &url, None, &opts));
        }
        return;
    }
    let hrefs: Vec<String> = {
        let doc = scraper::Html::parse_document(&html);
        let sel = scraper::Selector::parse("a[href]").expect("static selector");
        doc.select(&sel)
            .filter_map(|a| a.value().attr("href").map(str::to_owned))
            .collect()
    };
    let mut t_join = Vec::new();
    let mut t_empty = Vec::new();
    let mut t_digest = Vec::new();
    let mut t_digest_alone = Vec::new();
    let with_digest = ExtractOptions {
        digest: true,
        ..opts.clone()
    };
    let wall = Instant::now();
    for round in 0..rounds {
        // Alternated, so that neither always runs right after the scraper's cache sweep.
        let mut without = || {
            time(&mut t_fast, || {
                extract_links(black_box(html.as_bytes()), &url, None, &opts)
            })
        };
        let mut with = || {
            time(&mut t_digest, || {
                extract_links(black_box(html.as_bytes()), &url, None, &with_digest)
            })
        };
        if round % 2 == 0 {
            without();
            with();
        } else {
            with();
            without();
        }
        time(&mut t_digest_alone, || {
            let mut digest = crawler::near_duplicate::DigitlessDigest::default();
            digest.update(black_box(html.as_bytes()));
            digest.finish()
        });
        time(&mut t_bare, || bare_lol_html(black_box(html.as_bytes())));
        time(&mut t_empty, || {
            extract_links(black_box(b"<p>"), &url, None, &opts)
        });
        time(&mut t_join, || {
            hrefs
                .iter()
                .filter_map(|h| url.join(black_box(h)).ok())
                .collect::<Vec<_>>()
        });
        time(&mut t_plain, plain_scraper);
        time(&mut t_ref, || {
            extract_support::reference_extract(html.as_bytes(), &url, None, &opts)
        });
    }
    println!(
        "{rounds} rounds in {:.1} s wall",
        wall.elapsed().as_secs_f64()
    );
    let (without, _, _) = stats(t_fast.clone());
    let (with, _, _) = stats(t_digest.clone());
    let (alone, _, _) = stats(t_digest_alone.clone());
    let mb_s = |us: f64| html.len() as f64 / us;
    println!(
        "near-duplicate digest: extractor {:.1} MB/s without, {:.1} MB/s with (difference \
         {:.1}%); the digest alone {:.2} µs/page ({:.0} MB/s) = {:.1}% of the extractor's CPU",
        mb_s(without),
        mb_s(with),
        (with - without) / without * 100.0,
        alone,
        mb_s(alone),
        alone / without * 100.0
    );
    for (name, samples) in [
        ("lol_html extractor (extract_links)", t_fast),
        ("extract_links with the digest", t_digest),
        ("the digest alone (DigitlessDigest)", t_digest_alone),
        ("lol_html alone, same selectors, no-op", t_bare),
        ("Url::join of the page's 80 hrefs", t_join),
        ("extract_links on \"<p>\" (fixed cost)", t_empty),
        ("scraper parse + a[href] + join", t_plain),
        ("scraper reference_extract", t_ref),
    ] {
        let (median, p10, p90) = stats(samples);
        println!("{name:38} median {median:7.1} µs/page  (p10 {p10:.1}, p90 {p90:.1})");
    }
}
