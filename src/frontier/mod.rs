//! The frontier: every accepted URL that is not yet fetched, organised so that fetches
//! are polite and fair, with its bulk on disk so that memory does not grow with the crawl.
//!
//! # Scheduling
//!
//! URLs wait in per-host FIFO queues (a host is scheme + host + port, see
//! [`crate::normalize::host_key`]; inside the frontier a host is known by [`host_id`], the
//! XXH3-64 of that key). Hosts, not URLs, are scheduled: a min-heap orders the hosts that
//! have work by the instant each may next be fetched, so one host with a million queued URLs
//! never starves a host with ten, and a host that must wait costs nothing until its time
//! comes. Politeness is kept in budgets that several queues share (`budget`): a host
//! *name*'s GCRA rate (`per_host_rps`, `per_host_burst`) and in-flight cap
//! (`per_host_concurrency`), shared by its schemes and ports, and with `per_ip_rps` /
//! `per_ip_concurrency` on, a server *address*'s, shared by every name on it (the address is
//! looked up ahead, see `address.rs`). A request is handed out only when all its budgets
//! allow it; a queue refused by a rate comes back at the budget's next instant, one refused by
//! a cap is parked until a request of that budget completes. Retries and `Retry-After` push a
//! host's next time forward instead of sleeping inside a fetch task, so a retry is a request
//! like any other: rate-limited and counted.
//!
//! # Memory: what stays, what goes to disk
//!
//! - Queued URLs live in a [`store::QueueStore`] under `OUT/frontier/queues/`: append-only
//!   segment files of per-host blocks, with only `[frontier] memory` of URLs in memory (each
//!   busy host's newest URLs before they fill a block, and the block being served). The store's
//!   module doc says why this layout and not an embedded B-tree or a file per host, with figures.
//! - Per-host *state* (the crawl-delay rate, the politeness schedule, the address, the parsed
//!   robots.txt rules) is kept only for hosts being served, within `[frontier] host_memory`. A
//!   host that is idle (nothing in flight, its crawl-delay rate full again, no address lookup,
//!   robots.txt fetch or backoff pending) is evicted, least recently served first, when the
//!   budget is exceeded; its robots.txt body is already in a disk cache
//!   ([`robots_cache::RobotsCache`], `OUT/frontier/robots/`), written when it was fetched, so
//!   restoring the host when its turn comes costs one read and one parse, not a request. A
//!   fresh rate is exactly an idle one (GCRA state is "full" after `burst × period` without
//!   requests), and the budgets shared with other hosts (its name's, its address's) outlive
//!   the host until they are idle too, so nothing of politeness is lost by the eviction.
//! - What stays in memory for every host ever seen is its entry in the store's host map: the
//!   queue's bookkeeping and 8 bytes of tally (URLs ever queued, for `max_pages_per_host` and
//!   the trap report, and whether the host is in the heap), 64 bytes, ~85–170 with the
//!   table's slack (see `store/host_map.rs`), plus a heap entry while it has work. The tally is in the store's entry, not in a
//!   map of the frontier's own, so that a push or a pop finds both in one lookup (see
//!   `store::HostTally`); a host with nothing queued keeps its entry for its tally.
//!
//! A host's key is not kept for an evicted host: when it comes back, the key is taken from its
//! first queued URL. Two host keys with the same 64-bit hash would share a queue and a
//! schedule (at 1e6 hosts the chance of any such pair is about 3e-8); nothing else would go
//! wrong.
//!
//! # Checkpoints
//!
//! The frontier is owned by one task (the crawl's driver) and is not shared: no lock is
//! needed, and its state at any instant is one consistent value. It also owns what it hands
//! out: a URL given as a [`Dispatch`] stays in its keeping, in flight, until
//! [`Frontier::complete`] or `Frontier::retry` gives the dispatch back, so a checkpoint
//! records it without the caller keeping a list of its own. [`Frontier::begin_checkpoint`]
//! is the pause: the store writes its tails and encodes its table (the in-flight URLs recorded
//! at the front of their hosts' queues, in the order they were handed out), and the per-host
//! tallies are copied. The returned [`FrontierSnapshot`] is written by another thread (store
//! fsyncs and table, `hosts.bin`); [`Frontier::finish_checkpoint`] then lets the store reclaim
//! what the previous checkpoints no longer need. [`Frontier::resume`] reopens the store
//! exactly at a checkpoint's position (URLs pushed after it come back from the crawl's queue
//! log, not from the store) and drops, when they reach the head of their queue (or when a
//! host's robots.txt is given up), the URLs that were recorded after the checkpoint. The
//! caller counts the replayed URLs for their hosts ([`Frontier::push`], or
//! `Frontier::count_queued` for those already recorded), so `max_pages_per_host` holds
//! across a crash; and each host's first request after a resume waits one rate period (the
//! limiters are not checkpointed: see `residency.rs`).
//!
//! # Threads
//!
//! Everything above runs on the one thread that owns the frontier (the crawl's driver), with
//! two exceptions that change no state the owner reads: a checkpoint's slow half (fsyncs,
//! table file, `hosts.bin`) on the checkpoint writer's thread, and the `pwrite` of the queue
//! store's full write buffers on a thread of the store's own (`store/log_writer.rs`). The
//! second stays exact because one buffer at most is in flight, it stays readable by the owner
//! until written, and every point that needs the bytes in their file (links written to it,
//! `flush`, a checkpoint's pause, dropping the store) waits for it first: the log reaches its
//! files in the same order as when the owner wrote it. Admission, scheduling and the queues'
//! encoding stay on the owner: they decide locations and order, and one thread deciding them
//! is what keeps `max_urls`, FIFO per host and a checkpoint's consistency simple to argue.
//!
//! # Measured
//!
//! `SCALE_URLS=N cargo bench --bench scale` (benches/scale.rs: synthetic links through the
//! normalizer, the seen-set and this frontier, 1e6 hosts, 30 % of links to a random host,
//! a checkpoint every 20 s, politeness off; one run each on the 2-core machine, otherwise idle):
//!
//! | URLs | URLs/s | peak RSS | disk | pause median / max | background write | resume to 1st URL |
//! |---|---|---|---|---|---|---|
//! | 1e7 | 134 k | 580 MiB | 1.7 GiB | 82 / 90 ms (4) | 1.1 s | 1.0 s |
//! | 3e7 | 156 k | 597 MiB | 4.8 GiB | 53 / 76 ms (10) | 1.2 s | 0.64 s |
//! | 1e8 | 125 k | 734 MiB | 15.8 GiB | 58 / 113 ms (40) | 1.9 s | 0.69 s |
//!
//! Memory follows the hosts (1e6 here) and the budgets, not the URLs: from 3e7 to 1e8 peak
//! RSS grew by 137 MiB, of which the seen-set's growth is 131 MiB. The pause is the store's
//! table (~40 bytes per host with something queued, 45–50 ms at 1e6 hosts) plus the tallies'
//! copy (8–11 ms); it grows with hosts, not URLs. Disk was ~185 bytes per queued URL (store
//! format version 1; version 2 takes ~89 at 1e7, version 3 ~35, see the store's doc).
//!
//! Session 11, `SCALE_URLS=1e8`, thin LTO, the two cores shared with four builds (load 6–10, so
//! wall-clock rates say little), session 9's bench and today's side by side: the old bench
//! (everything on one thread, a `Url` per link) 79.8 k URLs/s, 6.3 µs of CPU per accepted URL
//! (all threads, the checkpoint writer's included), peak RSS 800 MiB; today's (links screened
//! on their own thread as the crawl's parse threads do, see `benches/scale.rs`) 81.0 k URLs/s,
//! the frontier's thread 4.83 µs per URL (a ceiling of ~207 k URLs/s on a core of its own),
//! screening 1.09 µs, 6.2 µs in all, peak RSS 798 MiB. So the frontier's thread is now the
//! whole limit, and it is flat (`perf` at 4e6, shares of all samples): the seen-set's probes
//! (both threads) 5 %, gathering tails into groups 4.4 %, the store's host map on push 4.2 %,
//! decompressing a whole group to pop one entry 3.9 %, malloc and free ~13 %, the schedule 2 %.
//! 400 k URLs/s (2.5 µs) needs that thread split, not tuned: the store's encoding, compression
//! and writes (and the pops' decoding) on a thread of their own, or the frontier sharded by
//! host. Peak RSS: seen-set 187.5 MiB, this frontier's own estimate 340–386 MiB, and ~230 MiB
//! beyond both that `malloc_trim` does not give back (tried at each checkpoint at 1e7: under 2
//! MiB freed), so live: among it the tallies' copy (16 MiB) and the table's buffer (~40 MiB)
//! while a sync holds them, which the estimate leaves out.
//!
//! Session 12 found that memory with heaptrack (`SCALE_URLS=1e7`, the recipe in
//! `benches/scale.rs`): at the heap's peak, the resident hosts' map held 122 MiB and their
//! names' budgets' map 80 MiB (234 k hosts in arrays of 2^19 buckets, charged 256 bytes a host
//! against a 64 MiB `host_memory`; `residency.rs` now charges the maps' worst load), the
//! store's table buffer 68 MB for a 40 MB table (`reserve` doubled the kept buffer; now exact)
//! and the tallies' copy 27 MB beside `hosts.bin`'s own 12 MB (now encoded once, in the
//! pause). Peak RSS at 1e7 603 → 479 MiB, at 3e6 489 → 311 MiB (same thin-LTO build of each
//! side, alternated three times on the loaded machine; the admitting thread's CPU per URL
//! 3.89 → 3.72 µs, medians). At 1e8 (thin LTO, one run beside four builds and a test run):
//! peak RSS 677 MiB (794 in session 11), 29 bytes of disk per queued URL. Still live at the
//! peak, largest first: the store's host map
//! (~103 MB: 1e6 entries of 49 bytes in 16 arrays that double together, so at ~47 % load),
//! the URLs held in memory (~100 MB for the 64 MiB `[frontier] memory`: the estimate counts
//! neither the allocator's rounding nor the tails' vector growth), the tallies' map (36 MB),
//! the ready heap (32 MiB of 32-byte entries) and the store's table buffer (40 MB).
//!
//! Session 12 (`scalerate`): two changes to the queue store, both on the admitting thread's
//! path. Pops no longer read, check and decompress a whole ~8 KiB group for each entry: the
//! last 32 groups read are kept decoded (`store/group_cache.rs`), and at 4e6 URLs 94 % of entry
//! reads find their group there. The log's full write buffers are written by a thread of the
//! store's own (`store/log_writer.rs`; the `pwrite`s were ~5 % of this thread at 1e7). Also
//! FxHash for the resident hosts' and the budgets' maps. `SCALE_URLS=4e6`, this branch (thin
//! LTO) and main's fat-LTO binary alternated three times on the loaded machine (load ~10, so
//! URLs/s only as a ratio): CPU of the admitting thread per accepted URL, medians, 3.80 µs
//! before, 2.87 µs after (0.76×; runs 3.62/3.82/3.80 and 2.53/2.87/3.18); screening 1.12 and
//! 1.11 µs; URLs/s medians 93.2 k and 149.5 k; peak RSS 503 and 507 MiB (the second write
//! buffer, 1 MiB, and the cache, ~0.3 MiB, are counted in the estimate).
//! `SCALE_URLS=1e8`, once, thin LTO, on the machine shared with other builds (load 11–15 for
//! the whole 1513 s: 66 k URLs/s, no figure of rate comparable with an idle run): admitting
//! thread 5.02 µs per accepted URL, screening 1.22, all threads 6.57; 60 % of entry reads
//! found their group decoded (1e6 hosts all queued, fewer entries of a group wanted close
//! together than at 4e6); peak RSS 800 MiB; 29 bytes per queued URL; pauses median 85 ms;
//! resume 924 ms to the first URL. Again idle, fat LTO, both changes merged (one run, 444 s):
//! 225,147 URLs/s, admitting thread 4.32 µs per accepted URL, screening 1.29, all threads
//! 5.70; peak RSS 680 MiB; 29 bytes per queued URL; pauses median 29.9 ms; resume 598 ms.
//!
//! Session 13 (`scalerate2`), all on the admitting thread's path, none changing what is written
//! or when (the same groups, entries and bytes per URL at 1e7, checked in the bench's output):
//! - *Tails in one arena* (`store/tails.rs`): a host's URLs pushed and not written yet were a
//!   vector in a box of its own, found through the store's host map when pushed to and again
//!   when the tails were written; now they are a chain through one arena, the host's entry
//!   keeping its chain's slot, and writing the tails walks the chains without the map (the
//!   entry is looked up once more only to link the written block, as before). Exact because a
//!   chain holds its host's items in push order, the entry's `tail_len` says how many, and
//!   the arena is emptied only when no chain holds an item (the store model property test
//!   checks FIFO, counts and sync/reopen against a model, `--test api store_`).
//! - *Deferred links written in runs* (`apply_patches_now`, memory pressure on the links'
//!   map, every few seconds at 1e6 hosts): the links of close blocks go as one read and one
//!   write of the bytes between them (~400 links per write at 1e7) instead of an 8-byte
//!   `pwrite` each; exact because the bytes rewritten are the file's own, read just before,
//!   and the only other writer of them (a sync's write) writes the same links, which are in
//!   the map too.
//! - Allocations that made glibc consolidate its fast bins on this thread (each request over
//!   1 KiB does, and the fast bins hold the thousands of URL strings freed meanwhile):
//!   LZ4's hash table (8 KiB per group written, now kept), the group's host ids and a decoded
//!   group's entry table (kept or built in place). `malloc_consolidate` and `unlink_chunk`
//!   were ~9 % of all samples at 3e6 URLs before.
//! - An evicted host's key is read from its first URL's text when that is plainly canonical
//!   (`plain_key`: `http(s)://`, lowercase LDH labels, a non-default port), else parsed as
//!   before; a property test checks it against the parser. Paths of segment files are
//!   formatted only for errors (~1 % of samples, one per entry read).
//!
//! `SCALE_URLS=1e7` (the 1e6 hosts of 1e8), this branch (thin LTO) alternated three times with
//! main's fat-LTO binary (fb11157) and with the branch's first step (the runs, the kept buffers
//! and the key, without the arena), on the machine shared with four builds (so URLs/s only as
//! a ratio): CPU per accepted URL of the admitting thread, medians, main 3.12 µs (2.90 / 3.30 /
//! 3.12), first step 3.01 (3.01 / 3.00 / 3.26), this branch 2.31 (2.31 / 2.28 / 2.37): 0.74×;
//! all threads 4.23 → 3.39 µs (0.80×); URLs/s medians 93.3 k → 118.4 k (1.27×); the same 4.42 M
//! entries in 69.6 k groups, 22.7 bytes per URL written; peak RSS 482 → 462 MiB.
//! `SCALE_URLS=1e8`, once, thin LTO, beside those runs and the builds (load ~12 for the whole
//! 1261 s, so 79 k URLs/s says nothing of an idle machine): admitting thread 3.38 µs per accepted
//! URL (session 12's loaded thin-LTO run: 5.02; its idle fat-LTO one: 4.32), screening 1.08, all
//! threads 4.75; peak RSS 643 MiB (680 idle in session 12); 29 bytes per queued URL; resume
//! 640 ms to the first URL; 60 % of entry reads from a group kept decoded; links written under
//! memory pressure 39.8 M in 835 k writes (48 a write); pauses median 124.5 ms, max 302.5 (85
//! in session 12's loaded run: the table of 1e6 hosts is encoded in the pause, and the
//! machine's load decides most of it; not measured idle).
//!
//! What is left on the admitting thread (perf at 3e6, shares of all samples, the admitting
//! thread ~60 % of them): the store's host map on push and again to link each written entry
//! ~8.5 %, encoding tails (front coding, LZ4) ~6 %, a pop's entry read (group decode, the
//! window's items) ~7 %, restoring an evicted host per pop ~6 % (its budget, its state,
//! evicting another), malloc and free ~13 % on both threads (URL and parent strings per URL,
//! the window's items per pop; a decoded group's entry table, ~2 %, is gone in the last
//! commit, not yet measured), the seen-set's batch insert ~5 %, the host key's `format!` per
//! URL (`Link::host_key`, on the caller's side) ~2 %, the tallies ~2 % and the schedule ~5 %.
//! 2.5 µs at 1e8 still wants one host record per host (tallies, store entry, residency in
//! one map), no `String` per URL for the parent, and the tails' encoding off this thread.
//!
//! Session 14 (`scalerate3`), on the admitting thread's path, nothing changed in what is
//! queued, in which order, or what is written:
//! - *A page's links share one parent text*: [`QueuedUrl::parent`] is an `Arc<str>` (JSON the
//!   same: serde's `rc`), made once per page by the caller (`crawl/admission.rs`), so a push
//!   no longer copies the parent, a hand-out's copy for checkpoints bumps a count, and a pop's
//!   decoding shares a parent "the same as the previous item's" (`store/codec.rs` puts a new
//!   one together in a scratch and allocates only the `Arc`). Memory accounting still charges
//!   each item its parent's length, so the store flushes tails at the same budget as before.
//! - *The host key is read from the URL's text* where a canonical link plainly starts with it
//!   ([`plain_host_key_len`], the same `plain_key` the restore path uses, checked against
//!   `Link::host_key` by a debug assertion in every debug test, and against the parser by the
//!   property test `a_key_read_from_the_text_is_the_parsers`): no `format!` per URL;
//!   [`Frontier::push_keyed_by_prefix`] hashes the prefix.
//!
//! `SCALE_URLS=1e7` (the 1e6 hosts of 1e8), main's code (9933925) and this change, both thin
//! LTO from this worktree, alternated three times on the machine shared with four builds
//! (load 12–18, so URLs/s only as a ratio): admitting thread per accepted URL 2.72 / 2.71 /
//! 2.93 µs → 2.26 / 2.55 / 2.45 (medians 2.72 → 2.45, 0.90×), all threads 3.99 / 4.03 / 4.35
//! → 3.52 / 3.98 / 3.95, URLs/s medians 71.5 k → 82.8 k; peak RSS 463–466 → 439–446 MiB; the
//! same 35 bytes per queued URL and 2.26 URLs per entry (the item's struct is 8 bytes smaller,
//! so tails fill their memory share a few items later: 9,996,992 URLs written against
//! 9,997,120). Again later, load 5–6: 2.55 / 3.01 / 2.54 → 2.40 / 2.35 / 2.07 µs (medians 2.55
//! → 2.35, 0.92×), all threads 3.75 / 4.36 / 3.71 → 3.67 / 3.64 / 3.19, URLs/s medians 156 k →
//! 205 k. Short of the ≤ 2.0 µs aimed for. Perf of main's code at 3e6 (shares of all samples, the admitting thread 63 %
//! of them): the store's host map on push 7.6 % (waiting for memory), the seen-set's probes
//! 7.1 % (both threads), malloc and free ~12 % (both), the tallies on push ~2.7 %, the
//! schedule and the heap ~5 %.
//!
//! Tried and dropped: touching the tallies and store entries of a page's new URLs' hosts in
//! one tight loop before pushing them (so that their cache misses overlap), and the next heap
//! host's records before serving one. Alternated three times against the change above
//! (1e7, load 6–16): admitting thread 2.49 / 2.31 / 2.92 µs against 2.14 / 2.23 / 2.11, so
//! worse: the extra hashing and lookups cost more than the overlap saved. The store's map
//! on push stays the largest single cost; merging it with the tallies (one miss, not two)
//! is the next step.
//!
//! Session 15 (`scalerate4`), on the admitting thread's path, nothing changed in what is
//! queued, in which order, or what is written (the same 8,758,368 URLs queued at the end of
//! every 1e7 run, 35 bytes per queued URL):
//! - *One host record per host*: the tallies are in the store's host entries
//!   (`store::HostTally`), not in a map of their own, so a push finds the tally and the queue
//!   in one lookup. A host with a tally keeps its entry when its queue empties (the table of a
//!   sync still records only hosts with something queued or in flight; `hosts.bin` is
//!   unchanged). Alone this bought little: `perf` at 3e6 (main thread) showed the two maps'
//!   6.5 % + 5.8 % of all samples become 12.4 % in the one lookup left, a hashbrown lookup of
//!   a random host missing the cache twice (control bytes, bucket) and the TLB.
//! - *The store's host map is a table of its own* (`store/host_map.rs`): linear probing, the id
//!   and the 56-byte entry in one 64-byte slot aligned to a cache line, 2 MiB pages, 16 parts;
//!   so one miss per lookup, and [`Frontier::prefetch_hosts`] (a page's links, before they are
//!   pushed) and the links of a written group (8 entries ahead) start the misses early. Each
//!   part places ids with a seed of its own: without it a store reopened from its table (written
//!   in slot order) piled the ids into one cluster, and the first build of this took 8–20 s to
//!   reopen at 1e7 (test `ids_in_another_tables_order_are_placed_without_long_walks`).
//! - *The ready heap keeps its in-order pushes in a run beside it* (`schedule.rs`: a push no
//!   earlier than the run's last goes to its back, a pop takes the earlier front; exact, the
//!   same hosts in the same order), and *a hand-out's copy for checkpoints* keeps its text in
//!   one buffer (`in_flight.rs`) instead of a `String` each. Both are on the pop path, one pop
//!   per ~8 accepted URLs in the bench, so they weigh little per accepted URL.
//!
//! `SCALE_URLS=1e7`, main's fat-LTO binary (d1bb9bc) and this branch's run *at the same time*
//! (the machine shared with three other helpers' builds, load 6–15, which moved too much
//! between sequential runs: the same binary gave 2.34–3.00 µs), three pairs: admitting thread
//! per accepted URL 3.24 / 3.06 / 3.14 µs → 2.63 / 2.46 / 2.43 (medians 3.14 → 2.46, 0.78×),
//! all threads 4.77 / 4.42 / 4.60 → 4.23 / 3.86 / 3.83, URLs/s 34.3 k / 58.5 k / 52.3 k → 37.2 k
//! / 66.4 k / 69.9 k (medians 1.27×), peak RSS 441 → 427–428 MiB (the tallies' own map gone).
//! Alternated one after the other (the tallies and the run and the copies only, hashbrown
//! still): 2.68 / 2.76 / 2.70 → 2.57 / 2.82 / 2.63 µs, within the noise; with the table and
//! the prefetches: 3.00 / 2.34 / 2.78 → 2.58 / 2.13 / 2.17 (medians 2.78 → 2.17).
//! With the seeded placement, one more pair (load ~8): 2.79 → 2.27 µs (0.81×). Then the
//! machine went idle (load 1.6–2.4) and the two were alternated three times: admitting thread
//! 1.89 / 2.37 / 2.26 → 1.73 / 1.98 / 1.92 µs (medians 2.26 → 1.92, 0.85×), all threads 2.81 /
//! 3.59 / 3.47 → 2.71 / 3.18 / 3.11, URLs/s 353 k / 384 k / 404 k → 390 k / 443 k / 456 k
//! (medians 1.15×), peak RSS 439–441 → 423–427 MiB, 35 bytes per queued URL both; resume to
//! the first URL 325 / 356 / 313 → 364 / 359 / 356 ms (medians 325 → 359: the store's tables
//! and the tallies are loaded into tables that grow from empty; reserving their size from the
//! table file's host count first is the obvious next step). Misses cost more on the loaded
//! machine (other builds take the shared cache), hence the larger gain there.
//! `SCALE_URLS=1e8`, once, this branch's fat-LTO binary, load ~2 (e2e tests beside it for its
//! first minute): 352,999 URLs/s, admitting thread 2.26 µs per accepted URL, screening 1.15,
//! all threads 3.48; peak RSS 608 MiB (main: 624–627); 29 bytes per queued URL; pauses median
//! 53.6 ms, max 71.2; resume 440 ms to the first URL. Not a before/after (main's 1e8 figures
//! are of another session), and short of 400 k: the admitting thread is still the bound.
//!
//!
//! # Layout
//!
//! This file holds the [`Frontier`] API and its types; each sibling does one job:
//!
//! - `schedule.rs`: the heap of hosts by ready instant, admission under every budget;
//! - `budget.rs`: the budgets shared by queues (a name's, an address's): GCRA rate, cap,
//!   waiters;
//! - `address.rs`: each host's server address, looked up ahead for the address's budget;
//! - `residency.rs`: which hosts' state is in memory, eviction and restore;
//! - `robots_gate.rs`: robots.txt per host (fetch first, rules, backoff, give up);
//! - `snapshot.rs`: the checkpoint snapshot and the `hosts.bin` format;
//! - `in_flight.rs`: the frontier's copies of the URLs handed out, for checkpoints;
//! - `backend.rs`: [`FrontierBackend`], the operations the crawl's driver uses and what
//!   any frontier implementing them must promise;
//! - [`store`]: the per-host queues on disk; [`robots_cache`]: robots.txt bodies on disk.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use xxhash_rust::xxh3::xxh3_64;

use crate::config::{FrontierSection, PolitenessSection};
use crate::robots::RobotsOutcome;

mod adapt;
mod address;
mod backend;
mod budget;
mod handoff;
mod in_flight;
mod report;
mod residency;
pub mod robots_cache;
mod robots_gate;
mod schedule;
mod snapshot;
pub mod store;
#[cfg(test)]
mod tests;

pub use adapt::{ServerSignal, SlowedHost};
pub use address::{AddressAnswer, AddressLookup};
pub use backend::FrontierBackend;
pub use report::HostReport;
pub use snapshot::{FrontierSnapshot, SavedFrontier, SavedHosts};

use adapt::AdaptPolicy;
use budget::{BudgetKeys, Budgets, Limits, Rate};
use in_flight::InFlight;
use residency::Residency;
use robots_cache::{RobotsCache, RobotsCacheError, RobotsCacheOptions};
use robots_gate::{RobotsGate, RobotsState};
use schedule::{NotAdmitted, ReadyHeap};
use snapshot::TallyBuffers;
use store::{QueueStore, StoreError, StoreOptions};

/// One accepted URL waiting to be fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedUrl {
    /// The canonical URL.
    pub url: String,
    /// Links followed from a seed (seeds are 0; redirects keep their source's depth).
    pub depth: u32,
    /// The page the URL was found on (or that redirected to it); `None` for seeds. Shared:
    /// a page's links are queued with one parent text, not a copy each (an allocation and a
    /// free per queued URL, and again per pop's decoded item and per hand-out's copy, were
    /// most of the admitting thread's malloc traffic in the scale bench).
    pub parent: Option<Arc<str>>,
    /// Redirects followed to reach this URL.
    pub redirect_hops: u32,
    /// Fetch attempts already made (retries).
    pub attempts: u32,
}

impl QueuedUrl {
    /// A URL taken on at `depth`, found on `parent` (`None` for a seed) after
    /// `redirect_hops` redirects, not yet attempted.
    pub fn new(url: String, depth: u32, parent: Option<Arc<str>>, redirect_hops: u32) -> QueuedUrl {
        QueuedUrl {
            url,
            depth,
            parent,
            redirect_hops,
            attempts: 0,
        }
    }

    /// The one text form of a queued URL outside the frontier's own binary blocks: a JSON
    /// object, as the queue log and Redis's queues and leases store it.
    pub fn to_json(&self) -> String {
        // A struct of strings and integers always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads [`QueuedUrl::to_json`]'s form back.
    pub fn from_json(text: &str) -> Result<QueuedUrl, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// A host as the frontier knows it: the XXH3-64 of its key (see [`host_id`]).
pub(crate) type HostId = u64;

/// The id of the host whose key (`scheme://host[:port]`) is `key`.
pub fn host_id(key: &str) -> HostId {
    xxh3_64(key.as_bytes())
}

/// The hash by which a URL recorded after a checkpoint is recognised when it is popped.
pub(crate) fn url_hash(url: &str) -> u64 {
    xxh3_64(url.as_bytes())
}

/// A URL handed out for fetching. Give it back, once, with [`Frontier::complete`] or
/// `Frontier::retry`; until then the frontier keeps a copy and a checkpoint records it.
/// Only the frontier makes one.
#[derive(Debug)]
pub struct Dispatch {
    /// Which hand-out this is: the key of the frontier's copy.
    id: u64,
    pub(crate) host: HostId,
    /// The budgets it was charged to, released when it is given back.
    budgets: BudgetKeys,
    pub item: QueuedUrl,
    /// What the server's answer said about it, set by the fetch: the budgets adapt to it
    /// when the dispatch is given back (see `adapt.rs`). `None`: no answer (network error).
    pub(crate) signal: Option<ServerSignal>,
}

/// One request of a host's robots.txt: its first, or a redirect hop. Give it back, once,
/// with `Frontier::robots_done`.
#[derive(Debug, Clone)]
pub struct RobotsFetch {
    /// The host whose robots.txt this is.
    pub(crate) host: HostId,
    /// The host the request goes to, whose politeness it was sent under: `host` itself for
    /// the first request and same-host hops, another host for a hop that leaves it.
    pub(crate) via: HostId,
    /// What to request.
    pub(crate) url: String,
    /// Redirects followed before this request.
    pub(crate) hops: u32,
    /// The budgets it was charged to (those of `via`), released when it is given back.
    pub(crate) budgets: BudgetKeys,
}

/// What the frontier hands out next.
#[derive(Debug)]
pub enum Work {
    /// Fetch this URL.
    Fetch(Dispatch),
    /// Fetch one hop of a host's robots.txt, then report with `Frontier::robots_done`.
    Robots(RobotsFetch),
    /// This URL is disallowed by robots.txt: record it, do not fetch it. It is no
    /// longer queued and not in flight.
    Disallowed(QueuedUrl),
    /// This URL's host asks for a Crawl-delay longer than the crawl accepts
    /// (`FrontierPolicy::max_crawl_delay`): record it as deferred, do not fetch it. It is
    /// no longer queued and not in flight.
    Deferred {
        item: QueuedUrl,
        crawl_delay: Duration,
    },
}

/// Why the frontier could not go on. Each names the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum FrontierError {
    /// The queue store's files (each error names its file).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The robots.txt cache's files (each error names its file).
    #[error(transparent)]
    RobotsCache(#[from] RobotsCacheError),
    #[error(transparent)]
    Io(#[from] crate::durable::IoAt),
    #[error("{} is corrupt: {what}", path.display())]
    Corrupt { path: PathBuf, what: String },
}

/// The frontier's politeness settings.
#[derive(Debug, Clone)]
pub struct FrontierPolicy {
    /// A host name's budget: `per_host_rps`, `per_host_burst`, `per_host_concurrency`
    /// (unlimited when politeness is disabled: benchmarks, `politeness.enabled = false`).
    pub(crate) names: Limits,
    /// A server address's budget (`per_ip_rps`, `per_ip_concurrency`); `None` when both are
    /// off, and then no address is looked up.
    pub(crate) addresses: Option<Limits>,
    /// The configured interval between requests to one host name (zero when disabled).
    pub(crate) period: Duration,
    /// Consult robots.txt before a host's first page.
    pub(crate) respect_robots: bool,
    /// How long robots.txt rules are kept.
    pub(crate) robots_ttl: Duration,
    /// A host whose Crawl-delay is longer is not crawled: its URLs come out as
    /// [`Work::Deferred`].
    pub(crate) max_crawl_delay: Duration,
    /// How budgets adapt to what servers answer (off when politeness is).
    pub(crate) adapt: AdaptPolicy,
    /// `[[site]]` sections: a matching name's budget gets the site's rate and cap.
    pub(crate) sites: std::sync::Arc<crate::site::Sites>,
}

impl FrontierPolicy {
    pub fn from_config(p: &PolitenessSection) -> Self {
        let robots_ttl = Duration::from_secs_f64(p.robots_ttl_secs);
        let max_crawl_delay = Duration::from_secs_f64(p.max_crawl_delay_secs);
        if !p.enabled {
            return FrontierPolicy {
                names: Limits::UNLIMITED,
                addresses: None,
                period: Duration::ZERO,
                respect_robots: p.respect_robots,
                robots_ttl,
                max_crawl_delay,
                adapt: AdaptPolicy::OFF,
                sites: Default::default(),
            };
        }
        let period = Duration::from_secs_f64(1.0 / p.per_host_rps);
        let addresses = (p.per_ip_rps > 0.0 || p.per_ip_concurrency > 0).then(|| Limits {
            rate: (p.per_ip_rps > 0.0).then(|| Rate {
                period: Duration::from_secs_f64(1.0 / p.per_ip_rps),
                burst: 1,
            }),
            concurrency: if p.per_ip_concurrency > 0 {
                p.per_ip_concurrency
            } else {
                u32::MAX
            },
        });
        FrontierPolicy {
            names: Limits {
                rate: Some(Rate {
                    period,
                    burst: p.per_host_burst.max(1),
                }),
                concurrency: p.per_host_concurrency.max(1),
            },
            addresses,
            period,
            respect_robots: p.respect_robots,
            robots_ttl,
            max_crawl_delay,
            adapt: AdaptPolicy {
                enabled: p.adaptive,
                max_interval: Duration::from_secs_f64(p.adaptive_max_interval_secs),
                recovery: p.adaptive_recovery,
                latency_factor: p.adaptive_latency_factor,
                max_latency_delay: Duration::from_secs_f64(p.adaptive_max_latency_delay_secs),
                start: period,
            },
            sites: Default::default(),
        }
    }

    /// The policy with `[[site]]` sections, whose rates and caps override the name budgets
    /// of the hosts they match.
    pub fn with_sites(mut self, sites: std::sync::Arc<crate::site::Sites>) -> Self {
        self.sites = sites;
        self
    }

    /// The limits of the name budget of host key `key` when a `[[site]]` sets any.
    pub(crate) fn site_limits(&self, key: &str) -> Option<Limits> {
        let site = self.sites.for_host(crate::host::key_host(key))?;
        if site.rps.is_none() && site.burst.is_none() && site.concurrency.is_none() {
            return None;
        }
        let base = self.names;
        let rate = match (site.rps, base.rate) {
            (Some(rps), rate) => Some(Rate {
                period: Duration::from_secs_f64(1.0 / rps),
                burst: site.burst.or(rate.map(|r| r.burst)).unwrap_or(1),
            }),
            (None, Some(rate)) => Some(Rate {
                period: rate.period,
                burst: site.burst.unwrap_or(rate.burst),
            }),
            (None, None) => None,
        };
        Some(Limits {
            rate,
            concurrency: site.concurrency.unwrap_or(base.concurrency),
        })
    }
}

/// Where the frontier keeps its files and how much memory it may use.
#[derive(Debug, Clone)]
pub struct FrontierOptions {
    /// `OUT/frontier`: `queues/` (the store) and `robots/` (the robots.txt cache).
    pub dir: PathBuf,
    /// Memory for queued URLs (the store's budget).
    pub queue_memory: u64,
    /// Memory for the state of resident hosts.
    pub host_memory: u64,
    /// The robots.txt product token, to parse cached bodies again.
    pub robots_agent: String,
}

impl FrontierOptions {
    /// The options of a crawl writing to `out`.
    pub(crate) fn from_config(section: &FrontierSection, out: &Path, user_agent: &str) -> Self {
        FrontierOptions {
            dir: out.join("frontier"),
            queue_memory: section.memory.0,
            host_memory: section.host_memory.0,
            robots_agent: crate::robots::agent_token(user_agent),
        }
    }

    fn store_options(&self) -> StoreOptions {
        StoreOptions {
            memory: self.queue_memory,
            ..StoreOptions::default()
        }
    }

    fn queues_dir(&self) -> PathBuf {
        self.dir.join("queues")
    }

    fn robots_dir(&self) -> PathBuf {
        self.dir.join("robots")
    }
}

/// Figures for progress lines, summaries and benchmarks.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FrontierStats {
    pub queued: u64,
    pub in_flight: u64,
    /// Hosts ever seen.
    pub hosts: u64,
    /// Hosts with something queued.
    pub hosts_queued: u64,
    /// Hosts whose state is in memory, and its estimated bytes.
    pub resident_hosts: u64,
    pub resident_bytes: u64,
    pub evictions: u64,
    pub restores: u64,
    /// Estimated bytes of the store (URLs in memory and its host map, the tallies in it) and the heap.
    pub memory_bytes: u64,
    pub disk_bytes: u64,
}

/// How many hosts [`Frontier::top_hosts`] can report.
const TOP_HOSTS: usize = 20;

/// Per-host queues on disk and the schedule of hosts.
pub struct Frontier {
    policy: FrontierPolicy,
    options: FrontierOptions,
    store: QueueStore,
    /// `None` when robots.txt is not consulted.
    robots_cache: Option<RobotsCache>,
    /// The hosts whose state is in memory.
    resident: Residency,
    /// Hosts with the most URLs ever queued: (id, key, count), largest first.
    top: Vec<(HostId, String, u64)>,
    /// Hosts with work, by the instant each may next be served.
    ready: ReadyHeap,
    /// Pages and robots.txt fetches handed out and not yet given back.
    in_flight: u64,
    /// The pages among them, by [`Dispatch`] id (so in the order they were handed out):
    /// the frontier's copy, recorded by a checkpoint (see `in_flight.rs`).
    dispatched: InFlight,
    /// The id of the next [`Dispatch`].
    next_dispatch: u64,
    /// URLs recorded after the checkpoint this frontier resumed from that are still queued in
    /// the store: dropped, not fetched, when they reach the head of their queue.
    already_done: HashSet<u64>,
    tally_buffers: TallyBuffers,
    /// The budgets shared by hosts: names' and addresses'.
    budgets: Budgets,
    /// Address lookups to hand out ([`Frontier::take_lookups`]).
    lookups: Vec<AddressLookup>,
    /// Scratch for the hosts a release wakes.
    woken: Vec<HostId>,
    /// When this frontier was resumed from a checkpoint: hosts made resident soon after wait
    /// one rate period from then (see `residency.rs`).
    resumed_at: Option<Instant>,
}

impl Frontier {
    /// A new, empty frontier in `options.dir` (anything there before is removed).
    pub fn create(policy: FrontierPolicy, options: FrontierOptions) -> Result<Self, FrontierError> {
        match std::fs::remove_dir_all(&options.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(crate::durable::IoAt {
                    action: "remove",
                    path: options.dir.clone(),
                    source,
                }
                .into())
            }
        }
        let store = QueueStore::open(&options.queues_dir(), options.store_options())?;
        Self::with_store(policy, options, store)
    }

    /// The frontier as of a checkpoint: the store reopened exactly at its position (what was
    /// pushed after it is the caller's to push again, from its queue log), the host tallies
    /// and URLs still to drop from `hosts`, and `recorded_since`: hashes of URLs recorded
    /// after the checkpoint, dropped when they reach the head of their queue.
    pub fn resume(
        policy: FrontierPolicy,
        options: FrontierOptions,
        saved: &SavedFrontier,
        hosts: SavedHosts,
        recorded_since: impl IntoIterator<Item = u64>,
    ) -> Result<Self, FrontierError> {
        let store = QueueStore::reopen_discarding_after(
            &options.queues_dir(),
            options.store_options(),
            saved.store,
        )?;
        let mut frontier = Self::with_store(policy, options, store)?;
        for (host, count) in hosts.tallies {
            frontier.store.tally_mut(host).queued_ever = count;
        }
        frontier.already_done.extend(hosts.done);
        frontier.already_done.extend(recorded_since);
        let now = Instant::now();
        frontier.resumed_at = Some(now);
        let waiting: Vec<HostId> = frontier.store.hosts().map(|(host, _)| host).collect();
        for host in waiting {
            frontier.push_ready(host, now);
        }
        Ok(frontier)
    }

    fn with_store(
        policy: FrontierPolicy,
        options: FrontierOptions,
        store: QueueStore,
    ) -> Result<Self, FrontierError> {
        let robots_cache = if policy.respect_robots {
            Some(RobotsCache::open(
                &options.robots_dir(),
                RobotsCacheOptions::default(),
            )?)
        } else {
            None
        };
        Ok(Frontier {
            budgets: Budgets::new(policy.names, policy.addresses.unwrap_or(Limits::UNLIMITED))
                .with_adaptation(policy.adapt),
            lookups: Vec::new(),
            woken: Vec::new(),
            policy,
            options,
            store,
            robots_cache,
            resident: Residency::new(),
            top: Vec::new(),
            ready: ReadyHeap::default(),
            in_flight: 0,
            dispatched: InFlight::default(),
            next_dispatch: 0,
            already_done: HashSet::new(),
            tally_buffers: TallyBuffers::new(),
            resumed_at: None,
        })
    }

    /// Queues an accepted URL at the back of its host's queue.
    pub fn push(&mut self, host_key: &str, item: QueuedUrl) -> Result<(), FrontierError> {
        let id = host_id(host_key);
        let scheduled = self.count_queued_id(id, host_key);
        self.push_counted(id, scheduled, item)
    }

    /// A hint before pushing a page's new links: the records of their hosts are fetched
    /// into the cache, all of them at once, so that the pushes that follow do not wait for
    /// memory one host after another (a link to a host other than its page's is a cache miss:
    /// 1e6 hosts' records do not fit). Only for links whose host key is plainly a prefix of
    /// their text (see [`plain_host_key_len`]); changes nothing but timing.
    pub fn prefetch_hosts<'a>(&self, links: impl IntoIterator<Item = &'a crate::normalize::Link>) {
        for link in links {
            if let Some(key) = plain_key(link.as_str()) {
                self.store.prefetch(host_id(key));
            }
        }
    }

    /// [`Frontier::push`] of a URL whose host key is the first `key_len` bytes of its text
    /// (as [`plain_host_key_len`] found): the key is not copied out of it.
    pub fn push_keyed_by_prefix(
        &mut self,
        key_len: usize,
        item: QueuedUrl,
    ) -> Result<(), FrontierError> {
        let key = item.url.get(..key_len).unwrap_or(&item.url);
        let id = host_id(key);
        let scheduled = self.count_queued_id(id, key);
        self.push_counted(id, scheduled, item)
    }

    /// The store's half of a push, once counted: `scheduled` is whether host `id` already is.
    fn push_counted(
        &mut self,
        id: HostId,
        scheduled: bool,
        item: QueuedUrl,
    ) -> Result<(), FrontierError> {
        self.store.push_owned(id, item)?;
        if !scheduled {
            // A host already in the schedule stays where it is (what `schedule` would find
            // first, without its lookups and the clock).
            self.schedule(id, Instant::now());
        }
        Ok(())
    }

    /// Counts a URL queued for a host ([`Frontier::host_total_queued`], which
    /// `max_pages_per_host` reads) without queuing it: a resume replaying its queue log counts
    /// this way the URLs queued after the checkpoint and already recorded since.
    pub(crate) fn count_queued(&mut self, host_key: &str) {
        self.count_queued_id(host_id(host_key), host_key);
    }

    /// [`Frontier::count_queued`] of the host `id` of `host_key`; returns whether the host is
    /// in the schedule.
    fn count_queued_id(&mut self, id: HostId, host_key: &str) -> bool {
        // The tally lives in the host's store entry: the push that follows finds the entry
        // in cache (see `store::HostTally`).
        let tally = self.store.tally_mut(id);
        tally.queued_ever = tally.queued_ever.saturating_add(1);
        let (count, scheduled) = (tally.queued_ever as u64, tally.scheduled);
        // A host in the full list has a count above its last's (its own grew past it), so
        // when this one's does not, it is not in the list and nothing changes there.
        if self.top.len() < TOP_HOSTS || self.top.last().is_some_and(|last| count > last.2) {
            self.note_top(id, host_key, count);
        }
        scheduled
    }

    /// Puts a URL that was handed out back at the front of its host's queue, to be tried
    /// again no sooner than `delay` from now. The host as a whole waits that long too:
    /// a 429 or 503 is about the host, not the URL.
    pub(crate) fn retry(&mut self, dispatch: Dispatch, delay: Duration) {
        self.end_dispatch(&dispatch);
        let Dispatch {
            host: id, mut item, ..
        } = dispatch;
        item.attempts += 1;
        let now = Instant::now();
        if let Some(host) = self.resident.hosts.get_mut(&id) {
            host.not_before = host.not_before.max(now + delay);
        }
        self.store.push_front(id, item);
        self.schedule(id, now);
    }

    /// Marks a handed-out URL as done (fetched, failed or refused).
    pub fn complete(&mut self, dispatch: Dispatch) {
        self.end_dispatch(&dispatch);
        self.schedule(dispatch.host, Instant::now());
    }

    /// Forgets the frontier's copy of a dispatch and frees its place in flight.
    fn end_dispatch(&mut self, dispatch: &Dispatch) {
        let known = self.dispatched.remove(dispatch.id);
        debug_assert!(known, "a dispatch given back twice or not ours");
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(host) = self.resident.hosts.get_mut(&dispatch.host) {
            host.in_flight = host.in_flight.saturating_sub(1);
        }
        if let Some(signal) = &dispatch.signal {
            let name = self
                .resident
                .hosts
                .get(&dispatch.host)
                .map_or("", |h| crate::host::key_host(&h.key));
            self.budgets
                .adapt(dispatch.budgets.as_slice(), signal, name);
        }
        self.release(dispatch.budgets, Instant::now());
    }

    /// Hands out the next piece of work whose host may be served at `now`, if any.
    pub fn pop_ready(&mut self, now: Instant) -> Result<Option<Work>, FrontierError> {
        self.evict_if_over_budget(now);
        while let Some(id) = self.ready.pop_due(now) {
            if let Some(tally) = self.store.tally_if_kept(id) {
                tally.scheduled = false;
            }
            let work = self.serve(id, now)?;
            if !matches!(work, Some(Work::Fetch(_) | Work::Robots(_))) {
                // No request: a slot this host was woken for goes to the next waiter.
                self.pass_on(id, now);
            }
            if work.is_some() {
                return Ok(work);
            }
        }
        Ok(None)
    }

    /// Serves host `id`, just taken from the heap: its next piece of work if every budget
    /// allows it; otherwise `None`, with the host put back in the schedule where it belongs
    /// (the heap at its next instant, parked, or out of it with nothing queued).
    fn serve(&mut self, id: HostId, now: Instant) -> Result<Option<Work>, FrontierError> {
        if !self.already_done.is_empty() {
            self.drop_already_done(id)?;
        }
        let hops_waiting = self.has_robots_hops(id);
        if self.store.len(id) == 0 && !hops_waiting {
            return Ok(None);
        }
        self.make_resident(id, now)?;
        let Some(host) = self.resident.hosts.get(&id) else {
            return Ok(None);
        };
        if host.not_before > now {
            let at = host.not_before;
            self.push_ready(id, at);
            return Ok(None);
        }
        if hops_waiting {
            // A robots.txt redirect hop into this host goes before its own pages: the
            // host it is for waits on it. It needs no robots.txt of this host, only its
            // politeness (every budget of a request).
            return match self.hand_out_robots_hop(id, now) {
                Ok(work) => Ok(Some(work)),
                Err(NotAdmitted::Until(at)) => {
                    self.push_ready(id, at);
                    Ok(None)
                }
                Err(NotAdmitted::Parked) => Ok(None),
            };
        }
        let fetch_robots = match self.robots_gate(id, now)? {
            RobotsGate::Open => false,
            RobotsGate::FetchRobots => true,
            RobotsGate::Skip => return Ok(None),
            RobotsGate::WaitUntil(at) => {
                self.push_ready(id, at);
                return Ok(None);
            }
            RobotsGate::Disallowed(item) => {
                self.schedule(id, now);
                return Ok(Some(Work::Disallowed(item)));
            }
            RobotsGate::Deferred { item, crawl_delay } => {
                self.schedule(id, now);
                return Ok(Some(Work::Deferred { item, crawl_delay }));
            }
        };
        let budgets = match self.admit(id, now) {
            Ok(budgets) => budgets,
            Err(NotAdmitted::Until(at)) => {
                self.push_ready(id, at);
                return Ok(None);
            }
            Err(NotAdmitted::Parked) => return Ok(None),
        };
        if fetch_robots {
            let Some(host) = self.resident.hosts.get_mut(&id) else {
                return Ok(None);
            };
            host.robots = RobotsState::Fetching;
            let url = crate::robots::robots_url(&host.key)
                .map(String::from)
                .unwrap_or_else(|_| format!("{}/robots.txt", host.key));
            return Ok(Some(Work::Robots(RobotsFetch {
                host: id,
                via: id,
                url,
                hops: 0,
                budgets,
            })));
        }
        let Some(item) = self.store.pop(id)? else {
            // Admitted with nothing to send (cannot happen: the queue was not empty); the
            // slots go back.
            if let Some(host) = self.resident.hosts.get_mut(&id) {
                host.in_flight = host.in_flight.saturating_sub(1);
            }
            self.in_flight = self.in_flight.saturating_sub(1);
            self.release(budgets, now);
            return Ok(None);
        };
        self.schedule(id, now);
        let dispatch = self.hand_out(id, item, budgets);
        Ok(Some(Work::Fetch(dispatch)))
    }

    /// Makes the dispatch of `item`, keeping the frontier's copy until it is given back.
    fn hand_out(&mut self, host: HostId, item: QueuedUrl, budgets: BudgetKeys) -> Dispatch {
        let id = self.next_dispatch;
        self.next_dispatch += 1;
        self.dispatched.insert(id, host, &item);
        Dispatch {
            id,
            host,
            budgets,
            item,
            signal: None,
        }
    }

    /// Drops, from the head of `id`'s queue, URLs recorded after the checkpoint resumed from.
    fn drop_already_done(&mut self, id: HostId) -> Result<(), FrontierError> {
        while let Some(front) = self.store.peek(id)? {
            if !self.already_done.remove(&url_hash(&front.url)) {
                break;
            }
            self.store.pop(id)?;
        }
        Ok(())
    }

    /// Records the result of a robots.txt fetch handed out as [`Work::Robots`]. When the
    /// host's robots.txt has been unreachable too many times, its queued URLs are given
    /// up and returned, so that the caller records them.
    pub(crate) fn robots_done(
        &mut self,
        fetch: RobotsFetch,
        outcome: RobotsOutcome,
    ) -> Result<Vec<QueuedUrl>, FrontierError> {
        self.record_robots(fetch, outcome)
    }

    /// When the earliest scheduled host becomes ready, if any host is scheduled.
    pub(crate) fn next_ready_at(&self) -> Option<Instant> {
        self.ready.next_at()
    }

    /// URLs waiting (not in flight).
    pub fn queued(&self) -> u64 {
        self.store.total()
    }

    /// Pages and robots.txt fetches handed out and not yet given back.
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Nothing queued and nothing in flight: the crawl is over.
    pub(crate) fn is_finished(&self) -> bool {
        self.store.total() == 0 && self.in_flight == 0
    }

    /// Hosts known to the frontier.
    pub(crate) fn host_count(&self) -> usize {
        self.store.tally_count()
    }

    /// URLs ever queued for a host (0 for a host not seen yet).
    pub(crate) fn host_total_queued(&self, key: &str) -> u64 {
        self.store
            .tally(host_id(key))
            .map_or(0, |t| t.queued_ever as u64)
    }

    /// The key of a host whose state is in memory (one in flight always is).
    pub(crate) fn host_key(&self, host: HostId) -> Option<&str> {
        self.resident.hosts.get(&host).map(|h| h.key.as_str())
    }

    /// Hosts with the most URLs ever queued, largest first (at most 20): where a trap would
    /// show. Each with the URLs ever queued and queued now.
    pub(crate) fn top_hosts(&self, count: usize) -> Vec<(String, u64, usize)> {
        self.top
            .iter()
            .take(count)
            .map(|(id, key, total)| (key.clone(), *total, self.store.len(*id) as usize))
            .collect()
    }

    /// The host with the most URLs queued right now (a growing trap shows here first),
    /// with its count and how many it has had in all. Looks at every host with something
    /// queued: call it for a progress line, not per URL.
    pub(crate) fn busiest_host(&mut self) -> Option<(String, usize, u64)> {
        let (id, len) = self.store.hosts().max_by_key(|&(_, len)| len)?;
        let key = match self.resident.hosts.get(&id) {
            Some(state) => state.key.clone(),
            None => match self.store.peek(id) {
                Ok(Some(front)) => queued_key(&front.url),
                _ => return None,
            },
        };
        let total = self.store.tally(id).map_or(0, |t| t.queued_ever as u64);
        Some((key, len as usize, total))
    }

    /// The hosts (and addresses) adaptation slowed the most, largest slow-down first.
    pub(crate) fn slowed_hosts(&self) -> Vec<SlowedHost> {
        self.budgets.slowed().to_vec()
    }

    /// What the queue store wrote to its log since it was opened, by cause (for benchmarks:
    /// where the bytes per queued URL go).
    pub fn store_write_stats(&self) -> store::WriteStats {
        self.store.write_stats()
    }

    /// The queue store's entry reads: (served by a group already decoded, decoded a group).
    pub fn store_group_reads(&self) -> (u64, u64) {
        self.store.group_reads()
    }

    /// Figures for progress and benchmarks.
    pub fn stats(&self) -> FrontierStats {
        FrontierStats {
            queued: self.store.total(),
            in_flight: self.in_flight,
            hosts: self.store.tally_count() as u64,
            hosts_queued: self.store.host_count() as u64,
            resident_hosts: self.resident.hosts.len() as u64,
            resident_bytes: self.resident.bytes,
            evictions: self.resident.evictions,
            restores: self.resident.restores,
            memory_bytes: self.store.memory_bytes()
                + self.ready.memory_bytes()
                + self.budgets.memory_bytes()
                + self.resident.memory_bytes()
                + self.robots_cache.as_ref().map_or(0, |c| c.memory_bytes()),
            disk_bytes: self.store.disk_bytes()
                + self.robots_cache.as_ref().map_or(0, |c| c.disk_bytes()),
        }
    }

    /// The pause of a checkpoint: the store writes its tails and encodes its table, with
    /// the URLs in flight (handed out, not given back) at the front of their hosts' queues;
    /// the tallies are copied. Write the result with [`FrontierSnapshot::write`] on any
    /// thread, then call [`Frontier::finish_checkpoint`].
    pub fn begin_checkpoint(&mut self) -> Result<FrontierSnapshot, FrontierError> {
        self.snapshot()
    }

    /// After the checkpoint holding `saved` is published: the store may reclaim what only
    /// older checkpoints needed.
    pub fn finish_checkpoint(&mut self, saved: &SavedFrontier) -> Result<(), FrontierError> {
        self.store.finish_sync(saved.store)?;
        Ok(())
    }

    fn note_top(&mut self, id: HostId, key: &str, count: u64) {
        if let Some(entry) = self.top.iter_mut().find(|(h, _, _)| *h == id) {
            entry.2 = count;
        } else if self.top.len() < TOP_HOSTS {
            self.top.push((id, key.to_string(), count));
        } else if self.top.last().is_some_and(|last| count > last.2) {
            self.top.pop();
            self.top.push((id, key.to_string(), count));
        } else {
            return;
        }
        self.top
            .sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.1.cmp(&b.1)));
    }
}

pub(crate) use crate::host::key_of;

/// The length of a canonical link's host key (what [`Link::host_key`] gives) when its text
/// plainly starts with it (see `plain_key`): then [`Frontier::push_keyed_by_prefix`] takes
/// the key from the queued URL's text. `None`: ask `Link::host_key`. Why: the admitting thread
/// needs the key once per queued URL, and `host_key`'s `format!` was an allocation and a free
/// per URL (~2 % of the scale bench's samples at 3e6 URLs).
///
/// [`Link::host_key`]: crate::normalize::Link::host_key
pub fn plain_host_key_len(link: &crate::normalize::Link) -> Option<usize> {
    let key = plain_key(link.as_str())?;
    debug_assert_eq!(key, link.host_key(), "{}", link.as_str());
    Some(key.len())
}

/// The host key of a queued URL ([`key_of`]'s), taken from its text without parsing it when
/// the text plainly is one already (see [`plain_key`]). Why: an evicted host is restored from
/// its first queued URL, and at 1e6 hosts nearly every pop restores one; parsing the URL for
/// its key was ~2 % of the scale bench's samples at 3e6 URLs.
pub(crate) fn queued_key(url: &str) -> String {
    match plain_key(url) {
        Some(key) => key.to_string(),
        None => key_of(url),
    }
}

/// The host key of `url` as a prefix of its text, when that prefix is exactly what
/// [`key_of`] gives: `http://` or `https://`, then a host of non-empty labels of lowercase
/// letters, digits and `-` (the last starting with a letter, so never an IPv4 address; none
/// starting with `xn--`, whose punycode the parser checks), then an optional port (digits,
/// no leading zero, not the scheme's default), then `/`, `?`, `#` or the end. Anything else
/// (upper case, a trailing dot, user info, percent signs, IP literals, IDNA) is `None`, and
/// the caller parses.
fn plain_key(url: &str) -> Option<&str> {
    let (rest, default_port) = if let Some(rest) = url.strip_prefix("http://") {
        (rest, "80")
    } else if let Some(rest) = url.strip_prefix("https://") {
        (rest, "443")
    } else {
        return None;
    };
    let len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..len];
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if let Some(port) = port {
        let plain = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && !port.starts_with('0')
            && port.parse::<u32>().is_ok_and(|p| p <= u32::from(u16::MAX))
            && port != default_port;
        if !plain {
            return None;
        }
    }
    let mut last_start = None;
    for label in host.split('.') {
        let plain = !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with("xn--");
        if !plain {
            return None;
        }
        last_start = label.bytes().next();
    }
    if !last_start.is_some_and(|b| b.is_ascii_lowercase()) {
        return None;
    }
    Some(&url[..url.len() - rest.len() + len])
}
