//! The bit array: zeroed, cache-line-aligned 512-bit blocks of atomic words.
//!
//! On Linux the array is an anonymous mapping: the kernel hands out zero pages lazily (a
//! 171 MiB filter costs nothing until it fills) and `MADV_HUGEPAGE` asks for 2 MiB pages, so
//! a random probe into a filter far larger than the TLB's reach costs one cache miss rather
//! than a cache miss plus a page walk. Elsewhere it is an ordinary zeroed allocation.

use std::sync::atomic::AtomicU64;

/// One cache line of the filter: words 0..8, bit 63 of word 7 the block's insert lock.
#[repr(C, align(64))]
pub struct Block(pub [AtomicU64; 8]);

/// The lock bit, in word 7 of every block; never a probe position.
pub const LOCK_BIT: u64 = 1 << 63;
/// Index of the word that holds the lock bit.
pub const LOCK_WORD: usize = 7;

/// An owned, zero-initialised array of blocks.
pub struct BlockArray {
    ptr: std::ptr::NonNull<Block>,
    len: usize,
    /// How the memory was obtained, to give it back the same way.
    #[cfg(target_os = "linux")]
    mapping: (*mut libc::c_void, usize),
}

// SAFETY: the array is only reached through &Block (atomics) or, for loading, through
// &mut self; the raw pointer is uniquely owned like a Box.
unsafe impl Send for BlockArray {}
// SAFETY: shared access only ever touches AtomicU64s.
unsafe impl Sync for BlockArray {}

const HUGE_PAGE: usize = 2 << 20;

impl BlockArray {
    /// `len` zeroed blocks, or None when the memory cannot be had.
    pub fn zeroed(len: usize) -> Option<BlockArray> {
        let bytes = len.checked_mul(std::mem::size_of::<Block>())?;
        if len == 0 {
            return Some(BlockArray {
                ptr: std::ptr::NonNull::dangling(),
                len: 0,
                #[cfg(target_os = "linux")]
                mapping: (std::ptr::null_mut(), 0),
            });
        }
        Self::map_zeroed(len, bytes)
    }

    #[cfg(target_os = "linux")]
    fn map_zeroed(len: usize, bytes: usize) -> Option<BlockArray> {
        // One huge page extra so the array can start on a huge-page boundary.
        let map_len = bytes.checked_add(HUGE_PAGE)?;
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
        // SAFETY: advisory only, on memory we mapped; failure (no THP) is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
        }
        Some(BlockArray {
            ptr: std::ptr::NonNull::new(start as *mut Block)?,
            len,
            mapping: (base, map_len),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn map_zeroed(len: usize, _bytes: usize) -> Option<BlockArray> {
        let layout = std::alloc::Layout::array::<Block>(len).ok()?;
        // SAFETY: non-zero size; all-zero bytes are valid AtomicU64s.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Block;
        Some(BlockArray {
            ptr: std::ptr::NonNull::new(ptr)?,
            len,
        })
    }

    /// The blocks, for concurrent atomic access.
    pub fn blocks(&self) -> &[Block] {
        // SAFETY: ptr points to len initialised (zeroed) blocks owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The words, for filling from a file while nobody else can see the array.
    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: &mut self excludes all other access; AtomicU64 has the size and layout of
        // u64, any bit pattern is a valid value, and 64-byte alignment satisfies u64.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr() as *mut u64, self.len * 8) }
    }
}

impl Drop for BlockArray {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if self.mapping.1 != 0 {
            // SAFETY: exactly the mapping made in map_zeroed.
            unsafe {
                libc::munmap(self.mapping.0, self.mapping.1);
            }
        }
        #[cfg(not(target_os = "linux"))]
        if self.len != 0 {
            if let Ok(layout) = std::alloc::Layout::array::<Block>(self.len) {
                // SAFETY: allocated in map_zeroed with this layout.
                unsafe { std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, layout) }
            }
        }
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
}
