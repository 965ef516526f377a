//! ARP for IPv4 over Ethernet (RFC 826): the only combination on an Ethernet LAN.

use crate::WireError;
use crate::ethernet::MacAddr;
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The 28-byte ARP packet for Ethernet hardware and IPv4 protocol addresses.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct ArpHeader {
    pub hardware: U16,
    pub protocol: U16,
    pub hardware_len: u8,
    pub protocol_len: u8,
    pub operation: U16,
    pub sender_mac: MacAddr,
    pub sender_ip: [u8; 4],
    pub target_mac: MacAddr,
    pub target_ip: [u8; 4],
}

crate::header_view!(ArpHeader);

/// ARP operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpOperation {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            n => ArpOperation::Unknown(n),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(v: ArpOperation) -> u16 {
        match v {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(n) => n,
        }
    }
}

/// An ARP packet's meaning, checked: Ethernet/IPv4 only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRepr {
    pub operation: ArpOperation,
    pub sender_mac: MacAddr,
    pub sender_ip: [u8; 4],
    pub target_mac: MacAddr,
    pub target_ip: [u8; 4],
}

impl ArpRepr {
    pub const LEN: usize = ArpHeader::LEN;

    /// Reads an Ethernet/IPv4 ARP packet; any other hardware or protocol type, or address
    /// lengths that contradict them, is `BadHeader`.
    pub fn parse(bytes: &[u8]) -> Result<ArpRepr, WireError> {
        let (h, _) = ArpHeader::parse(bytes)?;
        if h.hardware.get() != 1 || h.protocol.get() != 0x0800 || h.hardware_len != 6 || h.protocol_len != 4 {
            return Err(WireError::BadHeader);
        }
        Ok(ArpRepr {
            operation: ArpOperation::from(h.operation.get()),
            sender_mac: h.sender_mac,
            sender_ip: h.sender_ip,
            target_mac: h.target_mac,
            target_ip: h.target_ip,
        })
    }

    /// Writes the packet into the front of `out`; returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let (h, _) = ArpHeader::parse_mut(out)?;
        *h = ArpHeader {
            hardware: U16::new(1),
            protocol: U16::new(0x0800),
            hardware_len: 6,
            protocol_len: 4,
            operation: U16::new(self.operation.into()),
            sender_mac: self.sender_mac,
            sender_ip: self.sender_ip,
            target_mac: self.target_mac,
            target_ip: self.target_ip,
        };
        Ok(Self::LEN)
    }

    /// The reply a host owning `target_ip` with `my_mac` sends to this request.
    pub fn reply(&self, my_mac: MacAddr) -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::Reply,
            sender_mac: my_mac,
            sender_ip: self.target_ip,
            target_mac: self.sender_mac,
            target_ip: self.sender_ip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// "Who has 192.168.1.1? Tell 192.168.1.2" as Wireshark's ARP sample shows it.
    const REQUEST: &str = "0001 0800 06 04 0001 020000000002 c0a80102 000000000000 c0a80101";

    #[test]
    fn parses_and_emits_the_fixture() {
        let bytes = hex(REQUEST);
        let r = ArpRepr::parse(&bytes).unwrap();
        assert_eq!(r.operation, ArpOperation::Request);
        assert_eq!(r.sender_ip, [192, 168, 1, 2]);
        assert_eq!(r.target_ip, [192, 168, 1, 1]);
        assert_eq!(r.sender_mac, MacAddr([2, 0, 0, 0, 0, 2]));
        let mut out = [0u8; 28];
        assert_eq!(r.emit(&mut out), Ok(28));
        assert_eq!(&out[..], &bytes[..]);
    }

    #[test]
    fn reply_swaps_the_parties() {
        let r = ArpRepr::parse(&hex(REQUEST)).unwrap();
        let me = MacAddr([2, 0, 0, 0, 0, 1]);
        let reply = r.reply(me);
        assert_eq!(reply.operation, ArpOperation::Reply);
        assert_eq!((reply.sender_mac, reply.sender_ip), (me, [192, 168, 1, 1]));
        assert_eq!((reply.target_mac, reply.target_ip), (r.sender_mac, r.sender_ip));
    }

    #[test]
    fn refuses_other_hardware_and_short_input() {
        let mut bytes = hex(REQUEST);
        assert_eq!(ArpRepr::parse(&bytes[..27]), Err(WireError::Truncated));
        bytes[1] = 6; // IEEE 802 hardware
        assert_eq!(ArpRepr::parse(&bytes), Err(WireError::BadHeader));
        assert_eq!(
            ArpRepr::parse(&hex(REQUEST)).unwrap().emit(&mut [0u8; 27]),
            Err(WireError::Truncated)
        );
    }
}
