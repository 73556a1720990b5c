//! The seed list: one URL per line, `#` comments and blank lines allowed.
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
    pub(crate) reason: Rejected,
}

impl std::fmt::Display for BadSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: String = self.text.chars().take(120).collect();
        let what = match self.reason {
            Rejected::Scheme => "not an http(s) URL",
            Rejected::Unparsable => "not a URL",
            Rejected::NoHost => "URL has no host",
            Rejected::Credentials => "URL has credentials (user:password@); remove them",
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
        let line = raw.trim().trim_start_matches('\u{feff}');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match normalizer.normalize_str(line) {
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
