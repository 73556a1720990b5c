//! The spelled links of the synthetic web resolve to what the generator says: every HTML page
//! is parsed with scraper (the project's reference DOM parser), its links resolved by the
//! crawler's rules (first `<base href>`, `Url::join`, fragment dropped, only http), and the
//! result must equal `Web::links_of` link for link, nofollow flags included.

use scraper::{Html, Selector};
use testweb::{ExpectedLink, Features, Web, WebSpec};
use url::Url;

fn extract(page_url: &str, body: &[u8]) -> Vec<ExpectedLink> {
    let doc = Html::parse_document(&String::from_utf8_lossy(body));
    let page = Url::parse(page_url).expect("page URL");
    let base_sel = Selector::parse("base[href]").expect("selector");
    let base = doc
        .select(&base_sel)
        .next()
        .and_then(|b| b.value().attr("href"))
        .and_then(|h| page.join(h).ok())
        .unwrap_or(page);
    let sel = Selector::parse("a[href], area[href], frame[src], iframe[src]").expect("selector");
    let mut out = Vec::new();
    for el in doc.select(&sel) {
        let v = el.value();
        let Some(raw) = v.attr("href").or_else(|| v.attr("src")) else {
            continue;
        };
        let Ok(mut url) = base.join(raw) else {
            continue;
        };
        if url.scheme() != "http" && url.scheme() != "https" {
            continue;
        }
        url.set_fragment(None);
        let nofollow = v.attr("rel").is_some_and(|rel| {
            rel.split_ascii_whitespace()
                .any(|t| t.eq_ignore_ascii_case("nofollow"))
        });
        out.push(ExpectedLink {
            url: url.to_string(),
            nofollow,
        });
    }
    out
}

fn check_web(web: &Web) -> usize {
    let mut urls = web.tree_urls();
    urls.extend(
        web.special_pages()
            .into_iter()
            .map(|(u, _)| u)
            .filter(|u| !u.ends_with("/big/page") && !u.ends_with("/too-slow")),
    );
    urls.push("http://h1.test/calendar/2026/11".into());
    urls.push("http://h1.test/calendar/1/01".into());
    let mut checked = 0;
    for url in &urls {
        let Some(page) = web.render(url, 1) else {
            continue;
        };
        let expected = web.links_of(url).expect("links");
        let html = page.content_type.starts_with("text/html")
            || page.content_type.starts_with("application/xhtml+xml");
        let found = if html && (200..300).contains(&page.status) {
            extract(url, &page.body)
        } else {
            Vec::new()
        };
        assert_eq!(
            found,
            expected,
            "{url}:\n{}",
            String::from_utf8_lossy(&page.body)
        );
        checked += found.len();
    }
    checked
}

#[test]
fn variant_links_resolve_to_the_generated_targets() {
    let checked = check_web(&Web::new(WebSpec::small(1)));
    assert!(checked > 5_000, "{checked}");
}

#[test]
fn advanced_variant_links_resolve_to_the_generated_targets() {
    let mut spec = WebSpec::small(5);
    spec.features.advanced_variants = true;
    check_web(&Web::new(spec));
}

#[test]
fn plain_links_resolve_to_the_generated_targets() {
    let web = Web::new(WebSpec {
        features: Features::none(),
        ..WebSpec::small(3)
    });
    check_web(&web);
}

#[test]
fn bench_pages_resolve_to_the_generated_targets() {
    let web = Web::new(WebSpec::bench(4));
    for url in web.tree_urls().iter().step_by(401) {
        let page = web.render(url, 0).expect("page");
        assert_eq!(Some(extract(url, &page.body)), web.links_of(url), "{url}");
    }
}

/// Real-size pages hold link-like text in scripts, styles and JSON: scraper's DOM and
/// lol_html both find exactly the page's links, no more.
#[test]
fn real_size_pages_resolve_to_the_generated_targets() {
    let mut spec = WebSpec::real_size(8);
    spec.pages = 300;
    let web = Web::new(spec);
    let mut checked = 0;
    for url in web.tree_urls().iter().step_by(29) {
        let page = web.render(url, 0).expect("page");
        assert!(page.body.len() >= 8_000, "{url}: {} bytes", page.body.len());
        let expected = web.links_of(url);
        assert_eq!(Some(extract(url, &page.body)), expected, "{url}");
        assert_eq!(Some(extract_lol_html(url, &page.body)), expected, "{url}");
        checked += 1;
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn non_html_bodies_mention_links_that_are_not_links() {
    let web = Web::new(WebSpec::small(1));
    for path in ["/files/image.png", "/files/doc.pdf", "/files/notes.txt"] {
        let url = web.special_url(path).expect("special page");
        let page = web.render(&url, 0).expect("page");
        assert!(!page.content_type.starts_with("text/html"));
        assert!(String::from_utf8_lossy(&page.body).contains("/files/hidden"));
        assert_eq!(web.links_of(&url), Some(Vec::new()));
    }
}

/// The crawler's hot path streams with lol_html: the web must not trip it (no parsing
/// ambiguity errors) and lol_html with entity decoding must see the same links.
fn extract_lol_html(page_url: &str, body: &[u8]) -> Vec<ExpectedLink> {
    use lol_html::{element, HtmlRewriter, Settings};
    use std::cell::RefCell;
    let base: RefCell<Option<String>> = RefCell::new(None);
    let raw: RefCell<Vec<(String, bool)>> = RefCell::new(Vec::new());
    let nofollow = |rel: Option<String>| {
        rel.is_some_and(|rel| {
            htmlize::unescape_attribute(rel)
                .split_ascii_whitespace()
                .any(|t| t.eq_ignore_ascii_case("nofollow"))
        })
    };
    let settings = Settings::new()
        .append_element_content_handler(element!("base[href]", |el| {
            let mut base = base.borrow_mut();
            if base.is_none() {
                *base = el.get_attribute("href");
            }
            Ok(())
        }))
        .append_element_content_handler(element!("a[href], area[href]", |el| {
            if let Some(v) = el.get_attribute("href") {
                raw.borrow_mut()
                    .push((v, nofollow(el.get_attribute("rel"))));
            }
            Ok(())
        }))
        .append_element_content_handler(element!("frame[src], iframe[src]", |el| {
            if let Some(v) = el.get_attribute("src") {
                raw.borrow_mut()
                    .push((v, nofollow(el.get_attribute("rel"))));
            }
            Ok(())
        }));
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    rewriter.write(body).expect("lol_html parses the page");
    rewriter.end().expect("lol_html ends the page");
    let page = Url::parse(page_url).expect("page URL");
    let base = base
        .into_inner()
        .and_then(|b| page.join(&htmlize::unescape_attribute(b)).ok())
        .unwrap_or(page);
    raw.into_inner()
        .into_iter()
        .filter_map(|(v, nofollow)| {
            let mut url = base.join(&htmlize::unescape_attribute(v)).ok()?;
            url.set_fragment(None);
            (url.scheme() == "http").then(|| ExpectedLink {
                url: url.to_string(),
                nofollow,
            })
        })
        .collect()
}

#[test]
fn lol_html_sees_the_same_links() {
    let mut spec = WebSpec::small(6);
    spec.features.advanced_variants = true;
    spec.features.meta_robots = true;
    let web = Web::new(spec);
    let mut urls = web.tree_urls();
    urls.extend(
        web.special_pages()
            .into_iter()
            .map(|(u, _)| u)
            .filter(|u| !u.ends_with("/big/page")),
    );
    for url in &urls {
        let Some(page) = web.render(url, 1) else {
            continue;
        };
        let html = page.content_type.starts_with("text/html")
            || page.content_type.starts_with("application/xhtml+xml");
        if !html || page.status != 200 {
            continue;
        }
        assert_eq!(
            Some(extract_lol_html(url, &page.body)),
            web.links_of(url),
            "{url}"
        );
    }
}
