//! Process-wide memory-allocator tuning, applied once at start by the `crawler` binary
//! (and by the benchmarks, so that they measure what users run), and the advice for 2 MiB
//! pages that the large tables read at random take (`advise_huge_pages`).
//!
//! Response bodies are allocated on the fetch threads and freed on the parse threads.
//! glibc's malloc answers that pattern by growing one arena per thread and keeping freed
//! memory in each, which measured on the crawl benchmark (30,000 pages of 16 KiB) as 86 MB
//! peak RSS. Capping glibc at two arenas brought it to 21 MB at the same throughput;
//! mimalloc, tried as the alternative, gave 38–47 MB. So the crawler keeps the system
//! allocator and caps its arenas. Other C libraries are left alone.
//!
//! The mmap threshold is also fixed at 128 KiB: glibc otherwise raises it each time a large
//! block is freed (up to 32 MiB), after which large bodies (long-tailed pages run to several
//! MB) come from the heap and their freed space is kept. Measured with both settings
//! (`cargo bench --bench crawl -- --no-warc`, `-- --long-tail`): 20.9 MB peak RSS on 16 KiB
//! pages, 40.8 MB on long-tailed ones. (Figures of 86–92 MB seen under `cargo bench` were
//! cargo's own RSS: getrusage's `ru_maxrss` survives `execve`; the benches read `VmHWM`.)
//!
//! What the cap costs in CPU, measured 2026-11-26 back to back (`cargo bench --bench crawl
//! -- --no-warc --runs 3 --arenas N`, thin-LTO build, machine shared with other builds):
//! on 16 KiB pages, 2 arenas 91 / 104 / 107 µs of crawler CPU per page in three runs of the
//! bench, glibc's default (16 here) 92 / 90 / 97, peak RSS 34–36 MB either way; on
//! long-tailed pages (`-- --long-tail`), 2 arenas 119 and 115 µs at 47.6 and 48.9 MB,
//! 4 arenas 114 µs at 49.4 MB, the default 109 µs at 54.3 MB. The cap costs at most ~8%
//! of the CPU, inside this machine's noise, and lifting it grows the long-tail peak by 14%:
//! it stays at 2.

/// The mmap threshold: blocks from this size up are mapped and unmapped on their own.
const MMAP_THRESHOLD: i32 = 128 << 10;

/// Free memory an arena keeps at its top before giving it back to the kernel. glibc's 128 KiB
/// (fixed, like the mmap threshold, once that is set) is less than the bodies in flight
/// (64 × 16 KiB on the crawl bench), so the heap's top was given back and faulted in again
/// all the time: about one page fault per crawled page, most of them on the fetch threads
/// receiving bodies (`perf record -e page-faults` on the crawl bench: 40,500 faults for
/// 30,000 pages, 10,100 with 4 MiB, no fewer with 16 MiB). What it costs: up to 4 MiB per
/// arena (three at most) of memory freed but kept; large bodies are mapped apart anyway.
/// Measured 2026-11-26 with the `cpu80` branch's other changes (`cargo bench --bench crawl
/// -- --no-warc --runs 3`, three invocations each, thin LTO, side by side with its base):
/// peak RSS 38.8–40.3 MB against 34.0–35.9 MB.
const TRIM_THRESHOLD: i32 = 4 << 20;

/// Caps glibc malloc at two arenas and fixes its mmap and trim thresholds. Call before starting
/// threads; a no-op elsewhere.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; M_ARENA_MAX, M_MMAP_THRESHOLD and
    // M_TRIM_THRESHOLD are valid on glibc, and it is called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

/// Asks the kernel to back the 2 MiB-aligned part of `items` with 2 MiB pages. For a large
/// array read at random (a hash table of ~1e6 entries, the seen-set) each lookup otherwise
/// misses the TLB too, and for one touched at random as it fills, each 4 KiB page costs a
/// fault. Call it before the array is written: a page already faulted in stays as it is.
/// Advice only: without transparent huge pages (or off Linux) nothing changes.
pub(crate) fn advise_huge_pages<T>(items: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE_PAGE: usize = 2 << 20;
        let start = items.as_mut_ptr() as usize;
        let end = start + std::mem::size_of_val(items);
        let aligned = start.next_multiple_of(HUGE_PAGE);
        let aligned_end = end - end % HUGE_PAGE;
        if aligned_end > aligned {
            // SAFETY: advice on memory this slice owns (the range lies within it); madvise
            // neither reads nor moves its contents, and a failure (no THP) is harmless.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    aligned_end - aligned,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = items;
}
