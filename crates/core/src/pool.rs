//! The packet-buffer pool: one anonymous mapping carved into `BUF_SIZE` buffers and a
//! LIFO free list of handles, so that the buffers used last (still in cache) are reused
//! first. Allocation and free are a pointer pop/push: no system call, no lock.
//!
//! A pool can live in shared memory ([`PacketPool::shared`]): a memfd another process
//! maps too, so that a memif zero-copy client hands its peer a descriptor of a buffer
//! instead of a copy of it. What the peer writes there is packet bytes to this process:
//! the free list and every handle stay in private memory, and every access to a
//! buffer's frame checks its bounds (see [`crate::PacketMeta`]).
//!
//! A pool belongs to one thread at a time. Handles are unique (`PacketRef` is not
//! `Clone`), so safe code cannot free a buffer twice; `free` still checks the buffer's
//! state and origin, because a bug there would corrupt every later measurement.

use crate::batch::Batch;
use crate::handle::PacketRef;
#[cfg(debug_assertions)]
use crate::packet::STATE_IN_USE;
use crate::packet::{BUF_SIZE, HEADROOM, META_SIZE, Packet, STATE_FREE};
use std::os::fd::{AsFd, BorrowedFd};
use std::ptr::NonNull;

/// Counters of a pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PoolStats {
    pub capacity: u64,
    pub available: u64,
    /// Allocations refused because the pool was empty.
    pub exhausted: u64,
}

/// A preallocated set of packet buffers.
pub struct PacketPool {
    map: Option<Mapping>,
    /// The memfd behind a pool in shared memory, which a peer process maps.
    file: Option<std::fs::File>,
    base: *mut Packet,
    /// Bytes of the mapping: `capacity * BUF_SIZE`, kept so the origin check is one compare.
    span: usize,
    capacity: usize,
    free: Vec<NonNull<Packet>>,
    exhausted: u64,
}

// SAFETY: the pool owns its mapping and raw pointers into it; moving it to another thread
// moves that ownership. It is not Sync: one thread uses it at a time.
unsafe impl Send for PacketPool {}

impl PacketPool {
    /// Maps `capacity` buffers (prefaulted) and puts them all on the free list.
    pub fn new(capacity: usize) -> PacketPool {
        check_capacity(capacity);
        PacketPool::over(Mapping::new(capacity * BUF_SIZE), None, capacity)
    }

    /// As [`PacketPool::new`], with the buffers in a memfd named `name` (shown in
    /// /proc/PID/fd), sealed against shrinking, that another process can map
    /// ([`PacketPool::shared_memory`]): a memif zero-copy client's pool.
    #[cfg(not(miri))]
    pub fn shared(capacity: usize, name: &str) -> std::io::Result<PacketPool> {
        check_capacity(capacity);
        let (map, file) = Mapping::shared(capacity * BUF_SIZE, name)?;
        Ok(PacketPool::over(map, Some(file), capacity))
    }

    /// A pool in shared memory: its file, for a peer to map, and where this process
    /// sees it, for the offsets of frames in it. `None` for a private pool.
    pub fn shared_memory(&self) -> Option<(BorrowedFd<'_>, SharedSpan)> {
        let file = self.file.as_ref()?;
        Some((
            file.as_fd(),
            SharedSpan {
                base: self.base as usize,
                len: self.span,
            },
        ))
    }

    fn over(mut map: Mapping, file: Option<std::fs::File>, capacity: usize) -> PacketPool {
        let base = map.as_mut_ptr().cast::<Packet>();
        let mut free = Vec::with_capacity(capacity);
        // Push in reverse so that the first allocations walk the mapping upwards.
        for i in (0..capacity).rev() {
            // SAFETY: i < capacity, inside the mapping; the mapping is page aligned and
            // BUF_SIZE is a multiple of 64, so every buffer is 64-byte aligned.
            let p = unsafe { base.add(i) };
            // SAFETY: as above; nothing else refers to the fresh mapping yet.
            unsafe {
                (*p).clear_frame();
                (*p).pool_state = STATE_FREE;
            }
            // SAFETY: inside the mapping, so not null.
            free.push(unsafe { NonNull::new_unchecked(p) });
        }
        PacketPool {
            map: Some(map),
            file,
            base,
            span: capacity * BUF_SIZE,
            capacity,
            free,
            exhausted: 0,
        }
    }

    /// Runs `f` over every buffer's whole room once (e.g. to write a payload pattern).
    /// Only allowed while every buffer is in the pool.
    pub fn prime(&mut self, mut f: impl FnMut(&mut [u8])) {
        assert_eq!(self.in_use(), 0, "prime() needs every buffer back in the pool");
        for &p in &self.free {
            // SAFETY: free buffers are owned by the pool and not aliased.
            f(unsafe { (*p.as_ptr()).room_mut() });
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Buffers on the free list.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Buffers handed out and not yet returned.
    pub fn in_use(&self) -> usize {
        self.capacity - self.free.len()
    }

    pub fn stats(&self) -> PoolStats {
        PoolStats {
            capacity: self.capacity as u64,
            available: self.free.len() as u64,
            exhausted: self.exhausted,
        }
    }

    /// One buffer with an empty frame at the default headroom, or `None` when exhausted.
    #[inline]
    pub fn alloc(&mut self) -> Option<PacketRef> {
        let Some(handle) = self.free.pop() else {
            self.exhausted += 1;
            return None;
        };
        let p = handle.as_ptr();
        // SAFETY: p came off the free list, so it is a live, unaliased buffer of this pool.
        unsafe {
            #[cfg(debug_assertions)]
            {
                (*p).pool_state = STATE_IN_USE;
            }
            (*p).clear_frame();
            Some(PacketRef::from_raw(handle))
        }
    }

    /// Appends up to `n` buffers to `batch` (bounded by its free room); returns how many.
    /// Frames and metadata are left as the previous user left them: the caller stamps
    /// them or sets `meta` to `PacketMeta::fresh` (the bulk path saves that store).
    #[inline]
    pub fn alloc_into(&mut self, batch: &mut Batch, n: usize) -> usize {
        let n = n.min(batch.room());
        let take = n.min(self.free.len());
        if take < n {
            self.exhausted += 1;
        }
        let from = self.free.len() - take;
        let taken = &self.free[from..];
        #[cfg(debug_assertions)]
        for &p in taken {
            // SAFETY: free buffers are live and owned by the pool until handed out here.
            unsafe { (*p.as_ptr()).pool_state = STATE_IN_USE };
        }
        // SAFETY: `take` fits the batch's room; the buffers leave the free list below.
        unsafe { batch.extend_raw(taken) };
        self.free.truncate(from);
        take
    }

    /// Gives one buffer back.
    #[inline]
    pub fn free(&mut self, pkt: PacketRef) {
        let p = pkt.into_raw();
        self.check_returning(p);
        self.free.push(p);
    }

    /// Gives every buffer of `batch` back and empties it.
    #[inline]
    pub fn free_batch(&mut self, batch: &mut Batch) {
        let ps = batch.raw();
        let (base, span) = (self.base as usize, self.span);
        let len = self.free.len();
        // The free list is reserved for `capacity` handles up front, so this never grows it;
        // writing into the spare slots keeps `base`, `span` and the length in registers.
        let spare = &mut self.free.spare_capacity_mut()[..ps.len()];
        for (slot, &p) in spare.iter_mut().zip(ps) {
            check_origin(base, span, p);
            slot.write(p);
        }
        // SAFETY: the first ps.len() spare slots were just initialised.
        unsafe { self.free.set_len(len + ps.len()) };
        batch.forget_all();
    }

    #[inline(always)]
    fn check_returning(&self, p: NonNull<Packet>) {
        check_origin(self.base as usize, self.span, p);
    }
}

fn check_capacity(capacity: usize) {
    assert!(
        capacity > 0 && capacity <= u32::MAX as usize,
        "pool capacity out of range"
    );
}

/// Where a pool in shared memory lies in this process's addresses, for the offset of a
/// frame into the pool's file (a memif descriptor names a buffer by its offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedSpan {
    base: usize,
    len: usize,
}

impl SharedSpan {
    /// Bytes of the pool's file.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where `bytes` start in the pool's file, if they lie wholly inside it (the frame,
    /// or the empty frame at the headroom, of one of its buffers).
    #[inline(always)]
    pub fn offset_of(&self, bytes: &[u8]) -> Option<usize> {
        let off = (bytes.as_ptr() as usize).wrapping_sub(self.base);
        (off <= self.len && bytes.len() <= self.len - off).then_some(off)
    }

    /// Where a frame [`Packet::reset`] makes in `p` starts in the pool's file (its
    /// `DATA_ROOM` bytes follow), if `p` is one of the pool's buffers: from the
    /// buffer's address alone, reading none of its lines.
    #[inline(always)]
    pub fn fresh_frame_offset(&self, p: &Packet) -> Option<usize> {
        let at = (p as *const Packet as usize).wrapping_sub(self.base);
        (at < self.len && self.len - at >= BUF_SIZE).then_some(at + META_SIZE + HEADROOM)
    }
}

/// Refuses buffers of another pool (safe code could try that, and the two pools would
/// then share a buffer); in debug builds also catches double frees by our own unsafe
/// code, through the buffer's state word.
#[inline(always)]
fn check_origin(base: usize, span: usize, p: NonNull<Packet>) {
    assert!(
        (p.as_ptr() as usize).wrapping_sub(base) < span,
        "buffer returned to a pool it does not belong to"
    );
    #[cfg(debug_assertions)]
    {
        // SAFETY: p is inside this pool's mapping (checked above).
        let state = unsafe { &mut (*p.as_ptr()).pool_state };
        assert!(*state == STATE_IN_USE, "buffer freed twice");
        *state = STATE_FREE;
    }
}

impl Drop for PacketPool {
    fn drop(&mut self) {
        if self.in_use() != 0 {
            // Handles are still out: unmapping would let them dangle, so keep the memory.
            std::mem::forget(self.map.take());
        }
    }
}

/// The pool's memory: zeroed, page aligned, prefaulted so the first packets do not pay
/// page faults inside a measurement.
#[cfg(not(miri))]
struct Mapping(memmap2::MmapMut);

#[cfg(not(miri))]
impl Mapping {
    fn new(len: usize) -> Mapping {
        let map = memmap2::MmapOptions::new()
            .len(len)
            .populate()
            .map_anon()
            .expect("cannot map the packet pool (out of memory?)");
        Mapping(map)
    }

    /// `len` bytes of a new memfd named `name`, sealed against shrinking (a peer that
    /// maps it can never make this process's pages vanish: SIGBUS), mapped shared.
    fn shared(len: usize, name: &str) -> std::io::Result<(Mapping, std::fs::File)> {
        use std::os::fd::FromRawFd;
        let name = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
        // SAFETY: `name` is a NUL-terminated string that outlives the call; the flags
        // are memfd_create's own.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and is owned by nothing else.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.set_len(len as u64)?;
        // SAFETY: fcntl on a descriptor we own, with a seal memfd_create allowed.
        if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the file cannot shrink (sealed above), so every mapped page stays
        // backed. Other processes may write its bytes while it is mapped; the pool
        // hands out no reference whose soundness rests on them (module docs).
        let map = unsafe { memmap2::MmapOptions::new().len(len).populate().map_mut(&file)? };
        Ok((Mapping(map), file))
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr()
    }
}

/// Under Miri (which cannot run `mmap`): the same zeroed, page-aligned memory from the
/// global allocator, so the tests check our pointer use rather than the mapping's.
#[cfg(miri)]
struct Mapping {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
}

#[cfg(miri)]
impl Mapping {
    fn new(len: usize) -> Mapping {
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("pool size");
        // SAFETY: len > 0 (the pool has at least one buffer).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        Mapping {
            ptr: NonNull::new(ptr).expect("cannot allocate the packet pool"),
            layout,
        }
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

#[cfg(miri)]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millions_of_cycles_leak_nothing() {
        let mut pool = PacketPool::new(256);
        let mut batch = Batch::new(32);
        let rounds = if cfg!(miri) { 50 } else { 100_000u32 };
        for round in 0..rounds {
            let got = pool.alloc_into(&mut batch, 32);
            assert_eq!(got, 32);
            for p in batch.iter_mut() {
                p.reset(60)[0] = round as u8;
            }
            // Drop a few one by one, the rest in bulk, as a chain does.
            let one = batch.pop().unwrap();
            pool.free(one);
            pool.free_batch(&mut batch);
            assert!(batch.is_empty());
        }
        assert_eq!(pool.available(), 256);
        assert_eq!(pool.stats().exhausted, 0);
    }

    #[test]
    fn exhaustion_is_counted_not_fatal() {
        let mut pool = PacketPool::new(40);
        let mut a = Batch::new(32);
        let mut b = Batch::new(32);
        assert_eq!(pool.alloc_into(&mut a, 32), 32);
        assert_eq!(pool.alloc_into(&mut b, 32), 8);
        assert!(pool.alloc().is_none());
        assert_eq!(pool.stats().exhausted, 2);
        pool.free_batch(&mut a);
        pool.free_batch(&mut b);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn buffers_are_distinct_and_aligned() {
        let mut pool = PacketPool::new(64);
        let mut batch = Batch::new(64);
        pool.alloc_into(&mut batch, 64);
        let mut addrs: Vec<usize> = batch.raw().iter().map(|p| p.as_ptr() as usize).collect();
        assert!(addrs.iter().all(|a| a % 64 == 0));
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), 64);
        pool.free_batch(&mut batch);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "freed twice")]
    fn double_free_is_caught_in_debug_builds() {
        let mut pool = PacketPool::new(2);
        let p = pool.alloc().unwrap();
        let raw = p.into_raw();
        // SAFETY: deliberately forging a second handle to test the check.
        let (a, b) = unsafe { (PacketRef::from_raw(raw), PacketRef::from_raw(raw)) };
        pool.free(a);
        pool.free(b);
    }

    #[test]
    #[should_panic(expected = "does not belong")]
    fn foreign_buffer_is_refused() {
        let mut a = PacketPool::new(2);
        let mut b = PacketPool::new(2);
        let p = a.alloc().unwrap();
        b.free(p);
    }

    #[test]
    #[cfg(not(miri))]
    fn a_shared_pool_s_frames_are_where_its_offsets_say_in_its_file() {
        let mut pool = PacketPool::shared(8, "sfclab-test-pool").unwrap();
        assert!(PacketPool::new(1).shared_memory().is_none());
        let (fd, span) = pool.shared_memory().unwrap();
        assert_eq!(span.len(), 8 * BUF_SIZE);
        // The peer's view: the same file mapped again.
        let file = std::fs::File::from(fd.try_clone_to_owned().unwrap());
        assert!(file.set_len(100).is_err(), "sealed against shrinking");
        // SAFETY: a test's own memfd, sealed against shrinking.
        let peer = unsafe { memmap2::MmapOptions::new().len(span.len()).map(&file).unwrap() };
        let mut p = pool.alloc().unwrap();
        let empty_at = span.offset_of(p.data()).unwrap();
        p.reset(6).copy_from_slice(b"sfclab");
        let at = span.offset_of(p.data()).unwrap();
        assert_eq!(at, empty_at, "a fresh frame starts where the empty one was");
        assert_eq!(span.fresh_frame_offset(&p), Some(at), "known from the address alone");
        assert_eq!(&peer[at..at + 6], b"sfclab");
        assert_eq!(span.offset_of(&[1u8; 4]), None, "bytes outside the pool");
        pool.free(p);
    }

    #[test]
    fn dropping_a_pool_with_buffers_out_keeps_them_valid() {
        let mut pool = PacketPool::new(2);
        let mut p = pool.alloc().unwrap();
        drop(pool);
        p.reset(14).fill(1);
        assert_eq!(p.data()[13], 1);
    }
}
