//! The Network Service Header (RFC 8300): a base header (version, O bit, TTL, length,
//! MD type, next protocol), a service path header (SPI and SI), then the context: 16
//! fixed bytes for MD type 1, variable-length TLVs for MD type 2. Over Ethernet its
//! EtherType is 0x894F.
//!
//! ```text
//! |Ver|O|U|    TTL    |   Length  |U|U|U|U|MD Type| Next Protocol |
//! |          Service Path Identifier (SPI)        | Service Index |
//! ~               Fixed (MD 1) or variable (MD 2) context         ~
//! ```

use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::WireError;

/// EtherType of NSH over Ethernet.
pub const ETHERTYPE_NSH: u16 = 0x894f;

/// MD type 1: a fixed 16-byte context follows the service path header.
pub const MD_TYPE_1: u8 = 1;
/// MD type 2: zero or more variable-length context headers (TLVs) follow.
pub const MD_TYPE_2: u8 = 2;
/// Bytes of an MD type 1 context.
pub const MD1_CONTEXT: usize = 16;
/// The largest NSH: the length field counts 4-byte words in 6 bits.
pub const MAX_LEN: usize = 63 * 4;
/// RFC 8300 §2.2: "the default initial TTL value of 63 MUST be used".
pub const DEFAULT_TTL: u8 = 63;
/// The TTL field's width: 6 bits.
pub const MAX_TTL: u8 = 63;

/// What follows the NSH (RFC 8300 §11.2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextProtocol {
    Ipv4,
    Ipv6,
    Ethernet,
    Nsh,
    Mpls,
    Unknown(u8),
}

impl From<u8> for NextProtocol {
    fn from(v: u8) -> Self {
        match v {
            1 => NextProtocol::Ipv4,
            2 => NextProtocol::Ipv6,
            3 => NextProtocol::Ethernet,
            4 => NextProtocol::Nsh,
            5 => NextProtocol::Mpls,
            n => NextProtocol::Unknown(n),
        }
    }
}

impl From<NextProtocol> for u8 {
    fn from(v: NextProtocol) -> u8 {
        match v {
            NextProtocol::Ipv4 => 1,
            NextProtocol::Ipv6 => 2,
            NextProtocol::Ethernet => 3,
            NextProtocol::Nsh => 4,
            NextProtocol::Mpls => 5,
            NextProtocol::Unknown(n) => n,
        }
    }
}

/// The 8 bytes every NSH starts with: base header and service path header.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct NshHeader {
    /// Version (2 bits), O bit, an unassigned bit, TTL (6 bits), length (6 bits).
    pub flags_ttl_len: U16,
    /// Four unassigned bits, then the MD type.
    pub md_type: u8,
    pub next_protocol: u8,
    /// SPI (24 bits) and SI (8 bits).
    pub path: U32,
}

crate::header_view!(NshHeader);

impl NshHeader {
    pub fn version(&self) -> u8 {
        (self.flags_ttl_len.get() >> 14) as u8
    }

    /// Whether this is an OAM packet (the O bit).
    pub fn oam(&self) -> bool {
        self.flags_ttl_len.get() & 0x2000 != 0
    }

    pub fn ttl(&self) -> u8 {
        ((self.flags_ttl_len.get() >> 6) & 0x3f) as u8
    }

    /// Sets the TTL (masked to 6 bits), keeping every other bit as it was.
    pub fn set_ttl(&mut self, ttl: u8) {
        let v = self.flags_ttl_len.get() & !0x0fc0 | u16::from(ttl & 0x3f) << 6;
        self.flags_ttl_len.set(v);
    }

    /// The whole NSH's length in bytes, context included (the field counts words).
    pub fn len_bytes(&self) -> usize {
        usize::from(self.flags_ttl_len.get() & 0x3f) * 4
    }

    /// The MD type (the low four bits; the unassigned ones are not part of it).
    pub fn md(&self) -> u8 {
        self.md_type & 0x0f
    }

    pub fn next(&self) -> NextProtocol {
        NextProtocol::from(self.next_protocol)
    }

    pub fn spi(&self) -> u32 {
        self.path.get() >> 8
    }

    pub fn si(&self) -> u8 {
        self.path.get() as u8
    }

    pub fn set_si(&mut self, si: u8) {
        self.path.set(self.path.get() & !0xff | u32::from(si));
    }

    /// The SPI and SI as one number, `spi << 8 | si`: a path table's key.
    pub fn path_key(&self) -> u32 {
        self.path.get()
    }

    /// The first word for `ttl` and a header of `len` bytes (a multiple of 4, at most
    /// [`MAX_LEN`]): version 0, O bit clear.
    pub fn first_word(ttl: u8, len: usize) -> u16 {
        debug_assert!(len.is_multiple_of(4) && len <= MAX_LEN);
        u16::from(ttl & 0x3f) << 6 | (len / 4) as u16 & 0x3f
    }
}

/// Why an NSH is refused (RFC 8300 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NshError {
    /// Fewer bytes than the header says it has, or a length below what its MD type needs.
    Malformed,
    /// A version other than 0.
    Version,
    /// MD type 0 (reserved), 0xF (experimental) or unknown: silently discarded (§2.2).
    MdType,
}

/// Checks the NSH at the front of `bytes`: version 0, a known MD type with a length it
/// allows (6 words for MD type 1, at least 2 for MD type 2), and all of it present.
/// Returns the header and its length in bytes.
pub fn check(bytes: &[u8]) -> Result<(&NshHeader, usize), NshError> {
    let (h, _) = NshHeader::parse(bytes).map_err(|_| NshError::Malformed)?;
    if h.version() != 0 {
        return Err(NshError::Version);
    }
    let len = h.len_bytes();
    match h.md() {
        MD_TYPE_1 if len != NshHeader::LEN + MD1_CONTEXT => return Err(NshError::Malformed),
        MD_TYPE_2 if len < NshHeader::LEN => return Err(NshError::Malformed),
        MD_TYPE_1 | MD_TYPE_2 => {}
        _ => return Err(NshError::MdType),
    }
    if bytes.len() < len {
        return Err(NshError::Malformed);
    }
    Ok((h, len))
}

/// One MD type 2 context header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextTlv<'a> {
    pub class: u16,
    pub kind: u8,
    /// The metadata, without its padding.
    pub value: &'a [u8],
}

impl ContextTlv<'_> {
    /// Bytes on the wire: 4 of header, the value padded to 4.
    pub fn wire_len(&self) -> usize {
        4 + self.value.len().div_ceil(4) * 4
    }

    /// Writes it to the front of `out` (at least `wire_len()` bytes), padding with zeros.
    pub fn write(&self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.class.to_be_bytes());
        out[2] = self.kind & 0x7f;
        out[3] = self.value.len() as u8;
        out[4..4 + self.value.len()].copy_from_slice(self.value);
        out[4 + self.value.len()..self.wire_len()].fill(0);
    }
}

/// The context headers in an MD type 2 context (the bytes after the service path
/// header, up to the NSH's length); an item is `Err` where one runs past the end, and
/// the walk stops there.
pub fn tlvs(context: &[u8]) -> impl Iterator<Item = Result<ContextTlv<'_>, WireError>> + '_ {
    let mut rest = context;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() < 4 {
            rest = &[];
            return Some(Err(WireError::Truncated));
        }
        // The high bit of the length byte is unassigned: ignored on receipt.
        let len = usize::from(rest[3] & 0x7f);
        let padded = 4 + len.div_ceil(4) * 4;
        if rest.len() < padded {
            rest = &[];
            return Some(Err(WireError::Truncated));
        }
        let tlv = ContextTlv {
            class: u16::from_be_bytes([rest[0], rest[1]]),
            kind: rest[2],
            value: &rest[4..4 + len],
        };
        rest = &rest[padded..];
        Some(Ok(tlv))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// An MD type 1 NSH as Open vSwitch's `encap(nsh(md_type=1))` writes it (TTL 63,
    /// SPI 0x2a, SI 255, C1 0x01020304), then an Ethernet frame's first bytes.
    const MD1: &str = "0fc6 01 03 00002aff 01020304 00000000 00000000 00000000 0200";

    #[test]
    fn reads_an_md_type_1_header() {
        let b = hex(MD1);
        let (h, len) = check(&b).unwrap();
        assert_eq!((h.version(), h.oam(), h.ttl(), len), (0, false, 63, 24));
        assert_eq!((h.md(), h.next()), (MD_TYPE_1, NextProtocol::Ethernet));
        assert_eq!((h.spi(), h.si(), h.path_key()), (0x2a, 255, 0x2aff));
        assert_eq!(&b[8..12], &[1, 2, 3, 4]);
        assert_eq!(NshHeader::first_word(63, 24), 0x0fc6);
    }

    #[test]
    fn rewrites_ttl_and_si_and_keeps_the_other_bits() {
        let mut b = hex(MD1);
        b[0] |= 0x10; // an unassigned bit: preserved (§2.2)
        let (h, _) = NshHeader::parse_mut(&mut b).unwrap();
        h.set_ttl(1);
        h.set_si(254);
        assert_eq!((h.ttl(), h.si(), h.spi()), (1, 254, 0x2a));
        assert_eq!(h.flags_ttl_len.get(), 0x1046);
    }

    #[test]
    fn refuses_what_rfc_8300_discards() {
        let b = hex(MD1);
        let with = |at: usize, v: u8| {
            let mut c = b.clone();
            c[at] = v;
            c
        };
        assert_eq!(check(&with(0, 0x4f)).err(), Some(NshError::Version));
        assert_eq!(
            check(&with(2, 0)).err(),
            Some(NshError::MdType),
            "MD type 0 is reserved"
        );
        assert_eq!(
            check(&with(2, 0x0f)).err(),
            Some(NshError::MdType),
            "0xF is experimental"
        );
        assert_eq!(
            check(&with(1, 0xc5)).err(),
            Some(NshError::Malformed),
            "MD 1 is 6 words"
        );
        assert_eq!(check(&b[..20]).err(), Some(NshError::Malformed), "cut short");
        // MD type 2 with only the two fixed words is valid; one word is not.
        let md2 = hex("0fc2 02 01 00002aff 4500");
        assert_eq!(check(&md2).unwrap().1, 8);
        assert_eq!(check(&hex("0fc1 02 01 00002aff")).err(), Some(NshError::Malformed));
        assert!(check(&[0u8; 3]).is_err());
    }

    #[test]
    fn walks_md_type_2_context_headers_with_their_padding() {
        let tlv = ContextTlv {
            class: 0x0101,
            kind: 7,
            value: &[0xaa, 0xbb, 0xcc, 0xdd, 0xee],
        };
        assert_eq!(tlv.wire_len(), 12);
        let mut ctx = vec![0xffu8; 16];
        tlv.write(&mut ctx);
        ContextTlv {
            class: 2,
            kind: 1,
            value: &[],
        }
        .write(&mut ctx[12..]);
        assert_eq!(&ctx[..12], &hex("0101 07 05 aabbccdd ee000000")[..]);
        let all: Vec<_> = tlvs(&ctx).collect();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], Ok(tlv));
        assert_eq!(all[1].unwrap().class, 2);
        assert_eq!(tlvs(&ctx[..10]).collect::<Vec<_>>(), vec![Err(WireError::Truncated)]);
        assert_eq!(tlvs(&ctx[..2]).count(), 1);
    }
}
