//! A packet buffer: one cache line of metadata, headroom for encapsulation, then the frame.
//!
//! Layout of one buffer (`BUF_SIZE` bytes, 64-byte aligned):
//! `[meta: 64][headroom: 128][frame ... up to DATA_ROOM]`.
//! The stride is 33 cache lines on purpose: buffers at a power-of-two stride land in a
//! few L1 sets and a batch of them evicts itself (see docs/PERFORMANCE.md).

/// Size of one buffer, metadata included: 33 cache lines.
pub const BUF_SIZE: usize = 33 * 64;
/// Bytes reserved in front of a fresh frame, for headers an NF prepends (ESP, VXLAN, ...).
pub const HEADROOM: usize = 128;
/// Bytes of the metadata line.
pub const META_SIZE: usize = 64;
/// Room for the frame after the headroom: enough for 1518 B plus a trailer.
pub const DATA_ROOM: usize = BUF_SIZE - META_SIZE - HEADROOM;
/// Largest frame the generator produces, FCS excluded (1518 B on the wire).
pub const MAX_FRAME: usize = 1514;

/// Per-packet metadata, in the buffer's first cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct PacketMeta {
    /// Offset of the first frame byte in `Packet::room`.
    pub data_off: u16,
    /// Frame length in bytes (no FCS).
    pub len: u16,
    /// Port the packet entered on.
    pub in_port: u16,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// Flow hash of the 5-tuple, set by the source (as RSS does) for sharding.
    pub flow_hash: u32,
    /// Per-source sequence number, for order checks.
    pub seq: u32,
    /// TSC when the source emitted the packet. Set on latency probes (`FLAG_PROBE`)
    /// only: writing it into every packet would cost a store per packet for nothing.
    pub timestamp: u64,
}

/// The packet is a latency probe: the sink records `now - timestamp`.
pub const FLAG_PROBE: u16 = 1;

#[cfg_attr(not(debug_assertions), allow(dead_code))]
pub(crate) const STATE_FREE: u32 = 0x5fc0_f4ee;
#[cfg_attr(not(debug_assertions), allow(dead_code))]
pub(crate) const STATE_IN_USE: u32 = 0x5fc0_a11c;

/// One packet buffer.
#[repr(C, align(64))]
pub struct Packet {
    pub meta: PacketMeta,
    /// Pool bookkeeping, kept in debug builds only: `STATE_FREE` or `STATE_IN_USE`.
    pub(crate) pool_state: u32,
    _meta_pad: [u8; META_SIZE - std::mem::size_of::<PacketMeta>() - 4],
    room: [u8; BUF_SIZE - META_SIZE],
}

const _: () = assert!(std::mem::size_of::<Packet>() == BUF_SIZE);
const _: () = assert!(std::mem::size_of::<PacketMeta>() + 4 <= META_SIZE);

impl Packet {
    /// The frame bytes.
    #[inline(always)]
    pub fn data(&self) -> &[u8] {
        let off = usize::from(self.meta.data_off);
        &self.room[off..off + usize::from(self.meta.len)]
    }

    /// The frame bytes, writable.
    #[inline(always)]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let off = usize::from(self.meta.data_off);
        &mut self.room[off..off + usize::from(self.meta.len)]
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        usize::from(self.meta.len)
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.meta.len == 0
    }

    /// Resets the frame to `len` bytes at the default headroom; returns them for writing.
    /// `len` is clamped to the data room.
    #[inline(always)]
    pub fn reset(&mut self, len: usize) -> &mut [u8] {
        let len = len.min(DATA_ROOM);
        self.meta.data_off = HEADROOM as u16;
        self.meta.len = len as u16;
        &mut self.room[HEADROOM..HEADROOM + len]
    }

    /// A fresh frame of `len` bytes at the default headroom whose first 64 bytes are
    /// `head`, with its metadata: the generator's whole per-packet write (the timestamp is
    /// left alone: only probes carry one). `head` may be longer than the frame (a 64-byte
    /// template stamped into a 60-byte frame): the bytes past `len` land in the tailroom.
    #[inline(always)]
    pub fn stamp(&mut self, len: u16, in_port: u16, flow_hash: u32, seq: u32, head: &[u8; 64]) {
        debug_assert!(usize::from(len) <= DATA_ROOM);
        self.meta.data_off = HEADROOM as u16;
        self.meta.len = len;
        self.meta.in_port = in_port;
        self.meta.flags = 0;
        self.meta.flow_hash = flow_hash;
        self.meta.seq = seq;
        let dst: &mut [u8; 64] = (&mut self.room[HEADROOM..HEADROOM + 64]).try_into().unwrap();
        *dst = *head;
    }

    /// The frame's first `N` bytes, or `None` if the frame is shorter: the fast path for
    /// NFs that rewrite fixed headers (one length compare, no slice arithmetic).
    #[inline(always)]
    pub fn head_mut<const N: usize>(&mut self) -> Option<&mut [u8; N]> {
        if usize::from(self.meta.len) < N {
            return None;
        }
        let off = usize::from(self.meta.data_off);
        debug_assert!(off + N <= self.room.len());
        // SAFETY: every mutator keeps data_off + len within the room, and N <= len.
        Some(unsafe { &mut *self.room.as_mut_ptr().add(off).cast::<[u8; N]>() })
    }

    /// Grows the frame by `n` bytes at the front (into the headroom); `None` if there is no room.
    pub fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        let off = usize::from(self.meta.data_off).checked_sub(n)?;
        self.meta.data_off = off as u16;
        self.meta.len += n as u16;
        Some(&mut self.room[off..off + n])
    }

    /// Removes `n` bytes from the front; `None` if the frame is shorter.
    pub fn adjust_front(&mut self, n: usize) -> Option<()> {
        if n > self.len() {
            return None;
        }
        self.meta.data_off += n as u16;
        self.meta.len -= n as u16;
        Some(())
    }

    /// Grows the frame by `n` bytes at the end; `None` if it would not fit.
    pub fn append(&mut self, n: usize) -> Option<&mut [u8]> {
        let end = usize::from(self.meta.data_off) + self.len();
        if end + n > self.room.len() {
            return None;
        }
        self.meta.len += n as u16;
        Some(&mut self.room[end..end + n])
    }

    /// Cuts the frame to `len` bytes (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.meta.len = len as u16;
        }
    }

    #[inline(always)]
    pub fn is_probe(&self) -> bool {
        self.meta.flags & FLAG_PROBE != 0
    }

    /// The whole writable room (headroom included), for pool priming.
    pub(crate) fn room_mut(&mut self) -> &mut [u8] {
        &mut self.room
    }
}

#[cfg(test)]
mod tests {
    use crate::pool::PacketPool;

    #[test]
    fn prepend_append_and_trim_stay_in_bounds() {
        let mut pool = PacketPool::new(4);
        let mut p = pool.alloc().unwrap();
        p.reset(60).fill(7);
        assert_eq!(p.len(), 60);
        p.prepend(20).unwrap().fill(1);
        assert_eq!(p.len(), 80);
        assert_eq!(p.data()[0], 1);
        assert_eq!(p.data()[20], 7);
        assert!(p.prepend(super::HEADROOM).is_none(), "headroom is 128 - 20 now");
        p.adjust_front(20).unwrap();
        assert_eq!(p.data()[0], 7);
        p.append(16).unwrap().fill(9);
        assert_eq!(p.len(), 76);
        assert!(p.append(super::DATA_ROOM).is_none());
        p.truncate(10);
        assert_eq!(p.len(), 10);
        assert!(p.adjust_front(11).is_none());
        pool.free(p);
        assert_eq!(pool.available(), 4);
    }
}
