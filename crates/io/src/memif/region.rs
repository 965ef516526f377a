//! The client's shared memory: a memfd (passed to the server with `AddRegion`), mapped
//! here, with rings laid out as [`super::layout`] says. The server checks each ring's
//! cookie when it connects.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use memmap2::MmapMut;
use nix::sys::memfd::{MFdFlags, memfd_create};

use super::layout::{COOKIE, RING_COOKIE_AT, RING_HEADER, ring_bytes};

/// One region of shared memory, owned by this (the client) side.
pub struct Region {
    file: std::fs::File,
    map: MmapMut,
}

impl Region {
    /// A zeroed region of `size` bytes named `name` (shown in /proc/PID/fd), with an
    /// empty ring of `2^log2` descriptors at each `(offset, log2)` of `rings`: cookie, no
    /// flags, head and tail at 0. A ring that does not fit, or does not start on a
    /// 128-byte boundary, is refused. The rings are written before the descriptor can
    /// leave this process.
    pub fn with_rings(name: &str, size: usize, rings: &[(usize, u8)]) -> io::Result<Region> {
        for &(offset, log2) in rings {
            let end = offset.checked_add(ring_bytes(log2));
            if !offset.is_multiple_of(RING_HEADER) || end.is_none_or(|e| e > size) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a ring of 2^{log2} descriptors at offset {offset} does not fit a {size}-byte region on a 128-byte boundary"
                    ),
                ));
            }
        }
        let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC).map_err(io::Error::from)?;
        let file = std::fs::File::from(fd);
        file.set_len(size as u64)?;
        // SAFETY: the memfd is this process's own, just made and sized, and no other
        // process has it yet: writing the ring headers below is exclusive. Once `Region`
        // is returned the descriptor may be passed to the server, and this type hands
        // out no reference into the memory.
        let mut map = unsafe { MmapMut::map_mut(&file) }?;
        // A new memfd reads as zeros: flags, head and tail are already 0.
        for &(offset, _) in rings {
            map[offset + RING_COOKIE_AT..offset + RING_COOKIE_AT + 4].copy_from_slice(&COOKIE.to_le_bytes());
        }
        Ok(Region { file, map })
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
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
    fn rings_are_laid_out_where_the_protocol_reads_them_and_must_fit() {
        let r = Region::with_rings("sfclab-test", 1 << 16, &[(128, 10)]).unwrap();
        assert_eq!(&r.map[128..132], &COOKIE.to_le_bytes());
        assert_eq!(&r.map[128 + 4..128 + 8], &[0; 4], "flags and head");
        assert!(
            Region::with_rings("sfclab-test", 1 << 16, &[(100, 4)]).is_err(),
            "not on a 128-byte boundary"
        );
        let e = Region::with_rings("sfclab-test", 1 << 16, &[(0, 14)]).err().unwrap();
        assert!(e.to_string().contains("does not fit a 65536-byte region"), "{e}");
    }
}
