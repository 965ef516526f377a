//! The Network Service Header (RFC 8300) over Ethernet, in three NFs: the
//! [`classifier`] puts packets on a service path, the service function forwarder
//! ([`sff`]) sends them to the next service function by SPI and SI and takes the header
//! off at the path's end, and the [`proxy`] runs an NSH-unaware NF on what is inside.
//! What they share is here: finding the header in a frame, the checks every NSH
//! element makes on it (§2.2), and taking it off.

pub mod classifier;
pub mod proxy;
pub mod sff;

use serde::{Deserialize, Serialize};
use sfclab_core::{DropReason, Packet};
use sfclab_wire::nsh::{self, NextProtocol, NshError, NshHeader};

/// The drop reasons every NSH element has, first in each NF's list and in this order,
/// so that [`Found::locate`] names them with the same codes for all of them.
pub(crate) const CHECKS: [&str; 4] = ["not-nsh", "nsh-version", "md-type", "oam"];
const NOT_NSH: DropReason = DropReason::named(&CHECKS, "not-nsh");
const VERSION: DropReason = DropReason::named(&CHECKS, "nsh-version");
const MD_TYPE: DropReason = DropReason::named(&CHECKS, "md-type");
const OAM: DropReason = DropReason::named(&CHECKS, "oam");

/// What to do with OAM packets (the O bit): RFC 8300 §2.2 says elements that do not
/// support SFC OAM SHOULD discard them, and MAY forward them unmodified when
/// configured to (off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Oam {
    #[default]
    Drop,
    Forward,
}

/// EtherTypes of VLAN tags an NSH frame may carry before the header.
fn is_tag(ethertype: u16) -> bool {
    ethertype == 0x8100 || ethertype == sfclab_wire::vlan::ETHERTYPE_QINQ
}

/// Where a frame's NSH is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found {
    /// Offset of the header: the link header (with any VLAN tags) comes before it.
    pub at: usize,
    /// The header's length in bytes, context included.
    pub len: usize,
    pub oam: bool,
}

impl Found {
    /// Finds and checks the NSH of `frame` (after Ethernet and up to two VLAN tags);
    /// OAM packets are refused unless `oam` forwards them.
    #[inline]
    pub fn locate(frame: &[u8], oam: Oam) -> Result<Found, DropReason> {
        let at = link_len(frame).ok_or(DropReason::MALFORMED)?;
        if u16::from_be_bytes([frame[at - 2], frame[at - 1]]) != nsh::ETHERTYPE_NSH {
            return Err(NOT_NSH);
        }
        let (h, len) = nsh::check(&frame[at..]).map_err(|e| match e {
            NshError::Malformed => DropReason::MALFORMED,
            NshError::Version => VERSION,
            NshError::MdType => MD_TYPE,
        })?;
        if h.oam() && oam == Oam::Drop {
            return Err(OAM);
        }
        Ok(Found { at, len, oam: h.oam() })
    }

    pub fn header<'a>(&self, frame: &'a [u8]) -> &'a NshHeader {
        NshHeader::parse(&frame[self.at..]).expect("checked by locate").0
    }

    pub fn header_mut<'a>(&self, frame: &'a mut [u8]) -> &'a mut NshHeader {
        NshHeader::parse_mut(&mut frame[self.at..])
            .expect("checked by locate")
            .0
    }
}

/// The length of the frame's link header (MACs, VLAN tags, EtherType): where its
/// payload starts; `None` when the frame ends inside it.
#[inline]
pub(crate) fn link_len(frame: &[u8]) -> Option<usize> {
    let mut at = 14;
    for _ in 0..3 {
        let ethertype = u16::from_be_bytes(frame.get(at - 2..at)?.try_into().ok()?);
        if !is_tag(ethertype) {
            return Some(at);
        }
        at += 4;
    }
    // A third tag: not a frame any NSH element here takes apart.
    None
}

/// Takes the NSH off `p`: what is inside becomes the frame. An inner Ethernet frame
/// (next protocol 3) replaces the outer one; an inner IPv4 or IPv6 datagram keeps the
/// outer link header, its EtherType set to the datagram's. Other next protocols are
/// `unsupported` (§2.2: dropped by default).
#[inline]
pub(crate) fn decapsulate(p: &mut Packet, found: Found) -> Result<(), DropReason> {
    let (at, len) = (found.at, found.len);
    let ethertype: u16 = match found.header(p.data()).next() {
        NextProtocol::Ethernet => {
            if p.len() < at + len + 14 {
                return Err(DropReason::MALFORMED);
            }
            p.adjust_front(at + len).expect("length checked");
            return Ok(());
        }
        NextProtocol::Ipv4 => 0x0800,
        NextProtocol::Ipv6 => 0x86dd,
        _ => return Err(DropReason::UNSUPPORTED),
    };
    let d = p.data_mut();
    d[at - 2..at].copy_from_slice(&ethertype.to_be_bytes());
    d.copy_within(0..at, len);
    p.adjust_front(len).expect("the header is inside the frame");
    Ok(())
}

/// The next protocol for a frame's payload after a link header whose EtherType is
/// `ethertype`, when NSH can carry it without its link header.
pub(crate) fn next_for(ethertype: u16) -> Option<NextProtocol> {
    match ethertype {
        0x0800 => Some(NextProtocol::Ipv4),
        0x86dd => Some(NextProtocol::Ipv6),
        _ => None,
    }
}

/// Puts `header` (a whole NSH, its next protocol already right) on `p`. `outer`: the
/// packet is an Ethernet frame that goes inside whole, behind a new link header
/// (`outer`, ending in EtherType 0x894F). `None`: the payload after the frame's link
/// header goes inside, and the link header stays in front with EtherType 0x894F.
/// `false` when the headroom cannot take it.
#[inline]
pub(crate) fn encapsulate(p: &mut Packet, header: &[u8], outer: Option<&[u8]>) -> bool {
    match outer {
        Some(link) => {
            let Some(front) = p.prepend(link.len() + header.len()) else {
                return false;
            };
            front[..link.len()].copy_from_slice(link);
            front[link.len()..].copy_from_slice(header);
        }
        None => {
            let Some(at) = link_len(p.data()) else {
                return false;
            };
            let n = header.len();
            if p.prepend(n).is_none() {
                return false;
            }
            let d = p.data_mut();
            d.copy_within(n..n + at, 0);
            d[at - 2..at].copy_from_slice(&nsh::ETHERTYPE_NSH.to_be_bytes());
            d[at..at + n].copy_from_slice(header);
        }
    }
    true
}

/// An SPI as a chain file writes it: 24 bits.
pub(crate) fn check_spi(spi: u32, key: &str) -> Result<u32, crate::ConfigError> {
    if spi > 0xff_ffff {
        return Err(crate::ConfigError::new(
            key,
            format!("SPI {spi} does not fit NSH's 24 bits (0..=16777215)"),
        ));
    }
    Ok(spi)
}

#[cfg(test)]
pub(crate) mod test_frames {
    //! NSH frames for the NFs' tests.

    /// `frame` (an Ethernet frame) inside an MD type 1 NSH with `spi`, `si`, `ttl` and
    /// context word C1 = `c1`, behind a link header with EtherType 0x894F.
    pub fn md1(frame: &[u8], spi: u32, si: u8, ttl: u8, c1: u32) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&[2, 0, 0, 0, 0, 0xcc, 2, 0, 0, 0, 0, 0xdd, 0x89, 0x4f]);
        out.extend_from_slice(&sfclab_wire::nsh::NshHeader::first_word(ttl, 24).to_be_bytes());
        out.extend_from_slice(&[1, 3]);
        out.extend_from_slice(&(spi << 8 | u32::from(si)).to_be_bytes());
        out.extend_from_slice(&c1.to_be_bytes());
        out.extend_from_slice(&[0; 12]);
        out.extend_from_slice(frame);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::udp_frame;

    /// Every NSH NF starts its drop reasons with [`CHECKS`], so `locate`'s codes name
    /// the same reasons in each.
    #[test]
    fn every_nsh_nf_lists_the_shared_checks_first() {
        use sfclab_core::NetworkFunction;
        for nf in [classifier::TYPE, sff::TYPE, proxy::TYPE] {
            let built: Box<dyn NetworkFunction> = (nf.build)(&serde_json::json!({"nf": "forwarder"}))
                .or_else(|_| (nf.build)(&serde_json::json!({})))
                .unwrap();
            if nf.kind != "nsh-classifier" {
                assert_eq!(&built.drop_reasons()[..CHECKS.len()], &CHECKS[..], "{}", nf.kind);
            }
        }
    }

    #[test]
    fn locates_checks_and_takes_off_the_header() {
        let inner = udp_frame();
        let mut pool = sfclab_core::PacketPool::new(1);
        let mut p = pool.alloc().unwrap();
        let f = test_frames::md1(&inner, 42, 255, 63, 7);
        p.reset(f.len()).copy_from_slice(&f);
        let found = Found::locate(p.data(), Oam::Drop).unwrap();
        assert_eq!((found.at, found.len), (14, 24));
        assert_eq!(found.header(p.data()).spi(), 42);
        decapsulate(&mut p, found).unwrap();
        assert_eq!(p.data(), &inner[..]);
        assert_eq!(Found::locate(p.data(), Oam::Drop).err(), Some(NOT_NSH));
        // The O bit: dropped unless forwarding is configured.
        let mut o = f.clone();
        o[14] |= 0x20;
        assert_eq!(Found::locate(&o, Oam::Drop).err(), Some(OAM));
        assert!(Found::locate(&o, Oam::Forward).unwrap().oam);
        assert_eq!(Found::locate(&f[..30], Oam::Drop).err(), Some(DropReason::MALFORMED));
        assert_eq!(Found::locate(&f[..13], Oam::Drop).err(), Some(DropReason::MALFORMED));
        pool.free(p);
    }

    #[test]
    fn an_ip_payload_goes_in_and_out_behind_the_same_link_header() {
        let frame = udp_frame();
        let mut pool = sfclab_core::PacketPool::new(1);
        let mut p = pool.alloc().unwrap();
        p.reset(frame.len()).copy_from_slice(&frame);
        let mut header = [0u8; 8];
        header[..2].copy_from_slice(&NshHeader::first_word(63, 8).to_be_bytes());
        header[2] = 2;
        header[3] = 1;
        header[4..].copy_from_slice(&(5u32 << 8 | 9).to_be_bytes());
        assert!(encapsulate(&mut p, &header, None));
        assert_eq!(&p.data()[..12], &frame[..12]);
        assert_eq!(&p.data()[12..22], &[0x89, 0x4f, 0x0f, 0xc2, 2, 1, 0, 0, 5, 9]);
        assert_eq!(&p.data()[22..], &frame[14..]);
        let found = Found::locate(p.data(), Oam::Drop).unwrap();
        decapsulate(&mut p, found).unwrap();
        assert_eq!(p.data(), &frame[..]);
        pool.free(p);
    }
}
