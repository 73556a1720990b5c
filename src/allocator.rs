//! Process-wide memory-allocator tuning, applied once at start by the `crawler` binary
//! (and by the benchmarks, so that they measure what users run).
//!
//! Response bodies are allocated on the fetch threads and freed on the parse threads.
//! glibc's malloc answers that pattern by growing one arena per thread and keeping freed
//! memory in each, which measured on the crawl benchmark (30,000 pages of 16 KiB) as 86 MB
//! peak RSS. Capping glibc at two arenas brought it to 21 MB at the same throughput;
//! mimalloc, tried as the alternative, gave 38–47 MB. So the crawler keeps the system
//! allocator and caps its arenas. Other C libraries are left alone.

/// Caps glibc malloc at two arenas. Call before starting threads; a no-op elsewhere.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; M_ARENA_MAX is valid on glibc,
    // and it is called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
