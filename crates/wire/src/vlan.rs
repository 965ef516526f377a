//! IEEE 802.1Q VLAN tags (and 802.1ad service tags, same layout), between the Ethernet
//! addresses and the EtherType of the payload.

use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// EtherType of an 802.1ad service tag (QinQ's outer tag).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;

/// The 4 bytes after an 802.1Q/802.1ad EtherType: the tag control information and the
/// EtherType of what follows.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct VlanHeader {
    pub tci: U16,
    pub ethertype: U16,
}

crate::header_view!(VlanHeader);

impl VlanHeader {
    /// Priority code point (802.1p class), 0..=7.
    pub fn pcp(&self) -> u8 {
        (self.tci.get() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci.get() & 0x1000 != 0
    }

    /// VLAN identifier, 0..=4095 (0: priority tag only; 4095 reserved).
    pub fn vid(&self) -> u16 {
        self.tci.get() & 0x0fff
    }

    pub fn ethertype(&self) -> crate::EtherType {
        crate::EtherType::from(self.ethertype.get())
    }

    /// The TCI for `pcp`, `dei` and `vid` (each masked to its width).
    pub fn tci_of(pcp: u8, dei: bool, vid: u16) -> u16 {
        u16::from(pcp & 7) << 13 | u16::from(dei) << 12 | (vid & 0x0fff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// A tagged frame from a capture (802.1Q, PCP 5, VID 100, then IPv4), as hex.
    const TAGGED: &str = "ffffffffffff020000000001 8100 a064 0800 4500";

    #[test]
    fn reads_the_tag_fields() {
        let f = hex(TAGGED);
        let (vlan, rest) = VlanHeader::parse(&f[14..]).unwrap();
        assert_eq!(vlan.pcp(), 5);
        assert!(!vlan.dei());
        assert_eq!(vlan.vid(), 100);
        assert_eq!(vlan.ethertype(), crate::EtherType::Ipv4);
        assert_eq!(rest, &[0x45, 0]);
        assert_eq!(VlanHeader::tci_of(5, false, 100), 0xa064);
        assert_eq!(VlanHeader::tci_of(7, true, 0xffff), 0xffff);
        assert!(VlanHeader::parse(&f[14..17]).is_err());
    }
}
