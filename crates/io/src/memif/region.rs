//! A region of memif shared memory: a memfd mapped here, either made by this side (the
//! client owns the memory and passes the memfd with `AddRegion`) or received from the
//! peer (the server maps what the client sent).
//!
//! The memory is shared with another process that writes it while we read, so it lies
//! outside what Rust's references may point at: this type hands out no reference into
//! it, only bounds-checked copies in and out ([`Region::read`], [`Region::write`]) and
//! raw addresses for [`super::ring::Ring`]. A peer writing the memory at the wrong time
//! can garble frames, never this process's own memory.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};

/// One mapped region.
pub struct Region {
    file: std::fs::File,
    map: MmapRaw,
}

// SAFETY: a `Region` is a mapping and its file; every access to the memory goes through
// raw pointers with bounds checks (no references), and concurrent access from other
// threads is the same as from the peer process, which the protocol's atomics order.
unsafe impl Send for Region {}
// SAFETY: as for `Send`: `&Region` offers only raw, bounds-checked copies.
unsafe impl Sync for Region {}

impl Region {
    /// A new zeroed region of `size` bytes named `name` (shown in /proc/PID/fd), sealed
    /// against shrinking (a peer that mapped it can then never find its pages gone).
    /// Its pages are made now (populated), not faulted in and zeroed during a run.
    pub fn create(name: &str, size: usize) -> io::Result<Region> {
        let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING).map_err(io::Error::from)?;
        let file = std::fs::File::from(fd);
        file.set_len(size as u64)?;
        fcntl(&file, FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK)).map_err(io::Error::from)?;
        let map = MmapOptions::new().len(size).populate().map_raw(&file)?;
        Ok(Region { file, map })
    }

    /// Maps the `size` bytes of a region the peer sent. A memfd shorter than it says is
    /// refused: touching the missing pages would kill this process (SIGBUS).
    pub fn map_received(fd: OwnedFd, size: u64) -> io::Result<Region> {
        let file = std::fs::File::from(fd);
        let actual = file.metadata()?.len();
        if actual < size || size == 0 || size > isize::MAX as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the peer's region is {actual} bytes but was announced as {size}"),
            ));
        }
        let map = MmapOptions::new().len(size as usize).populate().map_raw(&file)?;
        Ok(Region { file, map })
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Whether `[offset, offset + len)` lies inside the region.
    #[inline(always)]
    pub fn contains(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.map.len())
    }

    /// The address of byte `offset`, which must be inside the region (checked by the
    /// caller with [`Region::contains`]: the pointer is only formed, never read, here).
    #[inline(always)]
    pub(super) fn at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset <= self.map.len());
        self.map.as_mut_ptr().wrapping_add(offset)
    }

    /// Copies `into.len()` bytes from `offset`; false (nothing copied) when they are not
    /// all inside the region.
    #[inline(always)]
    pub fn read(&self, offset: usize, into: &mut [u8]) -> bool {
        if !self.contains(offset, into.len()) {
            return false;
        }
        // SAFETY: the source range lies inside the mapping (checked above), which lives
        // as long as `self`; the destination is our own slice, which cannot overlap a
        // mapping no reference points into.
        unsafe { std::ptr::copy_nonoverlapping(self.at(offset), into.as_mut_ptr(), into.len()) };
        true
    }

    /// Copies `from` to `offset`; false (nothing copied) when it does not fit.
    #[inline(always)]
    pub fn write(&self, offset: usize, from: &[u8]) -> bool {
        if !self.contains(offset, from.len()) {
            return false;
        }
        // SAFETY: the destination range lies inside the mapping (checked above), which
        // is writable and lives as long as `self`; no reference points into it.
        unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), self.at(offset), from.len()) };
        true
    }
}

impl Region {
    /// Hints that the bytes at `offset` will be written soon: their line is fetched for
    /// ownership (`prefetchw`), so a store to it later does not wait in the store buffer
    /// for the peer's core to give it up. Nothing happens for an offset outside the
    /// region; a CPU without the instruction (Intel before Broadwell) runs it as a no-op.
    #[inline(always)]
    pub fn will_write(&self, offset: usize) {
        if offset >= self.map.len() {
            return;
        }
        // Not `_mm_prefetch::<_MM_HINT_ET0>`: without the `prfchw` target feature, which
        // the baseline x86-64 target lacks, it compiles to a read prefetch.
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: `prefetchw` takes any address without faulting (this one is inside the
        // mapping) and changes no memory, register or flag.
        unsafe {
            std::arch::asm!("prefetchw [{}]", in(reg) self.at(offset), options(nostack, preserves_flags, readonly));
        }
    }

    /// Hints that the bytes at `offset` will be read soon, as [`sfclab_core::Batch::prefetch`]
    /// does; nothing happens for an offset outside the region.
    #[inline(always)]
    pub fn will_read(&self, offset: usize) {
        if offset >= self.map.len() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults; the address is inside the mapping.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(self.at(offset).cast::<i8>());
        }
    }
}

impl AsFd for Region {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_stay_inside_the_region_and_both_mappings_see_them() {
        let r = Region::create("sfclab-test", 4096).unwrap();
        assert!(r.write(4090, b"sfclab"));
        assert!(!r.write(4091, b"sfclab"), "one byte past the end");
        assert!(!r.write(usize::MAX, b"x"), "an offset that overflows");
        // The peer's view of the same memory.
        let fd = r.as_fd().try_clone_to_owned().unwrap();
        let peer = Region::map_received(fd, 4096).unwrap();
        let mut got = [0u8; 6];
        assert!(peer.read(4090, &mut got));
        assert_eq!(&got, b"sfclab");
        assert!(!peer.read(4095, &mut got));
    }

    #[test]
    fn a_region_shorter_than_announced_is_refused_and_ours_cannot_shrink() {
        let r = Region::create("sfclab-test", 4096).unwrap();
        let fd = r.as_fd().try_clone_to_owned().unwrap();
        let e = Region::map_received(fd, 8192).err().unwrap();
        assert!(e.to_string().contains("4096 bytes but was announced as 8192"), "{e}");
        let file = std::fs::File::from(r.as_fd().try_clone_to_owned().unwrap());
        assert!(file.set_len(100).is_err(), "sealed against shrinking");
    }
}
