//! The in-memory sink, a [`TxPort`]: counts packets and bytes, records the latency of
//! probe packets in an HDR histogram, optionally verifies every frame, and frees the
//! buffers. Only probes read the clock, so measuring latency costs the chain nothing.

use serde::Serialize;
use sfclab_core::{Batch, LatencyRecord, NfCounter, PortInfo, PortStats, Recycle, TxPort, tsc};
use sfclab_wire::checksum::{pseudo_header_v4, pseudo_header_v6};
use sfclab_wire::{EtherType, EthernetHeader, IpProtocol, Ipv4Header, Ipv6Header, UdpHeader};

/// Sink counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SinkStats {
    pub port: PortStats,
    /// Frames that failed verification (bad checksum or length), when verifying.
    pub verify_failed: u64,
    pub probes: u64,
    /// Packets the source generated inside the measured window (`FLAG_WINDOW`).
    pub window_packets: u64,
}

pub struct Sink {
    stats: SinkStats,
    verify: bool,
    /// Probe latency in TSC ticks.
    latency: LatencyRecord,
}

impl Sink {
    pub fn new(verify: bool) -> Sink {
        Sink {
            stats: SinkStats::default(),
            verify,
            latency: LatencyRecord::default(),
        }
    }

    pub fn sink_stats(&self) -> SinkStats {
        self.stats
    }
}

impl TxPort for Sink {
    #[inline]
    fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
        let mut bytes = 0u64;
        let mut window = 0u64;
        let mut probe = false;
        for p in batch.iter() {
            bytes += p.len() as u64;
            window += u64::from(p.in_window());
            probe |= p.is_probe();
        }
        self.stats.window_packets += window;
        if probe {
            let now = tsc::now();
            for p in batch.iter().filter(|p| p.is_probe()) {
                self.latency.record(now.saturating_sub(p.meta.timestamp));
                self.stats.probes += 1;
            }
        }
        if self.verify {
            self.stats.verify_failed += batch.iter().filter(|p| !frame_is_valid(p.data())).count() as u64;
        }
        self.stats.port.packets += batch.len() as u64;
        self.stats.port.bytes += bytes;
        recycle.recycle_batch(batch);
    }

    fn stats(&self) -> PortStats {
        self.stats.port
    }

    fn start_window(&mut self) {
        self.latency.reset();
    }

    fn window_packets(&self) -> u64 {
        self.stats.window_packets
    }

    fn latency(&self) -> Option<&LatencyRecord> {
        Some(&self.latency)
    }

    fn verify_failed(&self) -> Option<u64> {
        self.verify.then_some(self.stats.verify_failed)
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![NfCounter::total("probes", self.stats.probes)]
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "sink".into(),
            summary: if self.verify {
                "in memory, verifying every frame".into()
            } else {
                "in memory".into()
            },
            settings: [("verify".to_string(), self.verify.to_string())].into(),
        }
    }
}

/// True for an Ethernet frame whose IPv4/IPv6 lengths match the frame and whose IPv4
/// header and UDP checksums verify. Other EtherTypes and L4 protocols pass on lengths.
pub fn frame_is_valid(frame: &[u8]) -> bool {
    let Ok((eth, l3)) = EthernetHeader::parse(frame) else {
        return false;
    };
    match eth.ethertype() {
        EtherType::Ipv4 => {
            let Ok((ip, hlen, l4)) = Ipv4Header::check(l3) else {
                return false;
            };
            // Ethernet pads short frames to 60 bytes: a longer IP packet than the frame is wrong.
            if !Ipv4Header::checksum_ok(&l3[..hlen]) || (l3.len() > l4.len() + hlen && frame.len() > 60) {
                return false;
            }
            match ip.protocol() {
                IpProtocol::Udp => {
                    UdpHeader::checksum_ok(pseudo_header_v4(ip.src, ip.dst, 17, l4.len() as u16), l4, true)
                }
                _ => true,
            }
        }
        EtherType::Ipv6 => {
            let Ok((ip, l4)) = Ipv6Header::check(l3) else {
                return false;
            };
            match ip.next_header() {
                IpProtocol::Udp => {
                    UdpHeader::checksum_ok(pseudo_header_v6(ip.src, ip.dst, 17, l4.len() as u32), l4, false)
                }
                _ => true,
            }
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameSizes, Generator, GeneratorConfig, IpVersion};
    use sfclab_core::{PacketPool, RxPort};

    #[test]
    fn counts_verifies_and_records_probes() {
        let mut pool = PacketPool::new(64);
        Generator::prime_pool(&mut pool);
        for ip in [IpVersion::V4, IpVersion::V6] {
            let sizes = if ip == IpVersion::V4 {
                FrameSizes::rfc2544_mix()
            } else {
                "78:1,128:2,1518:1".parse().unwrap()
            };
            let cfg = GeneratorConfig {
                ip,
                sizes,
                flows: 7,
                probe_pps: 1e9,
                ..Default::default()
            };
            let mut g = Generator::new(cfg, 32).unwrap();
            let mut sink = Sink::new(true);
            let mut batch = Batch::new(32);
            for _ in 0..10 {
                g.rx(tsc::now(), &mut pool, &mut batch);
                sink.tx(0, &mut batch, &mut pool);
            }
            let st = sink.sink_stats();
            assert_eq!(st.port.packets, 320);
            assert_eq!(st.port.bytes, g.stats().bytes);
            assert_eq!(st.verify_failed, 0, "{ip}");
            assert_eq!(st.probes, 10);
            assert_eq!(sink.latency().unwrap().summary().unwrap().samples, 10);
        }
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn corrupted_frames_fail_verification() {
        let mut pool = PacketPool::new(64);
        Generator::prime_pool(&mut pool);
        let mut g = Generator::new(GeneratorConfig::default(), 32).unwrap();
        let mut sink = Sink::new(true);
        let mut batch = Batch::new(4);
        g.rx(0, &mut pool, &mut batch);
        batch.get_mut(0).data_mut()[50] ^= 0xff; // UDP payload
        batch.get_mut(1).data_mut()[22] = 1; // IPv4 TTL without checksum update
        batch.get_mut(2).truncate(20); // cut inside the IPv4 header
        sink.tx(0, &mut batch, &mut pool);
        assert_eq!(sink.sink_stats().verify_failed, 3);
        assert!(sink.latency().unwrap().summary().is_none());
    }
}
