//! Who owns a packet buffer: the one ownership protocol of the packet core.
//!
//! A buffer is owned by exactly one of: its [`PacketPool`](crate::PacketPool) (on the
//! free list), one [`PacketRef`] (a unique handle, not `Clone`), or one slot of a
//! [`Batch`](crate::Batch) (which holds the handle's raw pointer). Moving a buffer between
//! them goes through [`PacketRef::into_raw`] and [`PacketRef::from_raw`], and nowhere
//! else: the batch turns handles into slots and back, the pool hands out handles and
//! takes them (or a whole batch) back. This module depends on neither, so the pool and the
//! batch both build on it.

use crate::packet::Packet;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Owning handle to one packet buffer of a [`PacketPool`].
///
/// Dropping a handle without giving it back to its pool leaks the buffer; the pool
/// notices (see [`PacketPool::in_use`]) and, if it is dropped first, keeps its memory
/// mapped so that no handle ever dangles.
pub struct PacketRef(NonNull<Packet>);

// SAFETY: a PacketRef is the unique owner of its buffer, like a Box.
unsafe impl Send for PacketRef {}

impl PacketRef {
    #[inline(always)]
    pub(crate) fn into_raw(self) -> NonNull<Packet> {
        self.0
    }

    /// # Safety
    /// `ptr` must come from `into_raw` of a handle not used since.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(ptr: NonNull<Packet>) -> PacketRef {
        PacketRef(ptr)
    }
}

impl Deref for PacketRef {
    type Target = Packet;
    #[inline(always)]
    fn deref(&self) -> &Packet {
        // SAFETY: the handle owns a live buffer of a pool that outlives it (see type docs).
        unsafe { self.0.as_ref() }
    }
}

impl DerefMut for PacketRef {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Packet {
        // SAFETY: as above, and the handle is unique.
        unsafe { self.0.as_mut() }
    }
}
