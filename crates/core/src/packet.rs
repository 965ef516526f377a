//! A packet buffer: one cache line of metadata, headroom for encapsulation, then the frame.
//!
//! Layout of one buffer (`BUF_SIZE` bytes, 64-byte aligned):
//! `[meta: 64][headroom: 128][frame ... up to DATA_ROOM]`.
//!
//! The metadata line carries what NFs share about a packet besides its bytes: where
//! its layers start (found once by the parser step, [`Packet::layers`]), its flow hash
//! ([`Packet::flow_hash`]) and the notes NFs leave for later NFs ([`Notes`]).
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
///
/// The frame's place in the buffer (`data_off`, `len`) is private: only this crate's
/// checked methods set them, keeping `data_off + len <= BUF_SIZE - META_SIZE`. Every
/// value safe code can make keeps it: the default (an empty frame at 0), or a copy of
/// another packet's metadata (all buffers have the same room). Memory safety does not
/// rest on it: every access slices the room with bounds checks, because a buffer in
/// shared memory ([`crate::PacketPool::shared`]) can have its metadata written by a
/// peer that breaks its protocol. The public fields are free to set.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(8))]
pub struct PacketMeta {
    /// Offset of the first frame byte in `Packet::room`.
    data_off: u16,
    /// Frame length in bytes (no FCS).
    len: u16,
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
    /// The parser step's result, or unparsed. Private so that every change of the
    /// frame's place forgets it (offsets are hints for checked views, never pointers).
    layers: Layers,
}

/// Hints one NF leaves in a packet for the NFs after it, as VPP's buffer opaque: a few
/// 32-bit slots, each with a documented meaning and writer, and a mask of the slots
/// written since the packet was made, so a slot never leaks a value from the buffer's
/// previous packet.
///
/// | slot | written by | meaning |
/// |---|---|---|
/// | [`Note::NEXT_HOP`] | router | the next hop it chose: distinct (next hop, port) pairs numbered from 0 in routing-table order |
/// | [`Note::CONNTRACK`] | firewall (stateful) | 1: the packet opened a connection; 2: it belongs to a tracked one |
/// | [`Note::COLOUR`] | qos (its meters) | 1 green, 2 yellow, 3 red |
/// | [`Note::SECURITY_ASSOCIATION`] | IPsec (part 2) | SA index |
/// | [`Note::SERVICE_PATH`] | NSH (part 2) | service path id << 8 \| service index |
/// | [`Note::SIGNATURE`] | dpi | the sid of the first `alert` signature the packet fired |
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Notes {
    written: u32,
    slots: [u32; Note::SLOTS],
}

/// A slot of [`Notes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Note(u8);

impl Note {
    pub const NEXT_HOP: Note = Note(0);
    pub const CONNTRACK: Note = Note(1);
    pub const COLOUR: Note = Note(2);
    pub const SECURITY_ASSOCIATION: Note = Note(3);
    pub const SERVICE_PATH: Note = Note(4);
    pub const SIGNATURE: Note = Note(5);
    /// Slots in a packet's notes.
    pub const SLOTS: usize = 6;
}

impl Notes {
    /// The value an earlier NF wrote in `slot` for this packet, if any.
    #[inline(always)]
    pub fn get(&self, slot: Note) -> Option<u32> {
        (self.written & 1 << slot.0 != 0).then(|| self.slots[usize::from(slot.0)])
    }

    #[inline(always)]
    pub fn set(&mut self, slot: Note, value: u32) {
        self.slots[usize::from(slot.0)] = value;
        self.written |= 1 << slot.0;
    }

    /// Forgets every note (the slots' bytes stay, unreadable).
    #[inline(always)]
    pub fn clear(&mut self) {
        self.written = 0;
    }
}

impl PacketMeta {
    /// The metadata of a fresh frame of `len` bytes (clamped to `DATA_ROOM`) at the
    /// default headroom, entered on `in_port`, with `flags`; no timestamp.
    pub fn fresh(len: u16, in_port: u16, flags: u16) -> PacketMeta {
        PacketMeta {
            data_off: HEADROOM as u16,
            len: len.min(DATA_ROOM as u16),
            in_port,
            flags,
            ..Default::default()
        }
    }
}

impl PacketMeta {
    /// The parser step's result, if an NF has asked for it since the frame last moved.
    #[inline(always)]
    pub fn cached_layers(&self) -> Option<Layers> {
        self.layers.is_parsed().then_some(self.layers)
    }

    /// Forgets the parser step's result (see [`Packet::layers`]).
    #[inline(always)]
    pub fn forget_layers(&mut self) {
        self.layers = Layers::default();
    }
}

/// Which of `shards` replicas a packet with `flow_hash` goes to, as RSS spreads flows
/// over queues: multiply-shift maps the hash's high bits onto `0..shards` without a
/// division, so every packet of a flow lands in the same shard.
#[inline(always)]
pub fn shard_of(flow_hash: u32, shards: usize) -> usize {
    ((u64::from(flow_hash) * shards as u64) >> 32) as usize
}

use sfclab_wire::{Layers, WireError};

/// The packet is a latency probe: the sink records `now - timestamp`.
pub const FLAG_PROBE: u16 = 1;
/// The source generated the packet inside the measured window. Sinks count these apart,
/// so the window's loss is exact even when packets are in flight at its edges (across
/// cores, a packet generated before the window may arrive in it, and one generated in it
/// after it).
pub const FLAG_WINDOW: u16 = 2;
/// An NF created the packet (`Context::alloc`): it is never the source's window traffic,
/// whatever flags the NF copies into it (`Context::emit` clears `FLAG_WINDOW` on it).
pub const FLAG_CREATED: u16 = 4;
/// `flow_hash` holds the packet's flow hash (the source set it, as a NIC's RSS does, or
/// [`Packet::flow_hash`] computed it); without it the field means nothing.
pub const FLAG_FLOW_HASH: u16 = 8;

#[cfg_attr(not(debug_assertions), allow(dead_code))]
pub(crate) const STATE_FREE: u32 = 0x5fc0_f4ee;
#[cfg_attr(not(debug_assertions), allow(dead_code))]
pub(crate) const STATE_IN_USE: u32 = 0x5fc0_a11c;

/// One packet buffer.
///
/// Invariant: `meta.data_off + meta.len <= room.len()` (see [`PacketMeta`]). Every method
/// that moves the frame keeps it, which is what makes `head_mut`'s unchecked access sound.
#[repr(C, align(64))]
pub struct Packet {
    pub meta: PacketMeta,
    /// Hints NFs leave for the NFs after them. Apart from `meta` so the generator's
    /// per-packet stamp stays one 32-byte store (plus clearing the notes' mask).
    pub notes: Notes,
    /// Pool bookkeeping, kept in debug builds only: `STATE_FREE` or `STATE_IN_USE`.
    pub(crate) pool_state: u32,
    _meta_pad: [u8; META_SIZE - std::mem::size_of::<PacketMeta>() - std::mem::size_of::<Notes>() - 4],
    room: [u8; BUF_SIZE - META_SIZE],
}

const _: () = assert!(std::mem::size_of::<Packet>() == BUF_SIZE);
const _: () = assert!(std::mem::size_of::<PacketMeta>() + std::mem::size_of::<Notes>() + 4 <= META_SIZE);
const _: () = assert!(std::mem::size_of::<PacketMeta>() == 32);
const _: () = assert!(HEADROOM + DATA_ROOM == BUF_SIZE - META_SIZE);
// Offsets and lengths fit the u16 fields.
const _: () = assert!(BUF_SIZE - META_SIZE <= u16::MAX as usize);

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

    /// Bytes free in front of the frame, for `prepend`.
    #[inline(always)]
    pub fn headroom(&self) -> usize {
        usize::from(self.meta.data_off)
    }

    /// Bytes free after the frame, for `append`.
    #[inline(always)]
    pub fn tailroom(&self) -> usize {
        self.room.len() - usize::from(self.meta.data_off) - self.len()
    }

    /// Frame length in bytes (no FCS).
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
        self.meta.forget_layers();
        &mut self.room[HEADROOM..HEADROOM + len]
    }

    /// The generator's whole per-packet write: the metadata `fresh` (from
    /// [`PacketMeta::fresh`], built once per batch) with this packet's flow hash and
    /// sequence number, and the frame's first 64 bytes from `head`. `head` may be longer
    /// than the frame (a 64-byte template stamped into a 60-byte frame): the bytes past
    /// the frame land in the tailroom.
    #[inline(always)]
    pub fn stamp(&mut self, fresh: &PacketMeta, flow_hash: u32, seq: u32, head: &[u8; 64]) {
        // One struct store: the loop-invariant first eight bytes stay one register
        // (separate field stores measured 1.5 cycles/packet slower).
        self.meta = PacketMeta {
            flow_hash,
            seq,
            ..*fresh
        };
        self.notes.clear();
        *self.head_mut_64() = *head;
    }

    /// The 64 bytes a fresh frame starts with ([`PacketMeta::fresh`]'s offset), whatever
    /// its length: a source's stamp writes a whole template there.
    #[inline(always)]
    pub(crate) fn head_mut_64(&mut self) -> &mut [u8; 64] {
        self.room
            .first_chunk_mut::<{ HEADROOM + 64 }>()
            .unwrap()
            .last_chunk_mut::<64>()
            .unwrap()
    }

    /// The frame's first `N` bytes, or `None` if the frame is shorter: the fast path for
    /// NFs that rewrite fixed headers (one length compare, no slice arithmetic).
    #[inline(always)]
    pub fn head_mut<const N: usize>(&mut self) -> Option<&mut [u8; N]> {
        if usize::from(self.meta.len) < N {
            return None;
        }
        let off = usize::from(self.meta.data_off);
        // Checked, not taken from the type's invariant: a buffer of a pool in shared
        // memory (`PacketPool::shared`) lies where a peer process that breaks the
        // protocol could write its metadata too; that must garble this frame, never
        // reach past it. One compare the fixed header's length check mostly decides.
        self.room.get_mut(off..off + N)?.first_chunk_mut::<N>()
    }

    /// Grows the frame by `n` bytes at the front (into the headroom); `None` if there is no room.
    pub fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        let off = usize::from(self.meta.data_off).checked_sub(n)?;
        self.meta.data_off = off as u16;
        self.meta.len += n as u16;
        self.meta.forget_layers();
        Some(&mut self.room[off..off + n])
    }

    /// Removes `n` bytes from the front; `None` if the frame is shorter.
    pub fn adjust_front(&mut self, n: usize) -> Option<()> {
        if n > self.len() {
            return None;
        }
        self.meta.data_off += n as u16;
        self.meta.len -= n as u16;
        self.meta.forget_layers();
        Some(())
    }

    /// Grows the frame by `n` bytes at the end; `None` if it would not fit.
    pub fn append(&mut self, n: usize) -> Option<&mut [u8]> {
        let end = usize::from(self.meta.data_off) + self.len();
        if n > self.room.len() - end {
            return None;
        }
        self.meta.len += n as u16;
        self.meta.forget_layers();
        Some(&mut self.room[end..end + n])
    }

    /// Cuts the frame to `len` bytes (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.meta.len = len as u16;
            self.meta.forget_layers();
        }
    }

    /// Where the frame's layers start: the parser step's result, kept in the metadata so
    /// only the first NF that asks walks the headers. Malformed headers are an error
    /// (and are walked again by whoever asks next: such packets are dropped at once).
    ///
    /// The cache is forgotten whenever the frame moves or changes length. An NF that
    /// rewrites a header's layout in place (an EtherType, an IHL) calls
    /// `meta.forget_layers()`; stale offsets could misparse, never read out of bounds.
    #[inline(always)]
    pub fn layers(&mut self) -> Result<Layers, WireError> {
        if self.meta.layers.is_parsed() {
            return Ok(self.meta.layers);
        }
        let layers = Layers::parse(self.data())?;
        self.meta.layers = layers;
        Ok(layers)
    }

    /// The packet's flow hash: the source's (`FLAG_FLOW_HASH`), or computed here from
    /// the headers with [`flow::hash`](sfclab_wire::flow::hash) and kept. Frames that
    /// are not IP hash to their Ethernet addresses; IP fragments to their addresses
    /// alone, so every fragment of a datagram lands where its first one does.
    #[inline]
    pub fn flow_hash(&mut self) -> u32 {
        if self.meta.flags & FLAG_FLOW_HASH == 0 {
            let layers = self.layers().unwrap_or_default();
            self.meta.flow_hash = sfclab_wire::flow::hash_frame(self.data(), &layers);
            self.meta.flags |= FLAG_FLOW_HASH;
        }
        self.meta.flow_hash
    }

    #[inline(always)]
    pub fn is_probe(&self) -> bool {
        self.meta.flags & FLAG_PROBE != 0
    }

    /// Generated inside the measured window (see [`FLAG_WINDOW`]).
    #[inline(always)]
    pub fn in_window(&self) -> bool {
        self.meta.flags & FLAG_WINDOW != 0
    }

    /// Asks the CPU for the buffer's metadata line and the first line of a frame at the
    /// default headroom, reading neither: for a buffer another core (or a peer's
    /// process) wrote last.
    #[inline(always)]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let base = (self as *const Packet).cast::<i8>();
            // SAFETY: prefetches never fault; both addresses are inside this buffer.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(base);
                _mm_prefetch::<_MM_HINT_T0>(base.add(META_SIZE + HEADROOM));
            }
        }
    }

    /// The whole writable room (headroom included), for pool priming.
    pub(crate) fn room_mut(&mut self) -> &mut [u8] {
        &mut self.room
    }

    /// An empty frame at the default headroom: how the pool hands buffers out.
    #[inline(always)]
    pub(crate) fn clear_frame(&mut self) {
        // Fresh metadata too: no flag, layer or note of the buffer's last packet survives.
        self.meta = PacketMeta::fresh(0, 0, 0);
        self.notes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::{DATA_ROOM, HEADROOM};
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

    #[test]
    fn stamp_clamps_an_oversized_length_to_the_room() {
        let mut pool = PacketPool::new(1);
        let mut p = pool.alloc().unwrap();
        p.stamp(&super::PacketMeta::fresh(u16::MAX, 0, 0), 0, 0, &[0xab; 64]);
        assert_eq!(p.len(), DATA_ROOM);
        assert_eq!(p.tailroom(), 0);
        assert_eq!(p.data()[DATA_ROOM - 1], p.data()[DATA_ROOM - 1], "readable to the end");
        pool.free(p);
    }

    fn udp_frame() -> Vec<u8> {
        let r = sfclab_wire::FrameRepr {
            ethernet: sfclab_wire::EthernetRepr {
                src: sfclab_wire::MacAddr([2, 0, 0, 0, 0, 1]),
                dst: sfclab_wire::MacAddr([2, 0, 0, 0, 0, 2]),
                vlan_tci: None,
            },
            ip: sfclab_wire::IpRepr::v4([10, 0, 0, 1], [10, 0, 0, 2]),
            transport: sfclab_wire::TransportRepr::Udp {
                src_port: 7,
                dst_port: 9,
            },
        };
        let mut f = vec![0u8; 64];
        let n = r.emit(&mut f, &[0; 18]).unwrap();
        f.truncate(n);
        f
    }

    /// The parser step runs once: later calls return the kept offsets, and any change
    /// of the frame's place or length forgets them.
    #[test]
    fn layers_are_kept_until_the_frame_moves() {
        let mut pool = PacketPool::new(1);
        let mut p = pool.alloc().unwrap();
        let f = udp_frame();
        p.reset(f.len()).copy_from_slice(&f);
        let layers = p.layers().unwrap();
        assert_eq!(layers.l4_offset(), Some(34));
        // Kept: breaking the EtherType in place does not re-parse (that is the NF's
        // `forget_layers` to call), and forgetting does.
        p.data_mut()[12] = 0x99;
        assert_eq!(p.layers(), Ok(layers));
        p.meta.forget_layers();
        assert_eq!(p.layers().unwrap().network(), sfclab_wire::Network::Other);
        p.data_mut()[12] = 0x08;
        p.prepend(4).unwrap().copy_from_slice(&[0; 4]);
        assert_eq!(
            p.layers().unwrap().network(),
            sfclab_wire::Network::Other,
            "re-parsed after prepend"
        );
        p.adjust_front(4).unwrap();
        assert_eq!(p.layers(), Ok(layers));
        p.truncate(30);
        assert!(p.layers().is_err(), "re-parsed after truncate");
        pool.free(p);
    }

    /// A packet's flow hash is the source's when it set one, else computed from the
    /// headers once; a fresh buffer carries neither hash, layers nor notes of its last use.
    #[test]
    fn flow_hash_and_notes_start_fresh() {
        use super::{FLAG_FLOW_HASH, Note};
        let mut pool = PacketPool::new(1);
        let mut p = pool.alloc().unwrap();
        let f = udp_frame();
        p.reset(f.len()).copy_from_slice(&f);
        let computed = p.flow_hash();
        assert_eq!(
            computed,
            sfclab_wire::flow::hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 7, 9, 17)
        );
        p.meta.flow_hash = 42;
        assert_eq!(p.flow_hash(), 42, "kept once computed or set");
        assert_eq!(p.notes.get(Note::NEXT_HOP), None);
        p.notes.set(Note::NEXT_HOP, 3);
        assert_eq!(p.notes.get(Note::NEXT_HOP), Some(3));
        assert_eq!(p.notes.get(Note::CONNTRACK), None);
        pool.free(p);
        let mut p = pool.alloc().unwrap();
        assert_eq!(p.meta.flags & FLAG_FLOW_HASH, 0);
        assert_eq!(p.notes.get(Note::NEXT_HOP), None, "no note outlives its packet");
        assert!(p.layers().is_err(), "an empty frame has no layers");
        pool.free(p);
    }

    /// Any sequence of safe frame operations keeps the frame inside the buffer, so the
    /// unchecked `head_mut` stays in bounds (Miri checks every access in this test).
    #[test]
    fn random_frame_operations_keep_the_frame_inside_the_buffer() {
        use proptest::prelude::*;
        let ops = proptest::collection::vec((0u8..6, 0usize..4096), 1..40);
        let cases = if cfg!(miri) { 4 } else { 256 };
        proptest!(ProptestConfig::with_cases(cases), |(ops in ops)| {
            let mut pool = PacketPool::new(1);
            let mut p = pool.alloc().unwrap();
            for (op, n) in ops {
                match op {
                    0 => { p.reset(n); }
                    1 => { let _ = p.prepend(n); }
                    2 => { let _ = p.adjust_front(n); }
                    3 => { let _ = p.append(n); }
                    4 => p.truncate(n),
                    _ => p.stamp(&super::PacketMeta::fresh(n as u16, 0, 0), 0, 0, &[1; 64]),
                }
                prop_assert_eq!(p.headroom() + p.len() + p.tailroom(), HEADROOM + DATA_ROOM);
                if let Some(h) = p.head_mut::<64>() {
                    h[63] = 1;
                }
                if let Some(h) = p.head_mut::<14>() {
                    h[0] = 2;
                }
                let len = p.len();
                if len > 0 {
                    p.data_mut()[len - 1] = 3;
                }
            }
            pool.free(p);
        });
    }
}
