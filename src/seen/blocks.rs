//! The bit array: zeroed, cache-line-aligned 512-bit blocks of atomic words.
//!
//! On Linux the array is an anonymous mapping: the kernel hands out zero pages lazily (a
//! 171 MiB filter costs nothing until it fills) and `MADV_HUGEPAGE` asks for 2 MiB pages, so
//! a random probe into a filter far larger than the TLB's reach costs one cache miss rather
//! than a cache miss plus a page walk. Elsewhere it is an ordinary zeroed allocation. The
//! copies snapshots hold ([`WordBuffer`]) are mapped the same way: with huge pages a fresh
//! 187.5 MiB copy takes about 94 page faults rather than 48,000 (see "Snapshots" in
//! [`crate::seen`]).
//!
//! The advice covers whole huge pages: the mapping is rounded up to the next 2 MiB (at most
//! 2 MiB more address space, and at most the rest of one huge page more memory, once the
//! filter's last block is written). Advised over `bytes` only, a filter under
//! 2 MiB (the default `max_urls = 1_000_000` at p = 0.001 gives 1.8 MB) or the tail of any
//! filter got 4 KiB pages, and each of those was faulted twice: a lookup's read maps the
//! shared zero page, the first insert's write then copies it and, the process's threads
//! running on other cores, shoots down their TLB entries with an inter-processor interrupt.
//! That was 4.5% of the crawl driver's CPU on the crawl bench (`perf` of `cargo bench
//! --bench crawl -- --cores 2`: 25 of 557 driver samples, in `seen::lock`'s first write to
//! a block, under `do_wp_page` and `flush_tlb_mm_range`). A mapping under 1 MiB, too small to
//! be worth a huge page, is faulted in writable at once (`MADV_POPULATE_WRITE`), for the
//! same reason.

use std::sync::atomic::AtomicU64;

#[cfg(target_os = "linux")]
use crate::allocator::HUGE_PAGE;

/// One cache line of the filter: words 0..8, bit 63 of word 7 the block's insert lock.
#[repr(C, align(64))]
pub(crate) struct Block(pub [AtomicU64; 8]);

/// The lock bit, in word 7 of every block; never a probe position.
pub(crate) const LOCK_BIT: u64 = 1 << 63;
/// Index of the word that holds the lock bit.
pub(crate) const LOCK_WORD: usize = 7;

/// Zeroed memory obtained as described in the module doc, 64-byte aligned (2 MiB on Linux),
/// given back on drop. It has no type of its own: [`BlockArray`] and [`WordBuffer`] say what
/// lives in it and how it may be reached.
struct Mapping {
    ptr: std::ptr::NonNull<u8>,
    #[cfg(not(target_os = "linux"))]
    bytes: usize,
    /// How the memory was obtained, to give it back the same way.
    #[cfg(target_os = "linux")]
    mapping: (*mut libc::c_void, usize),
}

/// Below this a mapping is faulted in writable at once rather than given huge pages.
#[cfg(target_os = "linux")]
const SMALL_MAPPING: usize = HUGE_PAGE / 2;
/// The smallest page: writing one word in each backs the whole buffer.
const PAGE: usize = 4096;
/// Every mapping's alignment at least: a cache line, as [`Block`] needs.
#[cfg(not(target_os = "linux"))]
const ALIGN: usize = 64;

impl Mapping {
    /// `bytes` zeroed bytes, or None when the memory cannot be had.
    fn zeroed(bytes: usize) -> Option<Mapping> {
        if bytes == 0 {
            return Some(Mapping::empty());
        }
        Self::map_zeroed(bytes)
    }

    /// No memory at all.
    fn empty() -> Mapping {
        Mapping {
            // Dangling but aligned for anything a mapping holds, as an empty slice needs.
            ptr: std::ptr::NonNull::<Block>::dangling().cast(),
            #[cfg(not(target_os = "linux"))]
            bytes: 0,
            #[cfg(target_os = "linux")]
            mapping: (std::ptr::null_mut(), 0),
        }
    }

    #[cfg(target_os = "linux")]
    fn map_zeroed(bytes: usize) -> Option<Mapping> {
        // Whole huge pages (see the module doc), plus one so the memory can start on a
        // huge-page boundary.
        let advised = bytes.checked_next_multiple_of(HUGE_PAGE)?;
        let map_len = advised.checked_add(HUGE_PAGE)?;
        // SAFETY: anonymous private mapping, no file, result checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let offset = (HUGE_PAGE - (base as usize % HUGE_PAGE)) % HUGE_PAGE;
        // SAFETY: offset < HUGE_PAGE, within the mapping; the start is page-aligned, hence
        // aligned for Block (64 bytes).
        let start = unsafe { (base as *mut u8).add(offset) };
        if bytes < SMALL_MAPPING {
            // SAFETY: advisory only, on memory we mapped; failure (a kernel before 5.14)
            // leaves the pages to be faulted in as they are touched.
            unsafe {
                libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_POPULATE_WRITE);
            }
        } else {
            // SAFETY: advisory only, on memory we mapped (`start + advised` is within it:
            // `offset < HUGE_PAGE`); failure (no THP) is harmless.
            unsafe {
                libc::madvise(start as *mut libc::c_void, advised, libc::MADV_HUGEPAGE);
            }
        }
        Some(Mapping {
            ptr: std::ptr::NonNull::new(start)?,
            mapping: (base, map_len),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn map_zeroed(bytes: usize) -> Option<Mapping> {
        let layout = std::alloc::Layout::from_size_align(bytes, ALIGN).ok()?;
        // SAFETY: non-zero size, checked by the caller.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        Some(Mapping {
            ptr: std::ptr::NonNull::new(ptr)?,
            bytes,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if self.mapping.1 != 0 {
            // SAFETY: exactly the mapping made in map_zeroed.
            unsafe {
                libc::munmap(self.mapping.0, self.mapping.1);
            }
        }
        #[cfg(not(target_os = "linux"))]
        if self.bytes != 0 {
            if let Ok(layout) = std::alloc::Layout::from_size_align(self.bytes, ALIGN) {
                // SAFETY: allocated in map_zeroed with this layout.
                unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
            }
        }
    }
}

// SAFETY: the memory is uniquely owned like a Box; what may be done with it through shared
// references is decided by the types that hold a Mapping, each with its own Sync reasoning.
unsafe impl Send for Mapping {}

/// An owned, zero-initialised array of blocks.
pub(crate) struct BlockArray {
    memory: Mapping,
    len: usize,
}

// SAFETY: shared access only ever touches AtomicU64s; loading fills the words through
// &mut self.
unsafe impl Sync for BlockArray {}

impl BlockArray {
    /// `len` zeroed blocks, or None when the memory cannot be had.
    pub(crate) fn zeroed(len: usize) -> Option<BlockArray> {
        let bytes = len.checked_mul(std::mem::size_of::<Block>())?;
        Some(BlockArray {
            memory: Mapping::zeroed(bytes)?,
            len,
        })
    }

    /// The blocks, for concurrent atomic access.
    pub(crate) fn blocks(&self) -> &[Block] {
        // SAFETY: the memory holds len zero-initialised blocks (all-zero bytes are valid
        // AtomicU64s), aligned to 64 bytes, owned by self.
        unsafe { std::slice::from_raw_parts(self.memory.ptr.as_ptr() as *const Block, self.len) }
    }

    /// The words, for filling from a file while nobody else can see the array.
    pub(crate) fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: &mut self excludes all other access; AtomicU64 has the size and layout of
        // u64, any bit pattern is a valid value, and 64-byte alignment satisfies u64.
        unsafe {
            std::slice::from_raw_parts_mut(self.memory.ptr.as_ptr() as *mut u64, self.len * 8)
        }
    }
}

/// An owned, zero-initialised buffer of plain words, mapped like the filter itself (huge
/// pages where the kernel gives them, 64-byte aligned at least): the copy a snapshot holds.
///
/// Fresh, its pages are not yet backed; [`WordBuffer::fault_in`] backs them all at once, so
/// that a buffer reused for checkpoint after checkpoint pays its page faults only once.
pub(crate) struct WordBuffer {
    memory: Mapping,
    len: usize,
}

// SAFETY: plain memory reached as &[u64] through &self and as &mut [u64] through &mut self,
// exactly like a Vec<u64>.
unsafe impl Sync for WordBuffer {}

impl WordBuffer {
    /// `len` zeroed words, or None when the memory cannot be had.
    pub(crate) fn zeroed(len: usize) -> Option<WordBuffer> {
        let bytes = len.checked_mul(8)?;
        Some(WordBuffer {
            memory: Mapping::zeroed(bytes)?,
            len,
        })
    }

    /// No words, no memory.
    pub(crate) fn empty() -> WordBuffer {
        WordBuffer {
            memory: Mapping::empty(),
            len: 0,
        }
    }

    /// Backs every page now, contents unchanged (one read and write back per 4 KiB page; on
    /// Linux the kernel hands out 2 MiB pages where it can, so most of these find their page
    /// already there).
    pub(crate) fn fault_in(&mut self) {
        for page in self.as_mut_slice().chunks_mut(PAGE / 8) {
            // Volatile: the compiler would rightly see writing back the value just read as
            // nothing, but a read alone maps the shared zero page, not memory of our own.
            // SAFETY: page[0] is a valid, aligned, exclusively borrowed word.
            unsafe {
                let word = std::ptr::read_volatile(&page[0]);
                std::ptr::write_volatile(&mut page[0], word);
            }
        }
    }

    pub(crate) fn as_slice(&self) -> &[u64] {
        // SAFETY: the memory holds len zero-initialised words, 64-byte aligned, owned by
        // self; &self only hands out shared access.
        unsafe { std::slice::from_raw_parts(self.memory.ptr.as_ptr() as *const u64, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: as above, and &mut self excludes all other access.
        unsafe { std::slice::from_raw_parts_mut(self.memory.ptr.as_ptr() as *mut u64, self.len) }
    }
}

impl std::ops::Deref for WordBuffer {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for WordBuffer {
    fn deref_mut(&mut self) -> &mut [u64] {
        self.as_mut_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn zeroed_aligned_and_writable() {
        let mut array = BlockArray::zeroed(100_000).unwrap();
        assert_eq!(array.blocks().as_ptr() as usize % 64, 0);
        assert!(array
            .blocks()
            .iter()
            .all(|b| b.0.iter().all(|w| w.load(Ordering::Relaxed) == 0)));
        array.blocks()[99_999].0[7].store(5, Ordering::Relaxed);
        assert_eq!(array.words_mut()[99_999 * 8 + 7], 5);
        assert_eq!(array.words_mut().len(), 800_000);
        assert_eq!(BlockArray::zeroed(0).unwrap().blocks().len(), 0);
    }

    #[test]
    fn word_buffer_zeroed_aligned_and_writable() {
        let mut buffer = WordBuffer::zeroed(300_001).unwrap();
        assert_eq!(buffer.as_ptr() as usize % 64, 0);
        buffer.fault_in();
        assert!(buffer.iter().all(|&w| w == 0));
        buffer[300_000] = 7;
        buffer[512] = 9;
        buffer.fault_in();
        assert_eq!(buffer.as_slice()[300_000], 7);
        assert_eq!(buffer[512], 9, "backing pages leaves their contents alone");
        assert_eq!(buffer.len(), 300_001);
        let mut empty = WordBuffer::zeroed(0).unwrap();
        empty.fault_in();
        assert!(empty.is_empty());
        assert!(WordBuffer::empty().is_empty());
    }

    /// Page faults taken by this thread so far.
    #[cfg(target_os = "linux")]
    fn thread_page_faults() -> i64 {
        // SAFETY: getrusage fills the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a rusage.
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
        usage.ru_minflt + usage.ru_majflt
    }

    /// Looks up every 4 KiB page of a filter, then inserts into each, as a crawl's first
    /// links do: the page faults this takes.
    #[cfg(target_os = "linux")]
    fn faults_reading_then_writing(bytes: usize) -> i64 {
        let array = BlockArray::zeroed(bytes / 64).unwrap();
        let step = PAGE / 64;
        let before = thread_page_faults();
        let read: u64 = (0..array.blocks().len())
            .step_by(step)
            .map(|i| array.blocks()[i].0[0].load(Ordering::Relaxed))
            .sum();
        assert_eq!(read, 0);
        for i in (0..array.blocks().len()).step_by(step) {
            array.blocks()[i].0[0].fetch_or(1, Ordering::Relaxed);
        }
        thread_page_faults() - before
    }

    // The default filter (max_urls = 1e6, p = 0.001: 1.8 MB) was advised huge pages over its
    // own length only, so it got none: 4 KiB pages, each faulted twice (the zero page, then
    // its copy). Whole huge pages fault once per 2 MiB, and a small mapping is faulted in
    // when it is made.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_filter_read_then_written_faults_once_per_huge_page_not_twice_per_page() {
        let small = faults_reading_then_writing(512 << 10);
        assert!(
            small <= 4,
            "{small} faults on a 512 KiB filter populated when made"
        );
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if !(thp.contains("[always]") || thp.contains("[madvise]")) {
            eprintln!("transparent huge pages are off here: the 1.8 MB case is not checked");
            return;
        }
        let bytes = 1_800_000;
        let faults = faults_reading_then_writing(bytes);
        let pages = (bytes / PAGE) as i64;
        assert!(
            faults < pages / 4,
            "{faults} faults reading then writing {pages} pages of 4 KiB (huge pages: ~2)"
        );
    }
}
