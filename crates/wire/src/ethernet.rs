//! Ethernet II (IEEE 802.3 with an EtherType), without the FCS.

use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(transparent)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
}

impl std::fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl std::str::FromStr for MacAddr {
    type Err = String;

    /// Parses `aa:bb:cc:dd:ee:ff` (or with `-`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in &mut out {
            let part = parts
                .next()
                .ok_or_else(|| format!("`{s}` is not a MAC address (need 6 hex bytes)"))?;
            if part.is_empty() || part.len() > 2 {
                return Err(format!("`{s}` is not a MAC address (bad byte `{part}`)"));
            }
            *byte =
                u8::from_str_radix(part, 16).map_err(|_| format!("`{s}` is not a MAC address (bad byte `{part}`)"))?;
        }
        if parts.next().is_some() {
            return Err(format!("`{s}` is not a MAC address (more than 6 bytes)"));
        }
        Ok(MacAddr(out))
    }
}

/// EtherType values sfclab looks at; everything else is `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtherType {
    Ipv4,
    Arp,
    Vlan,
    Ipv6,
    /// RFC 8300's Network Service Header.
    Nsh,
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        match v {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x8100 => EtherType::Vlan,
            0x86dd => EtherType::Ipv6,
            crate::nsh::ETHERTYPE_NSH => EtherType::Nsh,
            n => EtherType::Unknown(n),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> u16 {
        match v {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Vlan => 0x8100,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Nsh => crate::nsh::ETHERTYPE_NSH,
            EtherType::Unknown(n) => n,
        }
    }
}

/// The 14-byte Ethernet II header.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct EthernetHeader {
    pub dst: MacAddr,
    pub src: MacAddr,
    pub ethertype: U16,
}

crate::header_view!(EthernetHeader);

impl EthernetHeader {
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(self.ethertype.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rewrites_in_place() {
        let mut frame = [0u8; 60];
        frame[..6].copy_from_slice(&[0xff; 6]);
        frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        let (eth, rest) = EthernetHeader::parse(&frame).unwrap();
        assert_eq!(eth.dst, MacAddr::BROADCAST);
        assert_eq!(eth.ethertype(), EtherType::Ipv4);
        assert_eq!(rest.len(), 46);
        let (eth, _) = EthernetHeader::parse_mut(&mut frame).unwrap();
        eth.dst = "02:00:00:00:00:09".parse().unwrap();
        assert_eq!(&frame[..6], &[2, 0, 0, 0, 0, 9]);
    }

    #[test]
    fn short_frame_is_an_error() {
        assert_eq!(
            EthernetHeader::parse(&[0u8; 13]).unwrap_err(),
            crate::WireError::Truncated
        );
    }

    #[test]
    fn mac_parsing() {
        assert_eq!(
            "02:00:0a:0B:ff:01".parse::<MacAddr>().unwrap().0,
            [2, 0, 10, 11, 255, 1]
        );
        assert!("02:00:0a:0b:ff".parse::<MacAddr>().is_err());
        assert!("02:00:0a:0b:ff:01:02".parse::<MacAddr>().is_err());
        assert!("02:00:0a:0b:ff:zz".parse::<MacAddr>().is_err());
        assert_eq!(MacAddr([2, 0, 0, 0, 0, 0xab]).to_string(), "02:00:00:00:00:ab");
    }

    #[test]
    fn ethertype_round_trip() {
        for v in [0x0800u16, 0x0806, 0x8100, 0x86dd, 0x88cc] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
    }
}
