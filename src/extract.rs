//! Placeholder link extractor (a naive `href="…"` scanner) while the streaming extractor is
//! built on its own branch; same interface. Replaced by the real extractor.

use url::Url;

#[derive(Debug, Clone, Default)]
pub struct ExtractOptions {
    pub follow_nofollow: bool,
}

#[derive(Debug, Default, Clone)]
pub struct Extracted {
    pub links: Vec<Url>,
    pub nofollow_skipped: usize,
    pub invalid: usize,
    pub meta_nofollow: bool,
    pub base: Option<Url>,
}

pub fn extract_links(
    html: &[u8],
    page_url: &Url,
    _encoding: Option<&str>,
    _opts: &ExtractOptions,
) -> Extracted {
    let text = String::from_utf8_lossy(html);
    let mut out = Extracted::default();
    for part in text.split("href=\"").skip(1) {
        if let Some(end) = part.find('"') {
            match page_url.join(&part[..end].replace("&amp;", "&")) {
                Ok(u) => out.links.push(u),
                Err(_) => out.invalid += 1,
            }
        }
    }
    out
}
