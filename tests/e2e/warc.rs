//! The archive (`[output] warc = true`) checked by readers that are not the crawler's: warcio
//! (`warcio check -v`, `warcio index`; from the test venv, see `warcio_support`) and the
//! `warc` crate, which re-reads every record at the offset `pages.jsonl` gives for it. The
//! synthetic web serves gzip- and brotli-coded, chunked, truncated and non-HTML answers and
//! identical content under different URLs (`advanced_variants` with parameter stripping off),
//! and logs a hash of every body it sends: the archived payloads must be those bytes, and the
//! revisit records exactly the repeats among them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crawler::config::{ByteSize, Config};
use crawler::output::{PageRecord, RecordKind};
use crawler::ShutdownHandle;
use sha1::{Digest, Sha1};
use testweb::{fnv1a, Features, ServerOptions, TestWebServer, Web, WebSpec};

use crate::support::{config_for, crawl, records};
use crate::warcio_support::{self, try_warcio, warcio_with, Brotli};

/// The `.warc.gz` files of the crawl in `out`, sorted.
pub(crate) fn warc_files(out: &Path) -> Vec<PathBuf> {
    warcio_support::warc_files(&out.join("warc"))
}

/// What warcio makes of `files`: each one checked (`warcio check -v`: every record read,
/// every digest verified, none failing), then indexed; brotli as `brotli` says (see
/// `warcio_support`). Returns the (file name, offset) of every response and revisit record,
/// which `pages.jsonl` lines point to, and the count of records by type.
pub(crate) fn checked_index(
    files: &[PathBuf],
    brotli: Brotli,
) -> (BTreeSet<(String, u64)>, BTreeMap<String, usize>) {
    let mut indexed = BTreeSet::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    warcio_support::check(files, brotli);
    for file in files {
        let path = file.to_str().unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for line in warcio_with(brotli, &["index", "-f", "warc-type,offset", path]).lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let kind = v["warc-type"].as_str().unwrap().to_string();
            *kinds.entry(kind.clone()).or_default() += 1;
            if kind == "response" || kind == "revisit" {
                let offset: u64 = v["offset"].as_str().unwrap().parse().unwrap();
                assert!(
                    indexed.insert((name.clone(), offset)),
                    "{name} {offset} twice"
                );
            }
        }
    }
    (indexed, kinds)
}

/// One record as an independent reader (the `warc` crate) sees it.
struct ReadBack {
    kind: String,
    id: String,
    target: String,
    headers: BTreeMap<String, String>,
    block: Vec<u8>,
}

/// Reads the single record of the gzip member at `offset..offset+length` of `file`, whose
/// bytes are `bytes`.
fn read_at(file: &Path, bytes: &[u8], offset: u64, length: u64) -> ReadBack {
    let member = &bytes[offset as usize..(offset + length) as usize];
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(member)
        .read_to_end(&mut plain)
        .unwrap();
    let reader = warc::WarcReader::new(std::io::BufReader::new(&plain[..]));
    let mut records: Vec<_> = reader.iter_records().collect();
    assert_eq!(
        records.len(),
        1,
        "{}@{offset}: one record per member",
        file.display()
    );
    let record = records.remove(0).unwrap_or_else(|e| {
        panic!(
            "{}@{offset}: the warc crate cannot read it: {e}",
            file.display()
        )
    });
    let header = |name: warc::WarcHeader| {
        record
            .header(name)
            .map(|v| v.into_owned())
            .unwrap_or_default()
    };
    let mut headers = BTreeMap::new();
    for name in [
        "WARC-Block-Digest",
        "WARC-Payload-Digest",
        "WARC-Truncated",
        "WARC-Refers-To",
        "WARC-Refers-To-Target-URI",
        "WARC-Concurrent-To",
        "WARC-IP-Address",
        "Content-Type",
    ] {
        if let Some(v) = record.header(warc::WarcHeader::from(name)) {
            headers.insert(name.to_string(), v.into_owned());
        }
    }
    ReadBack {
        kind: record.warc_type().to_string(),
        id: record.warc_id().to_string(),
        target: header(warc::WarcHeader::TargetURI),
        headers,
        block: record.body().to_vec(),
    }
}

fn sha1_label(bytes: &[u8]) -> String {
    let digest: [u8; 20] = Sha1::digest(bytes).into();
    format!("sha1:{}", data_encoding::BASE32.encode(&digest))
}

/// Splits an HTTP response block into its head (lowercased header lines) and body.
fn split_http(block: &[u8]) -> (Vec<String>, &[u8]) {
    let end = block
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP head");
    let head = String::from_utf8_lossy(&block[..end])
        .split("\r\n")
        .map(|l| l.to_ascii_lowercase())
        .collect();
    (head, &block[end + 4..])
}

fn archive_web() -> (Arc<Web>, TestWebServer) {
    let features = Features {
        advanced_variants: true,
        ..Features::all()
    };
    let web = Arc::new(Web::new(WebSpec {
        features,
        ..WebSpec::small(11)
    }));
    let server = encoding_server(&web);
    (web, server)
}

/// The synthetic web served with gzip/br-coded and chunked answers.
fn encoding_server(web: &Arc<Web>) -> TestWebServer {
    TestWebServer::start_with(
        web.clone(),
        ServerOptions {
            encodings: true,
            ..ServerOptions::default()
        },
    )
    .unwrap()
}

fn archive_config(server: &TestWebServer, out: &Path) -> Config {
    let mut config = config_for(server, out, true);
    config.output.warc = true;
    // Small files, to see rotation; a small body cap, to see truncation (the big page).
    config.output.warc_max_bytes = ByteSize(128 << 10);
    config.crawl.max_body_bytes = ByteSize(256 << 10);
    // The tracking-parameter spellings of `advanced_variants` stay URLs of their own: the
    // same bytes under several URLs, which the archive must write once.
    config.normalize.strip_params = Vec::new();
    // Every coding the crawler decodes, `br` (opt-in) too: the archive keeps each as sent.
    config.network.accept_encoding = vec!["gzip".into(), "deflate".into(), "br".into()];
    config
}

#[test]
fn the_archive_is_valid_warc_that_agrees_with_pages_jsonl_and_the_server() {
    let _load = crate::support::ordinary();
    let (web, server) = archive_web();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let config = archive_config(&server, &out);
    let summary = crawl(&config, &web.seeds(), ShutdownHandle::new());
    let log = server.log();
    server.shutdown();
    let files = warc_files(&out);
    assert!(files.len() >= 2, "128 KiB files rotate: {files:?}");

    // 1. warcio checks every digest of every record, and indexes exactly what
    //    pages.jsonl lists.
    // `br` bodies: checked by warcio as where brotli is not installed (see warcio_support).
    let (indexed, kinds) = checked_index(&files, Brotli::Hidden);
    assert_eq!(
        kinds["warcinfo"],
        files.len(),
        "one warcinfo per file: {kinds:?}"
    );
    let pages = records(&out);
    let archived: Vec<&PageRecord> = pages.iter().filter(|r| r.warc.is_some()).collect();
    let listed: BTreeSet<(String, u64)> = archived
        .iter()
        .map(|r| {
            let w = r.warc.as_ref().unwrap();
            (w.file.clone(), w.offset)
        })
        .collect();
    assert_eq!(listed.len(), archived.len(), "one record per line");
    assert_eq!(
        indexed, listed,
        "warcio's responses and revisits = pages.jsonl's"
    );
    assert_eq!(kinds["request"], archived.len(), "a request per response");
    // Every line with a response from the server is archived; the others had none.
    for r in &pages {
        assert_eq!(r.warc.is_some(), r.status.is_some(), "{}", r.url);
    }

    // 2. An independent reader at each indexed offset: the record is the line's, its
    //    payload is the bytes the server sent, and its digests are right.
    let sent: HashMap<String, Vec<&testweb::RequestRecord>> =
        log.iter().fold(HashMap::new(), |mut by_url, r| {
            by_url.entry(r.url()).or_default().push(r);
            by_url
        });
    let (mut gzip, mut br, mut chunked, mut truncated, mut non_html) = (0, 0, 0, 0, 0);
    let mut originals: HashMap<String, String> = HashMap::new();
    let mut file_bytes: HashMap<String, Vec<u8>> = HashMap::new();
    for r in &archived {
        let w = r.warc.as_ref().unwrap();
        let path = out.join("warc").join(&w.file);
        let bytes = file_bytes
            .entry(w.file.clone())
            .or_insert_with(|| std::fs::read(&path).unwrap());
        let record = read_at(&path, bytes, w.offset, w.length);
        assert_eq!(record.kind, w.record, "{}", r.url);
        assert_eq!(record.id, w.id);
        assert_eq!(record.target, r.url);
        assert_eq!(
            record.headers["WARC-Payload-Digest"],
            *r.payload_digest.as_ref().unwrap()
        );
        assert_eq!(
            record.headers["WARC-Block-Digest"],
            sha1_label(&record.block)
        );
        assert!(record.headers["WARC-IP-Address"].starts_with("127.0.0.1"));
        let (head, body) = split_http(&record.block);
        assert!(head[0].starts_with("http/1.1 "), "{}", head[0]);
        assert!(
            !head.iter().any(|h| h.starts_with("transfer-encoding:")),
            "{}: Transfer-Encoding must be renamed",
            r.url
        );
        if w.record == "revisit" {
            assert!(body.is_empty(), "a revisit keeps the head only");
            let original = &originals[r.payload_digest.as_ref().unwrap()];
            assert_eq!(record.headers["WARC-Refers-To"], *original);
            continue;
        }
        originals.insert(r.payload_digest.clone().unwrap(), w.id.clone());
        assert_eq!(sha1_label(body), *r.payload_digest.as_ref().unwrap());
        assert_eq!(
            record.headers.contains_key("WARC-Truncated"),
            r.truncated,
            "{}",
            r.url
        );
        gzip += head.iter().any(|h| h == "content-encoding: gzip") as usize;
        br += head.iter().any(|h| h == "content-encoding: br") as usize;
        chunked += head
            .iter()
            .any(|h| h == "x-crawler-transfer-encoding: chunked") as usize;
        truncated += r.truncated as usize;
        non_html += r
            .content_type
            .as_deref()
            .is_some_and(|t| !t.contains("html")) as usize;
        // The bytes as received: what the server logged sending (its last answer to this
        // URL, for pages retried), for every whole-buffer answer.
        // (robots.txt may have been fetched several times, each archived: one of them).
        let answers = &sent[&r.url];
        if r.kind == RecordKind::Robots {
            assert!(
                answers.iter().any(|s| s.body_hash == Some(fnv1a(body))),
                "{}: the payload is not what was sent",
                r.url
            );
        } else if let Some(hash) = answers.last().and_then(|s| s.body_hash) {
            assert_eq!(
                fnv1a(body),
                hash,
                "{}: the payload is not what was sent",
                r.url
            );
        }
    }
    eprintln!(
        "{} fetches archived: {gzip} gzip, {br} br, {chunked} chunked, {truncated} truncated, {non_html} not HTML",
        archived.len()
    );
    assert!(
        gzip > 10 && br > 10 && chunked > 10,
        "{gzip} gzip, {br} br, {chunked} chunked"
    );
    assert!(truncated >= 1, "the big page is cut at max_body_bytes");
    assert!(non_html >= 3, "images, PDFs, text: {non_html}");

    // 3. Revisits: exactly the repeats among the bodies the server sent for the archived
    //    fetches (each page's final answer; every robots.txt answer).
    let mut fetched_bodies: Vec<u64> = Vec::new();
    for r in &archived {
        let answers = &sent[&r.url];
        match r.kind {
            RecordKind::Robots => {}
            RecordKind::Page => fetched_bodies.extend(answers.last().and_then(|s| s.body_hash)),
        }
    }
    let robots_urls: BTreeSet<&str> = archived
        .iter()
        .filter(|r| r.kind == RecordKind::Robots)
        .map(|r| r.url.as_str())
        .collect();
    for url in robots_urls {
        fetched_bodies.extend(sent[url].iter().filter_map(|s| s.body_hash));
    }
    let distinct: BTreeSet<u64> = fetched_bodies.iter().copied().collect();
    let streamed = archived.len() - fetched_bodies.len();
    let expected_revisits = archived.len() - distinct.len() - streamed;
    let revisits = archived
        .iter()
        .filter(|r| r.warc.as_ref().unwrap().record == "revisit")
        .count();
    eprintln!("{revisits} revisits; {expected_revisits} repeats among the bodies sent");
    assert!(
        expected_revisits >= 20,
        "the web repeats content: {expected_revisits}"
    );
    assert_eq!(revisits, expected_revisits);
    assert_eq!(summary.counts.warc_revisits, revisits as u64);
    assert_eq!(summary.counts.warc_records, 2 * archived.len() as u64);

    // 4. `crawler index` writes a CDXJ line per response and revisit, at their offsets.
    let index = Command::new(env!("CARGO_BIN_EXE_crawler"))
        .arg("index")
        .args(&files)
        .output()
        .unwrap();
    assert!(
        index.status.success(),
        "{}",
        String::from_utf8_lossy(&index.stderr)
    );
    let mut cdxj: BTreeSet<(String, u64)> = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(format!("{}.cdxj", file.display())).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut sorted = lines.clone();
        sorted.sort();
        assert_eq!(lines, sorted, "CDXJ is sorted");
        for line in lines {
            let json = &line[line.find('{').unwrap()..];
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            cdxj.insert((
                v["filename"].as_str().unwrap().to_string(),
                v["offset"].as_str().unwrap().parse().unwrap(),
            ));
        }
    }
    assert_eq!(cdxj, listed);
}

/// `network.accept_encoding` is what the server is offered and what it answers in. By
/// default `gzip, deflate`: a web that sends brotli to whoever offers it sends none, and the
/// archive passes the warcio of a user with brotli 1.2.1 (the test venv's), which fails on
/// every `br` record, as the same crawl with `br` offered shows.
#[test]
fn accept_encoding_follows_the_config_and_br_is_used_only_when_asked() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(12)));
    for offer in [None, Some(vec!["br", "gzip"])] {
        let server = encoding_server(&web);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut config = config_for(&server, &out, true);
        config.output.warc = true;
        let header = match &offer {
            None => "gzip, deflate",
            Some(codings) => {
                config.network.accept_encoding = codings.iter().map(|c| c.to_string()).collect();
                "br, gzip"
            }
        };
        let summary = crawl(&config, &web.seeds(), ShutdownHandle::new());
        assert!(
            summary.counts.finished > 50,
            "{header}: {:?}",
            summary.counts
        );
        let log = server.log();
        server.shutdown();
        for request in &log {
            assert_eq!(
                request.accept_encoding.as_deref(),
                Some(header),
                "{}",
                request.url()
            );
        }
        let sent = |coding| {
            log.iter()
                .filter(|r| r.content_coding == Some(coding))
                .count()
        };
        let (gzip, br) = (sent("gzip"), sent("br"));
        eprintln!("offered {header:?}: {gzip} gzip, {br} br answers");
        assert!(gzip > 10, "{header}: {gzip} gzip");
        let files = warc_files(&out);
        // The archived request says what was sent.
        let mut archive = Vec::new();
        for file in &files {
            flate2::read::MultiGzDecoder::new(std::fs::File::open(file).unwrap())
                .read_to_end(&mut archive)
                .unwrap();
        }
        let archive = String::from_utf8_lossy(&archive);
        let archived_offers = archive.matches("\r\naccept-encoding: ").count();
        assert_eq!(
            archive
                .matches(&format!("\r\naccept-encoding: {header}\r\n"))
                .count(),
            archived_offers,
            "{header}"
        );
        assert!(archived_offers > 50);
        let coded_br = |brotli| -> usize {
            files
                .iter()
                .map(|f| {
                    let path = f.to_str().unwrap();
                    warcio_with(brotli, &["index", "-f", "http:content-encoding", path])
                        .lines()
                        .filter(|l| l.contains("\"br\""))
                        .count()
                })
                .sum()
        };
        if offer.is_none() {
            assert_eq!(br, 0, "br was not offered");
            checked_index(&files, Brotli::AsInstalled);
            assert_eq!(coded_br(Brotli::AsInstalled), 0);
        } else {
            assert!(br > 10, "{br} br answers");
            // Archived as sent (a retried page's earlier answers are not archived).
            let archived_br = coded_br(Brotli::Hidden);
            assert!(
                archived_br > 10 && archived_br <= br,
                "{archived_br} of {br}"
            );
            let failures: Vec<String> = files
                .iter()
                .filter_map(|f| {
                    let path = f.to_str().unwrap();
                    try_warcio(Brotli::AsInstalled, &["check", path]).err()
                })
                .collect();
            assert!(
                !failures.is_empty() && failures.iter().all(|f| f.contains("unused_data")),
                "warcio 1.8.1 with brotli 1.2.1 fails on br records: {failures:?}"
            );
            checked_index(&files, Brotli::Hidden);
        }
    }
}

/// `kill -9` at random moments of an archiving crawl, then resume: the archive and
/// `pages.jsonl` agree record for record (warcio reads every file; no record without its
/// line, no line without its record), and no URL is recorded twice.
#[test]
fn the_archive_survives_kill_9_and_agrees_with_pages_jsonl() {
    let _load = crate::support::ordinary();
    let web = Arc::new(Web::new(WebSpec::small(29)));
    let server = encoding_server(&web);
    let (pattern, addr) = server.resolve_entry();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("seeds.txt"), web.seeds().join("\n")).unwrap();
    let seed: u64 = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("the_archive_survives_kill_9: KILL_SEED={seed}");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let run = |resume: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_crawler"));
        command
            .current_dir(dir.path())
            .args([
                "--seeds",
                "seeds.txt",
                "--out",
                "out",
                "--progress",
                "quiet",
            ])
            .args(["--concurrency", "8", "--set", "output.warc=true"])
            .args(["--set", "output.warc_max_bytes=128KiB"])
            .args(["--set", "politeness.per_host_rps=20"])
            .args(["--set", "checkpoint.interval_secs=0.5"])
            .args(["--set", &format!("network.resolve.\"{pattern}\"={addr}")])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if resume {
            command.arg("--resume");
        }
        command.spawn().unwrap()
    };
    let manifest = dir.path().join("out/checkpoint/manifest.json");
    let mut kills = 0;
    for attempt in 0..4 {
        let mut child = run(attempt > 0);
        let wait = rand::Rng::random_range(&mut rng, 300..1500);
        std::thread::sleep(Duration::from_millis(wait));
        while !manifest.exists() && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
    }
    let o = run(kills > 0).wait_with_output().unwrap();
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "seed {seed}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(kills >= 1, "seed {seed}: the crawl was never killed");
    server.shutdown();
    let out = dir.path().join("out");
    let pages = records(&out);
    let mut urls = BTreeSet::new();
    for r in pages.iter().filter(|r| r.kind == RecordKind::Page) {
        assert!(
            urls.insert(r.url.clone()),
            "seed {seed}: recorded twice: {}",
            r.url
        );
    }
    let listed: BTreeSet<(String, u64)> = pages
        .iter()
        .filter_map(|r| r.warc.as_ref().map(|w| (w.file.clone(), w.offset)))
        .collect();
    // The default offer (no `br`): checked by the warcio of a user with brotli 1.2.1.
    let (indexed, _) = checked_index(&warc_files(&out), Brotli::AsInstalled);
    assert_eq!(
        indexed, listed,
        "seed {seed}, {kills} kills: archive and pages.jsonl differ"
    );
}
