//! The archive: every fetch the crawl ends on, kept as WARC/1.1 (ISO 28500), the format
//! Heritrix, wget, Browsertrix and Common Crawl write and warcio, pywb and cdxj-indexer read.
//!
//! With `[output] warc = true` the crawl writes `OUT/warc/PREFIX-TIMESTAMP-SERIAL.warc.gz`:
//! a `warcinfo` record first in each file, then for each fetch that ends (pages, redirects,
//! errors with a response, robots.txt) a `request` record and a `response` record sharing
//! `WARC-Date` and `WARC-Target-URI`, the request naming the response in
//! `WARC-Concurrent-To`. A response whose payload was already archived in this crawl is a
//! `revisit` record instead (profile identical-payload-digest): content-level dedup, the
//! second half of deduplication after the URL-level seen-set.
//!
//! | file | job |
//! |---|---|
//! | `record.rs` | one record's bytes: fields, digests, one gzip member per record |
//! | `digest.rs` | a response's block and payload digests in one pass (SHA-NI, two streams), or many responses' at once (AVX-512 lanes) |
//! | `writer.rs` | appending, rotating files, response or revisit (output thread) |
//! | `gather.rs` | a file's pending bytes, handed to the OS from the records themselves (`writev`) |
//! | `deflate_pool.rs` | digests and deflate of responses on idle-priority threads (`output.warc_deflate = "spare-cpu"`) |
//! | `digest_index.rs` | the payload digests archived, in bounded memory (grown as it fills) |
//! | `recovery.rs` | on resume: cut records whose `pages.jsonl` line was lost; rebuild the index; the same for a dead distributed process's files (sealing) |
//! | `reader.rs` | members and records read back (index, recovery) |
//! | `cdxj.rs` | `crawler index FILE…`: CDXJ for pywb |
//!
//! # What it guarantees
//! - **The bytes as received.** The response block is the status line and headers as the
//!   server sent them (`Transfer-Encoding` renamed `X-Crawler-Transfer-Encoding`, since the
//!   body kept is de-chunked) and the entity body as sent, still content-coded: the crawler
//!   decodes for parsing itself (`crate::content_coding`). A body cut at `max_body_bytes`
//!   is marked `WARC-Truncated: length`. The payload digest is over the body as sent.
//! - **The archive and `pages.jsonl` agree.** Every record pair has exactly one line, which
//!   carries the payload digest and the record's file, offset and length; with the archive
//!   on, robots.txt fetches get a line too (`"kind": "robots"`). A response that is answered
//!   by a retry (a 503 tried again) is not archived: the attempt that ends the URL is. A crash
//!   leaves at most records in excess, which resume cuts (`recovery`).
//! - **Off the driver's path.** In a local crawl the digests and compression run on threads
//!   of idle priority; the output thread computes the digests of a response nobody got to
//!   and writes it stored. Where the crawl needs the payload digest before the output
//!   thread (distributed, continuous recrawl) the digests run where the response is
//!   finished (parse threads, fetch tasks), and so does compression with
//!   `output.warc_deflate = "always"`.
//! - **Stored or deflated, the same records.** A response's member is deflated or stored
//!   (still one gzip member, its own offset and length); an archive mixes both, which every
//!   gzip and WARC reader takes (warcio check in the tests), and recovery reads both.
//!
//! # What an archived page costs, and the choices made by the figures
//! Building a fetch's records is CPU, and a crawl on a busy machine is CPU-bound, so each
//! µs per page is pages/s lost. Per 16 KiB page of the crawl bench (thread CPU, `cargo bench
//! --bench warc`, medians of 3, 2-core EPYC under others' builds):
//! - **Digests.** The block digest (HTTP head and payload) and the payload digest run over
//!   the same bytes; the `sha1` crate already uses the SHA extensions, but one SHA-1 stream
//!   is bound by the latency of its rounds. Two streams interleaved (`digest`) cost
//!   10.4 µs for both, against 17.4 µs one after the other (1,585 against 951 MB/s, the
//!   same on real-size pages).
//! - **Deflate.** zlib-rs level 1 (zlib-ng's `deflate_quick`) is the fastest gzip encoder
//!   we can reach from Rust: 790–800 MB/s alone, ~20.5 µs for a 16 KiB page. A fetch's
//!   records at level 1 cost 34 µs a page (written: 0.22 of the payload), stored 12.4 µs
//!   (1.07), at level 6 97 µs (0.17); on real-size pages (mean 260 KB) 846 µs (0.31),
//!   282 µs (1.00) and 3.7 ms (0.22). Measured side by side in one scratch run (thread
//!   CPU): zlib-rs level 2 375 MB/s (0.137), libdeflate level 1 467 MB/s (0.128),
//!   zlib-rs's huffman-only and RLE strategies 140–170 MB/s (0.61: slower *and* bigger
//!   than level 1), smaller windows or hash memory no faster. No level or strategy makes
//!   deflate cheap enough to run on the crawl's CPU: 20 µs is a quarter of the crawl's own
//!   ~85 µs a page.
//! - **So deflate can run on CPU the crawl does not want** (`output.warc_deflate =
//!   "spare-cpu"`, the default; records held back from `pages.jsonl` are lost by a
//!   `kill -9` and fetched again, like the pages in flight, which the recrawl kill -9 test
//!   checks page by page; `deflate_pool`): one thread per core at `SCHED_IDLE`,
//!   taking records newest first while the output thread holds them (up to
//!   `output.warc_deflate_window`, 16 MiB, and 5 ms). A record they have not deflated
//!   when it must be written is written stored: the crawl never waits and never pays for
//!   compression; on a machine with spare cores everything is deflated, on a saturated one
//!   the archive grows toward the bytes received. What stays on the crawl's CPU: the
//!   digests (the payload digest decides revisit or response, and a distributed crawl asks
//!   Redis by it before the output thread sees the fetch), the header and request record,
//!   and for a response written stored its CRC and copy: 13.1 µs a page
//!   (`records, spare-cpu, stored`), plus writing its bytes.
//! - **The crawl bench** (`cargo bench --bench crawl -- --runs 3`, then `-- --runs 3
//!   --warc-deflate always`, then `--warc-level 0`, back to back, thin LTO, 2 cores under
//!   others' builds, load 6–9: CPU per 1,000 pages is the steady figure, pages/s is not).
//!   First with records waiting up to 0.5 s, then (last two rows) with the 5 ms kept:
//!
//!   | archive | crawler CPU s/1000 pages, off → on | of it the deflate threads | written per page | responses stored | pages/s on/off | peak RSS |
//!   |---|---:|---:|---:|---:|---:|---:|
//!   | `spare-cpu`, 0.5 s wait | 0.091 → 0.131 | 0.018 | 7,537 B | 28% | 0.77 | 101 MB |
//!   | `always`, level 1 | 0.085 → 0.140 | – | 3,620 B | 0% | 0.73 | 67 MB |
//!   | level 0 (all stored) | 0.088 → 0.117 | – | 17,604 B | 100% | 0.90 | 75 MB |
//!   | `spare-cpu`, 5 ms wait | 0.093 → 0.143 | 0.013 | 10,143 B | 47% | 0.75 | 71 MB |
//!   | `always`, level 1 | 0.090 → 0.159 | – | 3,620 B | 0% | 0.67 | 65 MB |
//!
//!   With `spare-cpu` the crawl's own CPU grows by 22–37 µs a page (without the deflate
//!   threads), against 55–69 µs with `always` and 29 µs storing everything: the parse
//!   threads +13 µs (digests, header), the output thread and the kernel the rest. Storing
//!   is not free: writing 17.6 KB a page instead of 3.6 KB costs the output thread and the
//!   kernel's page cache ~7 µs more, which is what the idle threads' deflate buys back.
//!   The wait was cut to 5 ms because records waiting are lost by a `kill -9` (see
//!   `crate::output`'s `MAX_WAIT`); it halves the share deflated under that load and takes
//!   30 MB off the peak RSS. Pages/s on/off are medians of per-run ratios, within the
//!   noise of that load; the lead's idle-machine run is the figure to quote.
//! - **The digests go to the idle threads too** (an idle 2-core machine: crawler ~80 µs and
//!   server ~40 µs a page, so ≤ ~14 µs may be added for 0.9×, and the digests alone were
//!   10.4 µs). In a local crawl (not distributed, not a continuous recrawl) nothing needs
//!   the payload digest before the output thread, so where the fetch ends only the header
//!   fields and the request record are built; the deflate threads compute the digests of
//!   every record waiting before they deflate any (per µs of idle CPU a digest saves the
//!   crawl 1 µs, a deflate ~0.35: the write cost above), and the output thread computes
//!   them for a record nobody got to (`record::ResponseRecord::seal`). Both digest up to
//!   eight records at once, the newest waiting for a deflate thread, the oldest due for the
//!   output thread (`record::ResponseRecord::seal_many`: sixteen streams side by side in
//!   AVX-512 lanes, 7.1 µs a page on this Xeon, where SHA-NI does 15–17; two records at a
//!   time, four SHA-NI streams, where the lanes lose a race timed once at the start, as on
//!   an EPYC: 7.1 µs a 16 KiB page instead of 10.8, see `digest`). On a saturated machine
//!   the output thread digests nearly every record, whole bursts of them at a time.
//! - **Writing the bytes** is the output thread's other half (perf of the output thread
//!   with the archive on, most records stored: SHA-1 ~45%, the `write`s ~37%, of which
//!   ext4's delayed allocation of each 4 KiB block ~24%). Each burst of records goes to
//!   the OS in one `write` (a 1 MiB buffer: a burst is ~200 KB at 12,000 pages/s) into
//!   blocks reserved 16 MiB ahead (`fallocate`, the file's length unchanged, the rest let
//!   go when the file closes): sys time per 16 KiB appended 6.3 µs in writes of ~60 KB
//!   into unreserved blocks (before), 3.7 µs in writes of 200 KB into reserved ones (see
//!   `writer.rs`'s `PREALLOCATE`). In the crawl bench the ~2 µs a page
//!   this saves was not measurable through the noise of a machine at load 14–17 (thin
//!   LTO, before/after alternated, 3 invocations each: on/off 0.80/0.82/0.98 before,
//!   0.89/0.75/0.73 after); the bench now prints the machine's busy CPU per page, where
//!   the kernel's writeback of the archive shows, for a run on an idle machine.
//! - **What else the output thread did** (`perf record -g` of `cargo bench --bench crawl --
//!   --warc-only`, main at 9933925, fat LTO, ~17.5 µs of output thread a page, most records
//!   stored): SHA-1 32% (at the SHA unit's throughput with four streams: nothing left to
//!   gain but by dropping a digest, which WARC readers and revisits rely on), the `write`s
//!   23%, copying each stored payload into the file's buffer ~10%, page faults on the
//!   digest index ~10% (its 32 MiB touched 4 KiB at a time, twice per page), freeing the
//!   payloads ~8%, the `pages.jsonl` line ~8%. The copy is gone: a burst's bytes go to the
//!   OS in one `writev` from the records themselves (`gather`); the index asks for 2 MiB
//!   pages (`digest_index`). Where the fetch ends, building the records was ~9% of the
//!   parse threads' CPU, mostly `format!` of record ids: now written in place. Crawl bench
//!   (`-- --runs 3`, three invocations each, before (fat LTO, 9933925) and after (thin
//!   LTO) alternated, load 10–17): crawler CPU per page on/off without the deflate threads
//!   1.340 / 1.386 / 1.313 before, 1.258 / 1.510 / 1.261 after (medians 1.34 → 1.26); the
//!   output thread and the rest 23–25 → 18–28 µs a page; pages/s on/off 0.77 / 0.81 / 0.70
//!   before, 1.01 / 0.87 / 0.91 after, through that load's noise.
//! - **The digests in lanes** (2026-11-27, a 2-core Xeon under four engineers' builds, load
//!   ~10): `perf record -a -g` of `-- --warc-only` (fat LTO, main at d1bb9bc) had SHA-1 at
//!   ~64% of the output thread, the page-cache copy ~14%, zeroing pages ~5%; on this Xeon
//!   SHA-NI's four streams are slower than two (see `digest`), so the output thread now
//!   digests up to eight records at once in AVX-512 lanes. Crawl bench (`-- --runs 3`,
//!   fat LTO, before (d1bb9bc) and after alternated, three invocations each): the output
//!   thread (`rest`, archive on) 35 / 36 / 42 → 27 / 30 / 25 µs a page; crawler CPU per
//!   page on/off without the deflate threads 1.710 / 1.685 / 1.756 → 1.605 / 1.602 /
//!   1.435; machine CPU per page on/off 1.66 / 1.60 / 1.90 → 1.18 / 1.52 / 1.44; pages/s
//!   on/off (median of per-run ratios) 0.61 / 0.62 / 0.53 → 0.85 / 0.66 / 0.70. At that
//!   load the deflate threads got nothing (99% of responses stored, ~520 MB written for
//!   491.6 MB of payload): the 0.9 is for an idle machine's run. A second sitting
//!   (load 10–13): `rest` 31 / 30 / 30 → 22 / 24 / 22 µs a page, crawler CPU on/off
//!   1.529 / 1.505 / 1.507 → 1.456 / 1.446 / 1.404, pages/s on/off 0.49 / 0.74 / 0.56 →
//!   0.69 / 0.51 / 0.66 (462–501 MB written).
//! - **Less of the record on the output thread** (2026-11-27, the same Xeon). `perf record`
//!   of `-- --warc-only --runs 1` (fat LTO, main at 5897a92, by thread): the deflate threads
//!   spent their idle CPU digesting two records at a time with SHA-NI (2.4× the CPU per page
//!   of the lanes), and of the output thread's 2,047 samples 175 were `clear_page_erms`
//!   (the digest index's 32 MiB zeroed on first touch: slow on this VM, whose host takes
//!   back freed memory) and 57 the stored member's CRC. Now the deflate threads digest up to
//!   eight records at once as the output thread does (`deflate_pool`), a record's CRC is
//!   computed with its digests (where an idle thread sealed it, the output thread only
//!   writes; a deflate reuses it: `record::Sealed::crc`), and the index starts at 1 MiB
//!   and doubles as it must (`digest_index`): output thread `clear_page_erms` 175 → 9
//!   samples, CRC 57 → 32 (the rest are records it sealed itself). Crawl bench (`-- --runs
//!   3`, fat LTO, 5897a92 and this change alternated, six invocations each in two sittings,
//!   at load 8–16 from others' builds): the output thread and the rest, archive on, median
//!   28.5 → 24 µs a page over the 18 runs each; crawler CPU per page on/off without the
//!   deflate threads 1.578 → 1.497 (medians of the invocations); pages/s on/off (medians
//!   of per-run ratios) 0.688 / 0.729 / 0.788 / 0.770 / 0.766 / 0.702 → 0.659 / 0.918 /
//!   0.977 / 0.772 / 0.756 / 0.828 (medians 0.747 → 0.800); archive 471–495 → 457–480 MB
//!   a run for 491.6 MB of payload. Under that load the deflate threads get little CPU and
//!   the ratio swings by ±0.15: the idle machine's run is the figure to quote. What these runs also showed: the parse threads' +6 µs a page with the
//!   archive on is not the records built there (`Archiver::build`, the request's SHA-1 and
//!   CRC: ~1 µs in `perf`) but their own work slowed evenly (the scanner, the seen-set, the
//!   near-duplicate digest each ~15% more samples), and by as much (+6 to +10 µs, one run
//!   each under load) with one deflate thread, with the deflate threads only digesting, or
//!   at nice 19: contention, it seems, for the caches and memory the archive's bytes go
//!   through, not CPU that moving work off these threads could save.
//! - **What the crawl waited for** (2026-11-27, evening, an idle 2-core Xeon, `-- --runs
//!   3`, the bench now printing the ratio pages/s would have if the crawl were CPU-bound):
//!   measured on/off 0.78–0.82 where the CPU alone predicted 0.86–0.88, the machine 93–95%
//!   busy without the archive and 85–87% (without the deflate threads) with it. Of the
//!   wait: each fsync of the archive (the background sync's every second, a checkpoint's,
//!   the file's close) wrote a second's archive at once, 67–97 ms (`perf trace -e
//!   fdatasync`), and the crawl's end waited for the last one. The output thread now starts
//!   the disk's writes every 8 MiB (`writer.rs`'s `WRITEBACK_STEP`): fsyncs take 1–10 ms,
//!   the end's 5 + 2 ms against 69 + 7; on/off 0.795 / 0.839 / 0.858 against 0.802 / 0.820
//!   / 0.807 (alternated, three invocations each), the CPU-bound figure 0.84–0.89. What is
//!   left is CPU: the archive adds 16–19 µs of the crawl's own CPU a page (the output
//!   thread +10–12: SHA-1 in lanes for the records the idle threads did not reach ~3 µs,
//!   the kernel's copy into the page cache ~3 µs, ext4 and slab ~2 µs; the parse threads
//!   +2–4, the fetch threads +1–2). Tried in the same sitting and not kept (medians of per-run
//!   ratios): the archive on tmpfs (0.78 / 0.81 against 0.79 / 0.79 on ext4), the deflate
//!   threads only digesting (0.85 / 0.81 / 0.76), nice 19 instead of `SCHED_IDLE` (0.89 /
//!   0.84), one deflate thread (0.81 / 0.76 / 0.75), none (0.76 / 0.63: every digest on the
//!   output thread). On a web that sends its HTML compressed (`-- --encodings`: gzip and br
//!   stored as sent) on/off is 0.939 / 0.931.
//! - **The page cache**: a written archive is let go of from the page cache as its writes
//!   reach the disk (`writer.rs`'s `release_due`: the pages on disk whose writeback started
//!   a step before, never waiting for the disk; a closed file's all), as PostgreSQL does with
//!   its WAL: nothing reads it back while the crawl runs, and the cache is better spent on
//!   what the crawl does read (the frontier's blocks, `pages.jsonl`) and, in a container,
//!   counts against the crawl's memory. The crawl bench's 30,000 pages (~400 MB of archive a
//!   run; the peak of `/proc/meminfo`'s `Cached` above its start while `--runs 3` ran, three
//!   invocations of each build alternated, 2026-11-27): 29–50 MB against 346–404 MB; on/off
//!   0.877 / 0.808 / 0.806 against 0.812 / 0.836 / 0.817 (no difference beyond the noise).
//! - **Payloads sent compressed** (`Content-Encoding`, images, archives) are stored, not
//!   deflated again (`output.warc_store_compressed`): on the open web most HTML arrives
//!   gzip- or br-coded, so there the archive's CPU is the digests and a copy.
//! - `output.warc_deflate = "always"` deflates every record where its fetch ends, on the
//!   crawl's CPU (the smallest archive whatever the load, at the crawl's cost above);
//!   `output.warc_gzip_level = 0` stores every record and starts no thread.
//!
//! Why our own writer rather than the `warc` crate: it compresses a whole file as one gzip
//! stream, so no record has an offset of its own, and it builds records from buffered
//! copies. The tests read our files with that crate and with warcio, as independent checks.

pub mod cdxj;
pub(crate) mod deflate_pool;
pub(crate) mod digest;
pub(crate) mod digest_index;
#[cfg(test)]
pub(crate) mod fixture;
pub(crate) mod gather;
pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod recovery;
pub(crate) mod sink;
/// warcio on the archives the library's tests write, the helper the end-to-end tests use
/// (shared with the test binaries, where its items must be `pub`).
#[cfg(test)]
#[allow(unreachable_pub)]
#[path = "../../tests/warcio_support/mod.rs"]
pub(crate) mod warcio_check;
pub(crate) mod writer;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use writer::{remove_archive, WarcLocation};
pub(crate) use writer::{ArchiveOptions, ArchiveTally, ArchiveWriter, CurrentFile};

use crate::fetch::{Exchange, Fetched};
use record::{warc_date, ArchivedFetch, FetchParts};

/// `output.warc_deflate`: where the records' deflate runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarcDeflate {
    /// On threads of idle priority while the output thread holds the records
    /// (`deflate_pool`), with the digests in a local crawl; a record they have not
    /// deflated when it must be written is stored. The default: the crawl never pays for
    /// compression; the archive is bigger on a busy machine, and a `kill -9` also loses the
    /// records waiting (their pages are fetched again on resume, like those in flight).
    #[default]
    SpareCpu,
    /// Where each fetch ends, on the crawl's CPU: every record deflated, whatever it costs
    /// the crawl's speed: the smallest archive, and nothing held back from `pages.jsonl`
    /// (see `super`'s figures for what `SpareCpu` buys and costs).
    Always,
}

/// What building records needs: the current file's `warcinfo`, the gzip level, and whether
/// payloads compressed already are stored.
#[derive(Clone)]
pub(crate) struct Archiver {
    pub(crate) current: Arc<CurrentFile>,
    pub(crate) gzip_level: u32,
    /// `output.warc_store_compressed`: payloads compressed already are stored, not deflated.
    pub(crate) store_compressed: bool,
    /// `output.warc_deflate`.
    pub(crate) deflate: WarcDeflate,
    /// The response's digests are computed where the fetch ends: the crawl needs the payload
    /// digest before the output thread (a distributed crawl looks it up in Redis, a
    /// continuous recrawl schedules by it), or no deflate thread would compute them. Else
    /// a deflate thread or the output thread does ([`record::ResponseRecord::seal`]).
    pub(crate) digests_where_fetched: bool,
}

impl Archiver {
    /// The records of a finished fetch of `url`, if the fetch kept its exchange; the
    /// response's head and payload are copied (the caller still needs them).
    pub(crate) fn archive(&self, url: &str, fetched: &Fetched) -> Option<Box<ArchivedFetch>> {
        let exchange = fetched.exchange.as_deref()?;
        let block = (
            exchange.response_head.clone(),
            exchange.payload(fetched.body.as_deref()).to_vec(),
        );
        Some(self.build(url, exchange, fetched.content_type.as_deref(), block))
    }

    /// The same for a fetch that is done with its response: its head and payload are
    /// taken out of `fetched` into the records, not copied.
    pub(crate) fn archive_taking(
        &self,
        url: &str,
        fetched: &mut Fetched,
    ) -> Option<Box<ArchivedFetch>> {
        let exchange = fetched.exchange.as_deref_mut()?;
        let head = std::mem::take(&mut exchange.response_head);
        let payload = match exchange.raw_body.take() {
            Some(raw) => raw,
            None => fetched.body.take().unwrap_or_default(),
        };
        Some(self.build(
            url,
            exchange,
            fetched.content_type.as_deref(),
            (head, payload),
        ))
    }

    /// The records of `exchange`, whose response head and payload are `block`.
    fn build(
        &self,
        url: &str,
        exchange: &Exchange,
        content_type: Option<&str>,
        (head, payload): (Vec<u8>, Vec<u8>),
    ) -> Box<ArchivedFetch> {
        let parts = FetchParts {
            target_uri: url,
            date: warc_date(exchange.date),
            warcinfo_id: self.current.warcinfo_id(),
            request_head: &exchange.request_head,
            response_head: &head,
            payload: &payload,
            peer: exchange.peer,
            http2: exchange.http2,
            truncated: exchange.truncated,
            payload_compressed: self.store_compressed
                && record::already_compressed(exchange.content_coded, content_type),
        };
        let prepared = record::prepare(&parts, self.gzip_level);
        let mut fetch = Box::new(prepared.with_block((head, payload)));
        if self.deflate == WarcDeflate::Always {
            if let Some(response) = Arc::get_mut(&mut fetch.response) {
                response.deflate_in_place();
            }
        } else if self.digests_where_fetched {
            fetch.response.seal();
        }
        fetch
    }
}

/// One fetch's record building as the crawl does it, for `benches/warc.rs` (what each
/// `output.warc_gzip_level` and the digests cost per page); not an interface.
#[doc(hidden)]
pub mod cost {
    use super::record::{prepare, FetchParts};

    fn parts<'a>(
        request_head: &'a [u8],
        response_head: &'a [u8],
        payload: &'a [u8],
    ) -> FetchParts<'a> {
        FetchParts {
            target_uri: "http://h0.test/p/1",
            date: "2026-11-26T12:00:00.000001Z".into(),
            warcinfo_id: uuid::Uuid::nil(),
            request_head,
            response_head,
            payload,
            peer: None,
            http2: false,
            truncated: false,
            payload_compressed: false,
        }
    }

    /// Builds a fetch's request and response records at `level` (0: stored) as
    /// `output.warc_deflate = "always"` does where the fetch ends, and returns their bytes.
    /// The block is copied in first (the crawl takes it from the fetch instead).
    pub fn records(request_head: &[u8], response_head: &[u8], payload: &[u8], level: u32) -> usize {
        let fetch = prepare(&parts(request_head, response_head, payload), level)
            .with_block((response_head.to_vec(), payload.to_vec()));
        fetch.response.deflate();
        fetch.response.member().len() + fetch.request_member.len()
    }

    /// What `"spare-cpu"` does where the fetch ends in a local crawl: the response's named
    /// fields and the request record, the digests left for later. Returns the request's
    /// bytes.
    pub fn records_where_fetched(
        request_head: &[u8],
        response_head: &[u8],
        payload: &[u8],
    ) -> usize {
        let fetch = prepare(&parts(request_head, response_head, payload), 1)
            .with_block((response_head.to_vec(), payload.to_vec()));
        fetch.request_member.len()
    }

    /// What `"spare-cpu"` does on the crawl's CPU when no spare CPU gets to the response:
    /// the header and request record where the fetch ends, then the digests and the
    /// response written stored by the output thread (into `out`, standing for its file's
    /// buffer). Returns the bytes written.
    pub fn records_stored(
        request_head: &[u8],
        response_head: &[u8],
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> usize {
        let fetch = prepare(&parts(request_head, response_head, payload), 1)
            .with_block((response_head.to_vec(), payload.to_vec()));
        out.clear();
        out.extend_from_slice(&fetch.request_member);
        // Writing to a Vec cannot fail.
        let _ = fetch.response.member().write_to(out);
        out.len()
    }

    /// CPU time, in nanoseconds, of the deflate threads of every archive closed so far in
    /// this process (idle-priority CPU: not what the crawl competes for).
    pub fn deflate_threads_cpu_ns() -> u64 {
        super::deflate_pool::THREADS_CPU_NS.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A response's block and payload digests as records get them (one pass).
    pub fn digests(head: &[u8], payload: &[u8]) -> [u8; 20] {
        super::digest::block_and_payload(head, payload).0
    }

    /// Two responses' digests at once, as the deflate threads compute them when several
    /// records wait (four SHA-1 streams).
    pub fn digests_of_two(a: (&[u8], &[u8]), b: (&[u8], &[u8])) -> [u8; 20] {
        super::digest::blocks_and_payloads_of_two(a, b)[1].0
    }

    /// The same two digests by the `sha1` crate, one after the other (as before).
    pub fn digests_one_by_one(head: &[u8], payload: &[u8]) -> [u8; 20] {
        super::digest::one_by_one(head, payload).0
    }
}

/// The `warcinfo` fields of a crawl with `config`: what wrote the files and how.
pub(crate) fn info_fields(config: &crate::config::Config) -> Vec<(&'static str, String)> {
    let c = &config.crawl;
    vec![
        ("software", format!("crawler/{}", env!("CARGO_PKG_VERSION"))),
        ("format", "WARC File Format 1.1".into()),
        (
            "conformsTo",
            "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
                .into(),
        ),
        ("http-header-user-agent", c.user_agent.clone()),
        ("robots", if config.politeness.respect_robots { "obey" } else { "ignore" }.into()),
        (
            "description",
            format!(
                "max_urls={} max_depth={} max_body_bytes={} concurrency={} scope={:?} per_host_rps={}",
                c.max_urls.0,
                c.max_depth,
                c.max_body_bytes.0,
                c.concurrency,
                config.scope.mode,
                config.politeness.per_host_rps
            ),
        ),
    ]
}
