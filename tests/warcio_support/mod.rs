//! warcio, the webrecorder project's WARC reader, run on the archives the tests write: one
//! helper for every test that writes a WARC file (the archive, TLS and distributed
//! end-to-end tests, and the library's recovery and sealing tests, which include this file
//! with `#[path]`), so that each of them is checked by a reader that is not the crawler's.
//!
//! warcio runs from the test suite's own venv (`scripts/test-venv`: pinned versions from
//! `scripts/test-requirements.txt`, no system site packages), never from the user's Python,
//! whose packages are not ours to know: a system-wide brotli 1.2 makes warcio 1.8.1 fail on
//! every brotli-coded record. The venv's python comes from `CRAWLER_TEST_PYTHON` (set by
//! `scripts/test`), else from `target/test-venv` where `scripts/test-venv` puts it; without
//! either, the test fails saying how to make it.
//!
//! That venv holds brotli 1.2.1 on purpose, so an archive of default fetches is checked by
//! the warcio a user with brotli 1.2 has. An archive that asked for `br`
//! (`network.accept_encoding`) is checked with brotli hidden ([`Brotli::Hidden`]): warcio
//! then leaves brotli bodies coded, as it does where brotli is not installed, and still
//! verifies every digest (they are over the bytes as sent).
//!
//! `warcio test`, warcio's stricter conformance checker, is in no warcio release (1.8.1 is
//! the latest; it lives on an unmerged branch, webrecorder/warcio@fc19c7d, 2020), so the
//! suite cannot pin it. Run by hand on the archive of a crawl of the synthetic web with its
//! hostile corner and every coding, it reported no error and no warning: only a comment on
//! the page cut at `max_body_bytes` (its `Content-Length` exceeds the payload kept; the
//! record says `WARC-Truncated: length`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Whether warcio may import the venv's brotli.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Brotli {
    /// As installed in the venv (1.2.1): what a user's warcio does.
    AsInstalled,
    /// Made unimportable, as on a machine without brotli: for archives with `br` bodies.
    Hidden,
}

/// The python of the test venv: `CRAWLER_TEST_PYTHON`, else `target/test-venv/bin/python`.
pub fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("CRAWLER_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-venv/bin/python");
    assert!(
        venv.exists(),
        "warcio: no test venv at {}: run scripts/test-venv (scripts/test does), or set \
         CRAWLER_TEST_PYTHON to a python that has warcio 1.8.1",
        venv.display()
    );
    venv
}

/// Runs warcio's command line on `args` with brotli as installed; returns its output and
/// fails the test if it fails.
pub fn warcio(args: &[&str]) -> String {
    warcio_with(Brotli::AsInstalled, args)
}

/// Runs warcio's command line on `args`, brotli as `brotli` says; fails the test if it
/// fails.
pub fn warcio_with(brotli: Brotli, args: &[&str]) -> String {
    try_warcio(brotli, args).unwrap_or_else(|failure| panic!("{failure}"))
}

/// Runs warcio's command line on `args`: its output, or what it said when it failed. Fails
/// the test only when warcio cannot be run at all.
pub fn try_warcio(brotli: Brotli, args: &[&str]) -> Result<String, String> {
    let python = python();
    let output = Command::new(&python)
        .arg("-c")
        .arg(
            "import sys\n\
             if sys.argv[1] == 'hide-brotli':\n    sys.modules['brotli'] = None\n\
             from warcio.cli import main\n\
             sys.exit(main(sys.argv[2:]))",
        )
        .arg(match brotli {
            Brotli::AsInstalled => "as-installed",
            Brotli::Hidden => "hide-brotli",
        })
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("warcio: cannot run {}: {e}", python.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named 'warcio'"),
        "warcio is not installed in {}: run scripts/test-venv",
        python.display()
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!("warcio {args:?} failed: {stderr}\n{stdout}"))
    }
}

/// `warcio check -v` on each of `files`: every record read to its end and every digest
/// verified; fails the test, naming the file and what warcio said, on any failure.
/// Returns how many records of each file warcio went through.
pub fn check(files: &[PathBuf], brotli: Brotli) -> Vec<usize> {
    assert!(!files.is_empty(), "warcio check: no WARC file to check");
    files
        .iter()
        .map(|file| {
            let path = file.to_string_lossy();
            let checked = warcio_with(brotli, &["check", "-v", &path]);
            assert!(!checked.contains("fail"), "warcio check {path}: {checked}");
            checked.matches("WARC-Record-ID").count()
        })
        .collect()
}

/// The `.warc.gz` files of `dir`, sorted.
pub fn warc_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".warc.gz"))
        .collect();
    files.sort();
    files
}

/// The python of the pywb venv: `CRAWLER_TEST_PYWB_PYTHON`, else `target/pywb-venv/bin/python`
/// (`scripts/test-venv pywb` makes it; `scripts/test` does).
pub fn pywb_python() -> PathBuf {
    if let Some(path) = std::env::var_os("CRAWLER_TEST_PYWB_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pywb-venv/bin/python");
    assert!(
        venv.exists(),
        "pywb: no venv at {}: run scripts/test-venv pywb (scripts/test does), or set \
         CRAWLER_TEST_PYWB_PYTHON to a python that has pywb 2.10.0",
        venv.display()
    );
    venv
}

/// What pywb answered for one capture: the HTTP status its replay gives, the `WARC-Date` of
/// the capture it resolved (for a revisit, the revisit's own), the body it replays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    pub status: String,
    pub warc_date: String,
    pub body: Vec<u8>,
}

/// pywb's replay of `url` at each `timestamp` (14 digits, `closest=`) from a collection of
/// `files`, through pywb's warcserver (the part that resolves a capture, a revisit to its
/// original, and hands the HTTP head and payload to the rewriting front end), called as a WSGI
/// app in-process: no port is opened.
pub fn pywb_replay(files: &[PathBuf], asks: &[(String, String)]) -> Vec<Replayed> {
    const SCRIPT: &str = r#"
import base64, json, os, sys
work, files, asks = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
os.chdir(work)
from pywb.manager.manager import CollectionsManager
manager = CollectionsManager('c', must_exist=False)
manager.add_collection()
manager.add_archives(files)
from pywb.warcserver.warcserver import WarcServer
from werkzeug.test import Client
client = Client(WarcServer(config_file=None))
out = []
for timestamp, url in asks:
    response = client.get('/c/resource', query_string={'url': url, 'closest': timestamp})
    data = response.get_data()
    warc_head, _, rest = data.partition(b'\r\n\r\n')
    http_head, _, body = rest.partition(b'\r\n\r\n')
    date = [l.split(b':', 1)[1].strip().decode() for l in warc_head.split(b'\r\n') if l.lower().startswith(b'warc-date:')]
    status = http_head.split(b'\r\n', 1)[0].decode('latin-1')
    out.append({'status': '%s %s' % (response.status_code, status), 'date': date[0] if date else '', 'body': base64.b64encode(body).decode()})
print('\n' + json.dumps(out))
"#;
    let python = pywb_python();
    let work = tempfile::tempdir().expect("a temporary directory for pywb");
    let files: Vec<String> = files
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    let output = Command::new(&python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(work.path())
        .arg(serde_json::to_string(&files).unwrap())
        .arg(serde_json::to_string(asks).unwrap())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("pywb: cannot run {}: {e}", python.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "pywb replay failed: {stderr}");
    // pywb's manager says what it did on stdout: the answers are its last line.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.trim_end().lines().last().unwrap_or_default();
    let answers: Vec<serde_json::Value> =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("pywb replay: {e}: {stdout}"));
    answers
        .iter()
        .map(|a| Replayed {
            status: a["status"].as_str().unwrap_or_default().to_string(),
            warc_date: a["date"].as_str().unwrap_or_default().to_string(),
            body: data_encoding::BASE64
                .decode(a["body"].as_str().unwrap_or_default().as_bytes())
                .unwrap(),
        })
        .collect()
}
