//! The crawler's memory allocator ([`CrawlerAllocator`]: mimalloc, tuned; the system's on
//! request), applied by the `crawler` binary and by the benchmarks (so that they measure what
//! users run), and the advice for 2 MiB pages that the large tables read at random take
//! (`advise_huge_pages`).
//!
//! # Why mimalloc, and why tuned
//! Every page costs the crawl ~40 allocations (hyper's and reqwest's per request, a tokio
//! task per fetch, the body, the links' batch), and response bodies are allocated on the
//! fetch threads and freed on the parse threads (or on the output thread, with the archive
//! on). glibc's malloc served that at a price: with its arenas capped at two (below), malloc
//! and free were ~10% of the fetch threads' CPU (`perf record` of the crawl bench:
//! `_int_malloc`, `unlink_chunk`, `malloc_consolidate`), each tokio task, aligned to 128
//! bytes, went through glibc's slow `memalign` path (one per page: `perf probe` on
//! `_mid_memalign`), and with the archive on its peak RSS wandered between 78 and 150 MB from
//! one invocation of the bench to the next. mimalloc (the `mimalloc` crate, Microsoft's
//! allocator, v3) keeps per-thread free lists, frees across threads without a lock and
//! serves aligned blocks from its size classes.
//!
//! Out of the box it keeps freed memory for a second (`purge_delay` = 1,000 ms) and commits
//! its arenas eagerly, so its purges only `MADV_FREE` pages that stay in the RSS: peak RSS
//! 98–106 MB on the crawl bench, 163–174 MB on long-tailed pages. Set here, before its first
//! allocation: arenas committed on demand (`arena_eager_commit` = 0, so a purge gives pages
//! back) and freed memory purged after 10 ms (mimalloc v2's default). And blocks from
//! `LARGE` (128 KiB) up come from glibc: response bodies of real size (and the brotli
//! decoder's window), where mimalloc held more memory (long-tailed pages: 76–82 MB against
//! glibc's 47–52). glibc serves them from its heap up to `MMAP_THRESHOLD` (4 MiB), where
//! the next page's body reuses the last one's memory, and maps only larger ones.
//!
//! Against glibc alone (two arenas), measured 2026-11-27 with fat-LTO bench binaries
//! (`cargo bench --bench crawl`, `-- --long-tail`, `-- --real-size`; the allocators of one
//! binary alternated in one sitting): 84–89 µs of CPU per 16 KiB page against 98–99, and a
//! peak RSS of 52–59 MB against 76–119 (mimalloc for every block: 88–93 µs, 61–62 MB); the
//! same on long-tailed sizes (136 against 139 µs); but with glibc's mmap threshold then at
//! 128 KiB, pages of real size cost 12–20% more (0.98–1.03 against 0.82–0.92 ms, the sys
//! time 0.36–0.42 ms a page against 0.22–0.26).
//!
//! The real-size loss was page faults: `perf record -e page-faults` of `-- --real-size`
//! counted the fetch threads' faults under `memmove` (a decoded body growing into fresh
//! memory) and under brotli's `ProcessCommands` (its window, allocated per response): each
//! block of 128 KiB and more was mapped for one page, faulted in 4 KiB at a time, and
//! unmapped. With glibc's mmap threshold at 4 MiB those blocks come from its heap and
//! the next page reuses them (the current setting; 2026-11-27, another machine of this
//! kind, three invocations of each alternated, medians; 16 KiB pages the "pages.jsonl
//! only" CPU):
//!
//! | crawler's allocator | real-size pages: CPU per page (sys), peak RSS | 16 KiB pages: CPU per page, peak RSS | archive on/off, pages/s |
//! |---|---|---|---|
//! | mimalloc, glibc from 128 KiB, mapped from 128 KiB (before) | 0.83 / 0.86 / 0.78 ms (sys 0.27–0.30), 50–54 MB | 76 / 75 / 74 µs, 50–58 MB | 0.914 / 0.922 / 0.834 |
//! | **mimalloc, glibc from 128 KiB, mapped from 4 MiB** | 0.70 / 0.70 / 0.73 ms (sys 0.15–0.16), 63–65 MB | 77 / 74 / 76 µs, 59–65 MB | 0.906 / 0.913 / 0.927 |
//! | glibc alone, mapped from 4 MiB | 0.70 / 0.65 / 0.66 ms (sys 0.10–0.13), 50–53 MB | 84 / 81 / 80 µs, 55–69 MB | 0.844 / 0.853 / 0.892 |
//! | glibc alone, mapped from 128 KiB | 0.72 / 0.69 / 0.72 ms (sys 0.18–0.19), 44–45 MB | 87 / 83 / 87 µs, 58–75 MB | 0.865 / 0.861 / 0.862 |
//!
//! So 16% less CPU on pages of real size for 10–12 MB more peak RSS (the heap's freed
//! bodies, kept for the next ones), the same on 16 KiB pages. On long-tailed sizes
//! (`-- --long-tail --runs 2`, the two mmap thresholds alternated twice): 96 / 96 µs a page
//! against 106 / 106, peak RSS 65–73 MB against 50–57. Moving the mimalloc/glibc
//! boundary down instead (glibc from 64 or 32 KiB, still mapped from 128 KiB) gave
//! 0.98 / 0.97 ms against 1.02 in a slower sitting: the mapping was the cost, not the
//! boundary.
//!
//! `CRAWLER_ALLOCATOR=system` in the environment makes the crawler use the system's allocator
//! alone (glibc, with the tuning below), `CRAWLER_ALLOCATOR=mimalloc` mimalloc alone (large
//! blocks too, for comparison): the choice is made once, at the process's first
//! allocation, and never changes, so every block is freed by the allocator that made it.
//! `MIMALLOC_PURGE_DELAY` and `MIMALLOC_ARENA_EAGER_COMMIT`, when set, win over the values
//! here (mimalloc's own environment variables).
//!
//! # glibc's tuning (with `CRAWLER_ALLOCATOR=system`, and for C libraries' own allocations)
//! glibc's malloc answers bodies freed on another thread by growing one arena per thread and
//! keeping freed memory in each: 86 MB peak RSS on the crawl benchmark, 21 MB with two
//! arenas at the same throughput. Its mmap threshold is fixed at 4 MiB (see above: bodies up
//! to that size come from the heap and their memory serves the next ones; a fixed
//! threshold also stops glibc from raising it, up to 32 MiB, each time a mapped block is
//! freed, so a rare huge body is still mapped and given back). Its trim threshold is 4 MiB:
//! glibc's 128 KiB is less than the bodies in flight (64 × 16 KiB), so the heap's top was
//! given back and faulted in again all the time (40,500 page faults for 30,000 pages; 10,100
//! with 4 MiB).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// The mmap threshold (glibc): blocks from this size up are mapped and unmapped on their own;
/// smaller ones come from the heap, whose freed memory the next block reuses without page
/// faults (the module doc's table).
const MMAP_THRESHOLD: i32 = 4 << 20;

/// Free memory a glibc arena keeps at its top before giving it back to the kernel.
const TRIM_THRESHOLD: i32 = 4 << 20;

/// mimalloc's options this module sets, by their index in `mi_option_t` (mimalloc v3's
/// `mimalloc.h`, as vendored by `libmimalloc-sys` 0.1.49: the crate exports no constant for
/// them). The test `the_option_indices_name_the_options_meant` checks them against their
/// defaults, so an update that renumbers them fails it.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds mimalloc keeps freed memory before giving it back.
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// The global allocator of the crawler's binaries: mimalloc, tuned (see the module's doc), for
/// blocks under `LARGE` and glibc from there up; the system's alone with
/// `CRAWLER_ALLOCATOR=system`, mimalloc alone with `CRAWLER_ALLOCATOR=mimalloc`. Declare it with
/// `#[global_allocator] static ALLOCATOR: CrawlerAllocator = CrawlerAllocator;`.
pub struct CrawlerAllocator;

/// Which allocator serves the process: not chosen yet, mimalloc (glibc from `LARGE`), the
/// system's alone, mimalloc alone.
static CHOICE: AtomicU8 = AtomicU8::new(UNCHOSEN);
const UNCHOSEN: u8 = 0;
const MIMALLOC: u8 = 1;
const SYSTEM: u8 = 2;
const MIMALLOC_ALL: u8 = 3;

/// Whether the system's allocator serves the process (chosen at the first allocation).
#[inline]
fn system() -> bool {
    match CHOICE.load(Ordering::Relaxed) {
        MIMALLOC | MIMALLOC_ALL => false,
        SYSTEM => true,
        _ => choose(),
    }
}

/// The first allocation's choice, from the environment; mimalloc's options are set before
/// it allocates anything. Reads the environment with `getenv`, which does not allocate.
#[cold]
fn choose() -> bool {
    let wanted = if env_is(c"CRAWLER_ALLOCATOR", b"system") {
        SYSTEM
    } else {
        tune_mimalloc();
        if env_is(c"CRAWLER_ALLOCATOR", b"mimalloc") {
            MIMALLOC_ALL
        } else {
            MIMALLOC
        }
    };
    // The first allocation runs before `main`, on one thread; should two race, both take the
    // first one's choice.
    match CHOICE.compare_exchange(UNCHOSEN, wanted, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => wanted == SYSTEM,
        Err(chosen) => chosen == SYSTEM,
    }
}

/// Whether the environment variable `name` is set, and to `value` if one is given (`b""`:
/// set to anything).
fn env_is(name: &std::ffi::CStr, value: &[u8]) -> bool {
    #[cfg(unix)]
    {
        // SAFETY: `name` is NUL-terminated; `getenv` returns NULL or a NUL-terminated string
        // of the environment, read before any other thread could change it.
        unsafe {
            let found = libc::getenv(name.as_ptr());
            !found.is_null()
                && (value.is_empty() || std::ffi::CStr::from_ptr(found).to_bytes() == value)
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (name, value);
        false
    }
}

/// Sets mimalloc's options, where the environment does not.
fn tune_mimalloc() {
    // SAFETY: `mi_option_set` stores an option's value; the indices are mimalloc v3's (see
    // their constants).
    unsafe {
        if !env_is(c"MIMALLOC_ARENA_EAGER_COMMIT", b"") {
            libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0);
        }
        if !env_is(c"MIMALLOC_PURGE_DELAY", b"") {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
        }
    }
}

// SAFETY: which allocator serves a block depends only on the process's choice (settled at
// the first call, never changed) and on the block's size (`from_system`), and Rust hands
// `dealloc` and `realloc` the layout the block was allocated with, so each block is freed,
// grown or shrunk by the allocator that made it; a block whose new size crosses
// [`LARGE`] is moved (allocated by the other, copied, freed). Both allocators uphold
// `GlobalAlloc`'s contract themselves.
unsafe impl GlobalAlloc for CrawlerAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            if from_system(layout.size()) {
                System.alloc(layout)
            } else {
                mimalloc::MiMalloc.alloc(layout)
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        unsafe {
            if from_system(layout.size()) {
                System.alloc_zeroed(layout)
            } else {
                mimalloc::MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above; `ptr` came from the allocator its size names (see the impl's
        // comment).
        unsafe {
            if from_system(layout.size()) {
                System.dealloc(ptr, layout)
            } else {
                mimalloc::MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (old_system, new_system) = (from_system(layout.size()), from_system(new_size));
        // SAFETY: as above; a block crossing `LARGE` is moved with a layout of the new size
        // and the same alignment, which the caller guarantees is valid.
        unsafe {
            match (old_system, new_system) {
                (true, true) => System.realloc(ptr, layout, new_size),
                (false, false) => mimalloc::MiMalloc.realloc(ptr, layout, new_size),
                _ => {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let moved = self.alloc(new_layout);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    moved
                }
            }
        }
    }
}

/// Blocks from this size up come from the system's allocator even where mimalloc serves the
/// rest: glibc's heap (up to [`MMAP_THRESHOLD`], set by [`limit_malloc_arenas`]), where a
/// block freed by one page serves the next. They are response bodies (a real page's 242 KB,
/// growing as they are decoded) and decoders' windows, few per page, where mimalloc copied
/// on every doubling and kept the pages it purged to fault them in again.
const LARGE: usize = 128 << 10;

/// Whether a block of `size` bytes comes from the system's allocator.
#[inline]
fn from_system(size: usize) -> bool {
    system() || (size >= LARGE && !mimalloc_for_all())
}

/// `CRAWLER_ALLOCATOR=mimalloc`: every block from mimalloc, large ones too (for comparison).
fn mimalloc_for_all() -> bool {
    CHOICE.load(Ordering::Relaxed) == MIMALLOC_ALL
}

/// Caps glibc malloc at two arenas and fixes its mmap and trim thresholds: for the system's
/// allocator when `CRAWLER_ALLOCATOR=system` chose it, and for what C libraries allocate
/// with `malloc` either way. Call before starting threads; a no-op elsewhere.
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

/// Which allocator serves this process, with mimalloc's settings as mimalloc reads them
/// back, for the benchmarks' and the log's reports: `mimalloc (purge delay 10 ms, eager
/// commit 0)` or `system`.
pub fn describe() -> String {
    if CHOICE.load(Ordering::Relaxed) == SYSTEM {
        return "system".into();
    }
    // SAFETY: `mi_option_get` reads an option.
    let (delay, eager) = unsafe {
        (
            libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
            libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_EAGER_COMMIT),
        )
    };
    let large = if mimalloc_for_all() {
        "large blocks too".to_string()
    } else {
        format!("blocks from {} KiB the system's", LARGE >> 10)
    };
    format!("mimalloc (purge delay {delay} ms, eager commit {eager}; {large})")
}

/// A transparent huge page on x86-64 and arm64 with 4 KiB base pages: what
/// [`advise_huge_pages`] and the seen-set's own mapping (`seen/blocks.rs`) align to.
#[cfg(target_os = "linux")]
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// Asks the kernel to back the 2 MiB-aligned part of `items` with 2 MiB pages. It advises
/// only within `items`, whose neighbours belong to the allocator; the seen-set, which maps
/// its own memory, rounds its mapping up to whole huge pages instead. For a large
/// array read at random (a hash table of ~1e6 entries, the seen-set) each lookup otherwise
/// misses the TLB too, and for one touched at random as it fills, each 4 KiB page costs a
/// fault. Call it before the array is written: a page already faulted in stays as it is.
/// Advice only: without transparent huge pages (or off Linux) nothing changes.
pub(crate) fn advise_huge_pages<T>(items: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_indices_name_the_options_meant() {
        // mimalloc v3's defaults, distinct enough to tell the options apart: eager commit 2
        // ("on where the OS overcommits"), purge delay 1,000 ms. This test process does not
        // use `CrawlerAllocator`, so nothing here has set them.
        // SAFETY: `mi_option_get` reads an option (initializing it from the environment).
        let (eager, delay) = unsafe {
            (
                libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_EAGER_COMMIT),
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
            )
        };
        if !env_is(c"MIMALLOC_ARENA_EAGER_COMMIT", b"") {
            assert_eq!(
                eager, 2,
                "option {MI_OPTION_ARENA_EAGER_COMMIT} is not arena_eager_commit"
            );
        }
        if !env_is(c"MIMALLOC_PURGE_DELAY", b"") {
            assert_eq!(
                delay, 1000,
                "option {MI_OPTION_PURGE_DELAY} is not purge_delay"
            );
        }
    }

    #[test]
    fn both_allocators_allocate_grow_zero_and_free() {
        // Whatever the process chose, each path serves aligned, zeroed and grown blocks.
        let layouts = [
            Layout::from_size_align(24, 8).unwrap(),
            Layout::from_size_align(4096, 128).unwrap(),
            Layout::from_size_align(300_000, 16).unwrap(),
            // Grown three times: across `LARGE`, so the crawler's allocator moves it.
            Layout::from_size_align(LARGE / 2 - 8, 64).unwrap(),
        ];
        for allocator in [
            &mimalloc::MiMalloc as &dyn GlobalAlloc,
            &System,
            &CrawlerAllocator,
        ] {
            for layout in layouts {
                // SAFETY: non-zero sizes; each block is freed once, with its layout.
                unsafe {
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert!(!zeroed.is_null());
                    assert_eq!(zeroed as usize % layout.align(), 0);
                    assert!(std::slice::from_raw_parts(zeroed, layout.size())
                        .iter()
                        .all(|&b| b == 0));
                    zeroed.write_bytes(0xA5, layout.size());
                    let grown = allocator.realloc(zeroed, layout, layout.size() * 3);
                    assert!(!grown.is_null());
                    assert_eq!(grown as usize % layout.align(), 0);
                    let kept = std::slice::from_raw_parts(grown, layout.size());
                    assert!(kept.iter().all(|&b| b == 0xA5));
                    // And back: across `LARGE` again for the crawler's allocator.
                    let big = Layout::from_size_align(layout.size() * 3, layout.align()).unwrap();
                    let shrunk = allocator.realloc(grown, big, layout.size());
                    assert!(!shrunk.is_null());
                    assert_eq!(shrunk as usize % layout.align(), 0);
                    let kept = std::slice::from_raw_parts(shrunk, layout.size());
                    assert!(kept.iter().all(|&b| b == 0xA5));
                    allocator.dealloc(shrunk, layout);
                }
            }
        }
        let described = describe();
        assert!(described == "system" || described.starts_with("mimalloc (purge delay "));
    }
}
