//! The seed list: one URL per line, `#` comments and blank lines allowed.
//!
//! A `#` starts a comment at the start of a line or after whitespace
//! (`https://a.test/x.html   # docs` is `https://a.test/x.html`), never inside a URL, where
//! it starts the fragment. What is left must be one URL: a line with a space inside is
//! refused rather than guessed at (the URL parser would encode it as `%20` and crawl a page
//! that does not exist).
//!
//! A bad line is reported with its file and line number and skipped, so one typo in a
//! list of a million seeds does not stop a crawl; a list with no valid seed at all is a
//! fatal error, because such a crawl could only ever do nothing. Seeds go through the
//! same normalizer as every link, so a seed spelled two ways is crawled once.

use std::path::{Path, PathBuf};

use url::Url;

use crate::normalize::{Normalizer, Rejected};

/// A seed line that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSeed {
    pub(crate) path: PathBuf,
    pub(crate) line: usize,
    pub(crate) text: String,
    pub(crate) reason: Problem,
}

/// What is wrong with a seed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Problem {
    /// The normalizer refused it.
    Rejected(Rejected),
    /// Whitespace inside the URL (a comment without its `#`, two URLs on a line).
    Space,
}

impl std::fmt::Display for BadSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: String = self.text.chars().take(120).collect();
        let what = match self.reason {
            Problem::Rejected(Rejected::Scheme) => "not an http(s) URL",
            Problem::Rejected(Rejected::Unparsable) => "not a URL",
            Problem::Rejected(Rejected::NoHost) => "URL has no host",
            Problem::Rejected(Rejected::Credentials) => {
                "URL has credentials (user:password@); remove them"
            }
            Problem::Space => {
                "a space inside the URL (write it as %20; a comment starts with \" #\")"
            }
        };
        write!(
            f,
            "{}:{}: {what}: {shown:?}; line skipped",
            self.path.display(),
            self.line
        )
    }
}

/// Why the seed list could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum SeedsError {
    #[error("{}: cannot read seeds", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: no valid seed URL ({bad} bad lines); write one http(s) URL per line")]
    Empty { path: PathBuf, bad: usize },
}

/// The usable seeds, in file order without duplicates, and the lines that were skipped.
#[derive(Debug, Default)]
pub struct Seeds {
    pub urls: Vec<Url>,
    pub bad: Vec<BadSeed>,
    pub(crate) duplicates: usize,
}

/// Reads a seed file. An empty result is not an error here, so that the caller can
/// report the bad lines first; see [`Seeds::require_some`].
pub fn read_seeds(path: &Path, normalizer: &Normalizer) -> Result<Seeds, SeedsError> {
    let bytes = std::fs::read(path).map_err(|source| SeedsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(parse_seeds(&text, path, normalizer))
}

impl Seeds {
    /// The fatal error for a list without a single usable seed.
    pub fn require_some(&self, path: &Path) -> Result<(), SeedsError> {
        if self.urls.is_empty() {
            return Err(SeedsError::Empty {
                path: path.to_path_buf(),
                bad: self.bad.len(),
            });
        }
        Ok(())
    }
}

/// Parses seed text; `path` is only used in messages.
pub(crate) fn parse_seeds(text: &str, path: &Path, normalizer: &Normalizer) -> Seeds {
    let mut seeds = Seeds::default();
    let mut seen = std::collections::HashSet::new();
    for (index, raw) in text.lines().enumerate() {
        let line = without_comment(raw.trim_start_matches('\u{feff}')).trim();
        if line.is_empty() {
            continue;
        }
        // A line with a space is refused: as a space inside a URL if it starts with one,
        // as what it is otherwise ("not a url" is not a URL).
        let first = line.split(char::is_whitespace).next().unwrap_or(line);
        let normalized = match normalizer.normalize_str(first) {
            Ok(_) if first.len() < line.len() => Err(Problem::Space),
            other => other.map_err(Problem::Rejected),
        };
        match normalized {
            Ok(url) => {
                if seen.insert(url.as_str().to_string()) {
                    seeds.urls.push(url);
                } else {
                    seeds.duplicates += 1;
                }
            }
            Err(reason) => seeds.bad.push(BadSeed {
                path: path.to_path_buf(),
                line: index + 1,
                text: line.to_string(),
                reason,
            }),
        }
    }
    seeds
}

/// `line` up to its comment: a `#` at its start or after whitespace.
fn without_comment(line: &str) -> &str {
    let mut previous_is_space = true;
    for (at, c) in line.char_indices() {
        if c == '#' && previous_is_space {
            return &line[..at];
        }
        previous_is_space = c.is_whitespace();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_blanks_bad_lines_and_duplicates() {
        let text = "# seeds\n\nhttp://a.test/\nftp://x/\nHTTP://A.test:80/\nnot a url\nhttps://b.test/x#y\n";
        let s = parse_seeds(text, Path::new("seeds.txt"), &Normalizer::default());
        let urls: Vec<&str> = s.urls.iter().map(Url::as_str).collect();
        assert_eq!(urls, ["http://a.test/", "https://b.test/x"]);
        assert_eq!(s.duplicates, 1);
        assert_eq!(s.bad.len(), 2);
        assert_eq!(
            s.bad[0].to_string(),
            "seeds.txt:4: not an http(s) URL: \"ftp://x/\"; line skipped"
        );
        assert_eq!(s.bad[1].line, 6);
    }

    #[test]
    fn a_comment_starts_after_whitespace_and_a_space_inside_a_url_is_refused() {
        let text = "https://a.test/x.html   # docs\n\
                    https://a.test/y.html\t#tabbed\n\
                    https://a.test/my page.html\n\
                    https://a.test/z.html#top # fragment, then a comment\n\
                    \u{feff}# a comment after a byte-order mark\n\
                    https://a.test/one https://a.test/two\n";
        let s = parse_seeds(text, Path::new("seeds.txt"), &Normalizer::default());
        let urls: Vec<&str> = s.urls.iter().map(Url::as_str).collect();
        assert_eq!(
            urls,
            [
                "https://a.test/x.html",
                "https://a.test/y.html",
                "https://a.test/z.html"
            ]
        );
        let bad: Vec<String> = s.bad.iter().map(ToString::to_string).collect();
        assert_eq!(
            bad,
            [
                "seeds.txt:3: a space inside the URL (write it as %20; a comment starts with \" #\"): \"https://a.test/my page.html\"; line skipped",
                "seeds.txt:6: a space inside the URL (write it as %20; a comment starts with \" #\"): \"https://a.test/one https://a.test/two\"; line skipped",
            ]
        );
    }

    #[test]
    fn no_valid_seed_is_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.txt");
        std::fs::write(&path, "# nothing\nftp://x/\n").unwrap();
        let seeds = read_seeds(&path, &Normalizer::default()).unwrap();
        let e = seeds.require_some(&path).unwrap_err().to_string();
        assert!(e.contains("no valid seed") && e.contains("1 bad"), "{e}");
        let e = read_seeds(&dir.path().join("missing.txt"), &Normalizer::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing.txt") && e.contains("cannot read"),
            "{e}"
        );
    }
}
