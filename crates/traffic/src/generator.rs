//! The in-memory traffic generator, an [`RxPort`].
//!
//! Each call takes buffers from the pool and stamps the next flow's 64-byte template
//! into them (as MoonGen and TRex stamp cached packets), patches the length fields
//! when the size changes, and writes the metadata: length, flow hash, sequence number,
//! TSC timestamp. Flows are sent round robin; sizes follow the mix's schedule. The
//! payload is the pool's primed pattern, so the frames' checksums are right.
//!
//! Pacing and probes use the `now` the runtime passes in: one clock read per batch.
//! At max rate the runtime reads the clock only every few batches; a latency probe
//! reads it itself when it is stamped, so its timestamp is exact.

use serde::Serialize;
use sfclab_core::packet::{FLAG_FLOW_HASH, FLAG_PROBE, FLAG_WINDOW};
use sfclab_core::{Batch, NfCounter, PacketMeta, PacketPool, PortInfo, PortStats, RxPort, Shortfall, tsc};
use sfclab_wire::flow;

use sfclab_wire::checksum;

use crate::flows::{
    Destinations, DscpMix, FlowSet, IpVersion, L4, MAX_FLOWS, TEMPLATE_FLAGS, apply_patch, pattern_byte,
};
use crate::rate::{Pacer, Rate};
use crate::sizes::FrameSizes;
use crate::{FCS_LEN, L1_OVERHEAD};

/// What to generate.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GeneratorConfig {
    pub sizes: FrameSizes,
    pub flows: u32,
    pub ip: IpVersion,
    pub rate: Rate,
    /// Stop after this many packets.
    pub limit: Option<u64>,
    /// Latency probes per second (0: none). One packet of a batch carries the flag.
    pub probe_pps: f64,
    /// Input port number written into the metadata.
    pub port: u16,
    /// Where flows go: one address, or each flow its own.
    pub destinations: Destinations,
    /// UDP datagrams, or TCP sessions (written only when TCP: documents of UDP runs
    /// are as before).
    #[serde(rename = "proto", default, skip_serializing_if = "L4::is_udp")]
    pub l4: L4,
    /// Packets per session: after this many, a flow starts its next session on a new
    /// source port (a new 5-tuple: flow churn). TCP sessions open with a SYN and close
    /// with a FIN; `None`: one endless session per flow (TCP: 10 packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_packets: Option<u32>,
    /// The DSCP of each flow in turn (written only when set).
    #[serde(default, skip_serializing_if = "DscpMix::is_empty")]
    pub dscp: DscpMix,
    /// The way back of a bidirectional test: every flow's addresses, ports and MACs
    /// swapped (from the destinations to the 198.18.0.0/16 sources), so that a chain's
    /// two directions carry each other's flows (written only when set).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig {
            sizes: FrameSizes::Fixed { size: 64 },
            flows: 1,
            ip: IpVersion::V4,
            rate: Rate::Max,
            limit: None,
            probe_pps: 0.0,
            port: 0,
            destinations: Destinations::One,
            l4: L4::Udp,
            session_packets: None,
            dscp: DscpMix::default(),
            reverse: false,
        }
    }
}

/// TCP sessions are this many packets unless `session_packets` says otherwise.
pub const TCP_SESSION_PACKETS: u32 = 10;

impl GeneratorConfig {
    /// Checks the combination; the error names the key.
    /// The packet rate asked for (`None`: as fast as the generator goes).
    pub fn requested_pps(&self) -> Option<f64> {
        self.rate.pps(self.sizes.mean())
    }

    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(("flows", format!("{} flows: must be 1..={MAX_FLOWS}", self.flows)));
        }
        if self.l4 == L4::Tcp && self.ip != IpVersion::V4 {
            return Err(("proto", "TCP sessions are generated over IPv4 only (for now)".into()));
        }
        self.destinations.prefixes().map_err(|e| ("destinations", e))?;
        if matches!(self.destinations, Destinations::Prefixes(_) | Destinations::Router) && self.ip != IpVersion::V4 {
            return Err(("destinations", "destination prefixes are IPv4 (for now)".into()));
        }
        if self.reverse && (self.l4 == L4::Tcp || self.session_packets.is_some()) {
            return Err((
                "reverse",
                "the way back is UDP flows without session churn (a session's new source port would be its destination's)".into(),
            ));
        }
        let min_session = if self.l4 == L4::Tcp { 2 } else { 1 };
        if self.session_packets.is_some_and(|n| n < min_session) {
            return Err((
                "session_packets",
                format!("a {} session needs at least {min_session} packet(s)", self.l4),
            ));
        }
        let min = self.ip.min_frame(self.l4);
        if let Some(s) = self.sizes.sizes().into_iter().find(|&s| s < min) {
            return Err((
                "size",
                format!(
                    "{s}-byte frames cannot hold Ethernet/{}/{} headers (minimum {min})",
                    self.ip,
                    self.l4.to_string().to_uppercase()
                ),
            ));
        }
        if !(self.probe_pps.is_finite() && self.probe_pps >= 0.0) {
            return Err(("latency_probe_pps", "must be 0 or positive".into()));
        }
        Ok(())
    }
}

/// Generator counters beyond the port's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GeneratorStats {
    pub port: PortStats,
    /// Bytes on the wire: frames with FCS, preamble and gap.
    pub l1_bytes: u64,
    pub probes: u64,
    /// Batches cut short because the pool was empty (a chain holding buffers).
    pub pool_empty: u64,
    /// Packets the pacer skipped because the loop fell behind the offered rate.
    pub behind: u64,
}

impl GeneratorStats {
    pub fn since(&self, e: &GeneratorStats) -> GeneratorStats {
        GeneratorStats {
            port: self.port.since(&e.port),
            l1_bytes: self.l1_bytes - e.l1_bytes,
            probes: self.probes - e.probes,
            pool_empty: self.pool_empty - e.pool_empty,
            behind: self.behind - e.behind,
        }
    }
}

pub struct Generator {
    cfg: GeneratorConfig,
    flows: FlowSet,
    /// One period of size classes.
    schedule: Box<[u8]>,
    /// Per class: buffer length and L1 bits.
    lens: Vec<u16>,
    l1_bits: Vec<f64>,
    mixed: bool,
    next_flow: usize,
    next_slot: usize,
    seq: u32,
    pacer: Pacer,
    pace_bits: bool,
    probe_every: u64,
    next_probe: u64,
    /// Per size class, the metadata every packet starts with (`FLAG_WINDOW` once the
    /// window started).
    fresh: Vec<PacketMeta>,
    stats: GeneratorStats,
    /// Per-flow session state, when flows have sessions (TCP, or churn).
    sessions: Option<Sessions>,
    /// Payload windows past the stamped head that a wired tester's signatures overwrite
    /// (`restore_tails`): frame offset and the pattern bytes that belong there.
    tails: Vec<(usize, [u8; TAIL])>,
}

/// Widest signature window `restore_tails` keeps.
const TAIL: usize = 16;
/// Bytes of each frame `stamp` writes from the flow's head: a window inside them is
/// restored by the stamp itself.
const STAMPED: usize = 64;

/// Where each flow is in its session, and what the packet it sends next looks like.
struct Sessions {
    tcp: bool,
    /// Packets per session.
    length: u32,
    /// Per flow: packets sent in the current session, the session number, the next
    /// sequence number.
    pos: Box<[u32]>,
    session: Box<[u32]>,
    next_seq: Box<[u32]>,
    /// Per flow: the flow hash of the current session's 5-tuple (its port is new).
    hash: Box<[u32]>,
    /// Where the IP addresses are: source at `addr_offset`, destination right after.
    addr_offset: usize,
    addr_len: usize,
    /// Header bytes before the payload.
    header_len: usize,
    l4_offset: usize,
    csum_offset: usize,
    /// New sessions started (each a new 5-tuple).
    started: u64,
}

/// Source ports sessions cycle through: 16 apart per session, so flows that share a
/// source address (flow index mod 65,536, up to 16 of them) never share a port.
const PORT_STEPS: u32 = (65_536 - 1024) / 16;

impl Sessions {
    fn new(cfg: &GeneratorConfig, flows: &FlowSet) -> Option<Sessions> {
        let tcp = cfg.l4 == L4::Tcp;
        let length = cfg.session_packets.or(tcp.then_some(TCP_SESSION_PACKETS))?;
        let n = flows.flows();
        Some(Sessions {
            tcp,
            length,
            pos: vec![0; n].into_boxed_slice(),
            session: vec![0; n].into_boxed_slice(),
            next_seq: vec![0; n].into_boxed_slice(),
            hash: flows.hashes.clone(),
            addr_offset: match cfg.ip {
                IpVersion::V4 => 26,
                IpVersion::V6 => 22,
            },
            addr_len: match cfg.ip {
                IpVersion::V4 => 4,
                IpVersion::V6 => 16,
            },
            header_len: cfg.ip.header_len(cfg.l4),
            l4_offset: cfg.ip.l4_offset(),
            csum_offset: cfg.ip.patch_offsets(cfg.l4)[3],
            started: 0,
        })
    }

    /// Rewrites the stamped frame of `flow` (its template's port, flags and sequence
    /// number) as its session's next packet: source port, and for TCP flags and sequence
    /// number; the L4 checksum is updated for what changed. Returns the flow hash of the
    /// session's 5-tuple.
    #[inline]
    fn next(&mut self, flow: usize, frame: &mut [u8]) -> u32 {
        let pos = self.pos[flow];
        let session = self.session[flow];
        let l4 = self.l4_offset;
        let base = u16::from_be_bytes([frame[l4], frame[l4 + 1]]);
        let port = 1024 + ((u32::from(base) - 1024 + 16 * (session % PORT_STEPS)) % (65_536 - 1024)) as u16;
        if pos == 0 {
            self.started += 1;
            let (a, n) = (self.addr_offset, self.addr_len);
            let dport = u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]);
            let protocol = if self.tcp { 6 } else { 17 };
            self.hash[flow] = flow::hash(&frame[a..a + n], &frame[a + n..a + 2 * n], port, dport, protocol);
        }
        let mut csum = u16::from_be_bytes([frame[self.csum_offset], frame[self.csum_offset + 1]]);
        csum = checksum::update16(csum, base, port);
        frame[l4..l4 + 2].copy_from_slice(&port.to_be_bytes());
        if self.tcp {
            let payload = (frame.len() - self.header_len) as u32;
            let (seq, flags) = match pos {
                0 => {
                    // A fresh initial sequence number per session.
                    let isn = (flow as u32).wrapping_mul(0x9e37_79b9) ^ session.wrapping_mul(0x85eb_ca6b);
                    self.next_seq[flow] = isn.wrapping_add(1 + payload);
                    (isn, 0x02)
                }
                p if p + 1 == self.length => {
                    let seq = self.next_seq[flow];
                    self.next_seq[flow] = seq.wrapping_add(payload + 1);
                    (seq, 0x11)
                }
                _ => {
                    let seq = self.next_seq[flow];
                    self.next_seq[flow] = seq.wrapping_add(payload);
                    (seq, TEMPLATE_FLAGS)
                }
            };
            csum = checksum::update32(csum, 0, seq);
            frame[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            // Data offset and flags share a 16-bit word.
            let off = frame[l4 + 12];
            csum = checksum::update16(
                csum,
                u16::from_be_bytes([off, TEMPLATE_FLAGS]),
                u16::from_be_bytes([off, flags]),
            );
            frame[l4 + 13] = flags;
        }
        if !self.tcp && csum == 0 {
            // UDP sends a computed zero as all ones (zero means "no checksum").
            csum = 0xffff;
        }
        frame[self.csum_offset..self.csum_offset + 2].copy_from_slice(&csum.to_be_bytes());
        if pos + 1 == self.length {
            self.pos[flow] = 0;
            self.session[flow] = session.wrapping_add(1);
        } else {
            self.pos[flow] = pos + 1;
        }
        self.hash[flow]
    }
}

impl Generator {
    /// Builds the templates. `batch` bounds how far the pacer may fall behind.
    pub fn new(cfg: GeneratorConfig, batch: usize) -> Result<Generator, (&'static str, String)> {
        cfg.validate()?;
        let sizes = cfg.sizes.sizes();
        let lens: Vec<u16> = sizes.iter().map(|&s| s - FCS_LEN as u16).collect();
        let l1_bits = sizes
            .iter()
            .map(|&s| ((u64::from(s) + L1_OVERHEAD) * 8) as f64)
            .collect();
        let flows = FlowSet::directed(
            cfg.ip,
            cfg.l4,
            cfg.flows,
            &lens,
            &cfg.destinations,
            &cfg.dscp,
            cfg.reverse,
        );
        let sessions = Sessions::new(&cfg, &flows);
        let hz = tsc::hz();
        let (rate, pace_bits) = match cfg.rate {
            Rate::Max => (None, false),
            Rate::Pps(p) => (Some(p), false),
            Rate::L1Bps(b) => (Some(b), true),
        };
        // Skipped units are the report's `pacing_behind`.
        let batches = 4.0 * batch as f64 * if pace_bits { (1518.0 + 20.0) * 8.0 } else { 1.0 };
        let probe_every = if cfg.probe_pps > 0.0 {
            (hz / cfg.probe_pps).max(1.0) as u64
        } else {
            0
        };
        let schedule = cfg.sizes.schedule().into_boxed_slice();
        // The way back starts half a period on: a chain's two directions meet in its
        // VNFs (one licence meters both), and in step each frame would meet its twin of
        // the same size just before it, which a meter that takes frames while it has
        // tokens then refuses more often when large (over-offered IMIX through a
        // licence passed frames 16 % smaller than the mix).
        let first_slot = if cfg.reverse { schedule.len() / 2 } else { 0 };
        let mut g = Generator {
            schedule,
            mixed: lens.len() > 1,
            lens,
            l1_bits,
            flows,
            next_flow: 0,
            next_slot: first_slot,
            seq: 0,
            pacer: Pacer::catching_up(rate, hz, batches),
            pace_bits,
            probe_every,
            next_probe: 0,
            fresh: Vec::new(),
            stats: GeneratorStats::default(),
            sessions,
            tails: Vec::new(),
            cfg,
        };
        g.set_flags(0);
        Ok(g)
    }

    pub fn config(&self) -> &GeneratorConfig {
        &self.cfg
    }

    fn set_flags(&mut self, flags: u16) {
        let port = self.cfg.port;
        self.fresh = self
            .lens
            .iter()
            .map(|&len| PacketMeta::fresh(len, port, flags | FLAG_FLOW_HASH))
            .collect();
    }

    /// Writes the payload pattern into every buffer of `pool` once, so that frames
    /// stamped later carry valid checksums. Call before the first `rx`.
    pub fn prime_pool(pool: &mut PacketPool) {
        pool.prime(|room| {
            let base = sfclab_core::packet::HEADROOM;
            for (k, b) in room[base..].iter_mut().enumerate() {
                *b = pattern_byte(k);
            }
        });
    }

    pub fn generator_stats(&self) -> GeneratorStats {
        let mut s = self.stats;
        s.behind = if self.pace_bits {
            (self.pacer.skipped_units / (self.cfg.sizes.mean() + 20.0) / 8.0) as u64
        } else {
            self.pacer.skipped_units as u64
        };
        s
    }

    /// How many packets this call may emit.
    #[inline]
    fn budget(&mut self, now: u64, room: usize) -> usize {
        let mut n = room as u64;
        if let Some(limit) = self.cfg.limit {
            n = n.min(limit - self.stats.port.packets);
        }
        if self.pacer.is_limited() {
            let due = self.pacer.due(now);
            if self.pace_bits {
                // Walk the schedule: sizes differ, so the count that fits depends on them.
                let (mut bits, mut k, mut slot) = (0.0, 0u64, self.next_slot);
                while k < n {
                    let b = self.l1_bits[usize::from(self.schedule[slot])];
                    if bits + b > due {
                        break;
                    }
                    bits += b;
                    k += 1;
                    slot = if slot + 1 == self.schedule.len() { 0 } else { slot + 1 };
                }
                self.pacer.spend(bits);
                n = k;
            } else {
                n = n.min(due as u64);
                self.pacer.spend(n as f64);
            }
        }
        n as usize
    }
}

impl RxPort for Generator {
    #[inline]
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let want = self.budget(now, batch.room());
        if want == 0 {
            return 0;
        }
        let first = batch.len();
        let got = pool.alloc_into(batch, want);
        if got < want {
            self.stats.pool_empty += 1;
        }
        // Loop state in locals, written back once: the loop then stays in registers.
        let (heads, hashes) = (&self.flows.heads, &self.flows.hashes);
        let nflows = heads.len();
        let mut flow = self.next_flow % nflows;
        let mut seq = self.seq;
        let fresh = &self.fresh;
        let mut bytes = 0u64;
        if self.mixed || self.sessions.is_some() {
            // Per packet: its size class, the template's lengths and checksums for it, and
            // with sessions the rewrite of ports, TCP flags and sequence numbers.
            let (patches, offsets, classes) = (
                &self.flows.patches,
                self.flows.ip.patch_offsets(self.flows.l4),
                self.lens.len(),
            );
            let mut sessions = self.sessions.as_mut();
            let mut slot = self.next_slot;
            for p in batch.iter_mut_from(first) {
                let class = usize::from(self.schedule[slot]);
                slot = if slot + 1 == self.schedule.len() { 0 } else { slot + 1 };
                p.stamp(&fresh[class], hashes[flow], seq, &heads[flow]);
                let frame = p.data_mut();
                apply_patch(frame, offsets, &patches[flow * classes + class]);
                if let Some(s) = sessions.as_mut() {
                    p.meta.flow_hash = s.next(flow, frame);
                }
                bytes += u64::from(self.lens[class]);
                flow = if flow + 1 == nflows { 0 } else { flow + 1 };
                seq = seq.wrapping_add(1);
            }
            self.next_slot = slot;
        } else {
            // One size: the templates already carry its lengths and checksums.
            (flow, seq) = batch.stamp_from(first, &fresh[0], heads, hashes, flow, seq);
            bytes = u64::from(self.lens[0]) * got as u64;
        }
        if !self.tails.is_empty() {
            for p in batch.iter_mut_from(first) {
                let frame = p.data_mut();
                for (at, bytes) in &self.tails {
                    if let Some(window) = frame.get_mut(*at..*at + TAIL) {
                        window.copy_from_slice(bytes);
                    }
                }
            }
        }
        self.next_flow = flow;
        self.seq = seq;
        if self.probe_every != 0 && got > 0 && now >= self.next_probe {
            let probe = batch.get_mut(first);
            probe.meta.flags |= FLAG_PROBE;
            // The probe's own clock read: exact where `now` may be a few batches old.
            probe.meta.timestamp = tsc::now();
            self.stats.probes += 1;
            self.next_probe = now.max(self.next_probe) + self.probe_every;
        }
        self.stats.port.packets += got as u64;
        self.stats.port.bytes += bytes;
        // Every frame adds its FCS plus preamble and gap on the wire.
        self.stats.l1_bytes += bytes + got as u64 * (FCS_LEN as u64 + L1_OVERHEAD);
        got
    }

    /// Only pacing needs `now` fresh on every batch: probes are scheduled from a clock a
    /// few batches old (about a microsecond) and timestamp themselves.
    fn needs_fresh_clock(&self) -> bool {
        self.pacer.is_limited()
    }

    fn exhausted(&self) -> bool {
        self.cfg.limit.is_some_and(|l| self.stats.port.packets >= l)
    }

    fn stats(&self) -> PortStats {
        self.stats.port
    }

    fn prime(&self, pool: &mut PacketPool) {
        Generator::prime_pool(pool);
    }

    /// A signature lands at the end of each frame's datagram (no Ethernet padding past
    /// 60 bytes): for every size, those bytes past the stamped head get the pattern
    /// back in every frame long enough to hold them, so a buffer that carried a
    /// signature out (or back in) checksums right when stamped again.
    fn restore_tails(&mut self, width: usize) {
        assert!(width <= TAIL, "signatures wider than {TAIL} bytes");
        let mut places: Vec<usize> = self
            .lens
            .iter()
            .map(|&len| usize::from(len).saturating_sub(TAIL))
            .filter(|&at| at >= STAMPED)
            .collect();
        places.sort_unstable();
        places.dedup();
        self.tails = places
            .into_iter()
            .map(|at| (at, std::array::from_fn(|k| crate::flows::pattern_byte(at + k))))
            .collect();
    }

    fn start_window(&mut self, count: Option<u64>) {
        self.cfg.limit = count.map(|m| self.stats.port.packets + m);
        self.set_flags(FLAG_WINDOW);
        // The window offers its rate from its own start: a stall before it is the warm-up's.
        self.pacer.restart();
    }

    fn requested_pps(&self) -> Option<f64> {
        self.cfg.requested_pps()
    }

    fn shortfall(&self) -> Shortfall {
        let s = self.generator_stats();
        Shortfall {
            pool_empty: s.pool_empty,
            behind: s.behind,
            not_offered: 0,
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = vec![NfCounter::total("probes", self.stats.probes)];
        if let Some(s) = &self.sessions {
            c.push(NfCounter::total("sessions_started", s.started));
        }
        c
    }

    fn info(&self) -> PortInfo {
        let c = &self.cfg;
        let settings = [
            ("size", c.sizes.to_string()),
            ("flows", c.flows.to_string()),
            ("ip", c.ip.to_string()),
            ("rate", c.rate.to_string()),
            ("latency_probe_pps", c.probe_pps.to_string()),
            ("destinations", c.destinations.to_string()),
            ("proto", c.l4.to_string()),
            (
                "session_packets",
                c.session_packets
                    .or((c.l4 == L4::Tcp).then_some(TCP_SESSION_PACKETS))
                    .map_or("endless".into(), |n| n.to_string()),
            ),
        ];
        PortInfo {
            kind: "generator".into(),
            summary: format!(
                "{} B frames, {} flow(s), {}, {}, rate {}",
                c.sizes,
                c.flows,
                c.ip,
                match (c.l4, c.session_packets) {
                    (L4::Udp, None) => "udp".to_string(),
                    (L4::Udp, Some(n)) => format!("udp, new port every {n} packets"),
                    (L4::Tcp, n) => format!("tcp sessions of {} packets", n.unwrap_or(TCP_SESSION_PACKETS)),
                },
                c.rate
            ),
            settings: settings.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(g: &mut Generator, pool: &mut PacketPool, rounds: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut batch = Batch::new(32);
        for _ in 0..rounds {
            g.rx(tsc::now(), pool, &mut batch);
            out.extend(batch.iter().map(|p| p.data().to_vec()));
            pool.free_batch(&mut batch);
        }
        out
    }

    /// A frame's IPv4 header and its TCP or UDP checksum verify; returns (source port,
    /// TCP flags and sequence number, payload length).
    fn checked(f: &[u8]) -> (u16, Option<(u8, u32)>, usize) {
        let s = etherparse::SlicedPacket::from_ethernet(f).unwrap();
        let etherparse::NetSlice::Ipv4(ip) = s.net.unwrap() else {
            panic!("not IPv4")
        };
        let h = ip.header();
        assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
        match s.transport.unwrap() {
            etherparse::TransportSlice::Tcp(t) => {
                let expect = t
                    .to_header()
                    .calc_checksum_ipv4_raw(h.source(), h.destination(), t.payload())
                    .unwrap();
                assert_eq!(t.checksum(), expect, "TCP checksum");
                let flags = f[34 + 13];
                (t.source_port(), Some((flags, t.sequence_number())), t.payload().len())
            }
            etherparse::TransportSlice::Udp(u) => {
                let expect = u
                    .to_header()
                    .calc_checksum_ipv4_raw(h.source(), h.destination(), u.payload())
                    .unwrap();
                assert_eq!(u.checksum(), expect, "UDP checksum");
                (u.source_port(), None, u.payload().len())
            }
            _ => panic!("not TCP or UDP"),
        }
    }

    /// The flow hash the generator stamps is the one an NF computes from the headers it
    /// receives, with and without sessions (whose churn changes the source port).
    #[test]
    fn stamped_flow_hashes_match_the_headers() {
        for (ip, l4, session_packets) in [
            (IpVersion::V4, L4::Udp, None),
            (IpVersion::V6, L4::Udp, None),
            (IpVersion::V4, L4::Udp, Some(2)),
            (IpVersion::V4, L4::Tcp, Some(3)),
        ] {
            let mut pool = PacketPool::new(64);
            Generator::prime_pool(&mut pool);
            let cfg = GeneratorConfig {
                sizes: FrameSizes::Fixed { size: 128 },
                flows: 5,
                ip,
                l4,
                session_packets,
                ..Default::default()
            };
            let mut g = Generator::new(cfg, 32).unwrap();
            let mut batch = Batch::new(32);
            let mut hashes = std::collections::HashSet::new();
            for _ in 0..4 {
                g.rx(tsc::now(), &mut pool, &mut batch);
                for p in batch.iter_mut() {
                    let stamped = p.meta.flow_hash;
                    assert_ne!(p.meta.flags & FLAG_FLOW_HASH, 0);
                    p.meta.flags &= !FLAG_FLOW_HASH;
                    assert_eq!(p.flow_hash(), stamped, "{ip} {l4} {session_packets:?}");
                    hashes.insert(stamped);
                }
                pool.free_batch(&mut batch);
            }
            let want = if session_packets.is_some() { 6 } else { 5 };
            assert!(
                hashes.len() >= want,
                "sessions on new ports hash apart: {}",
                hashes.len()
            );
        }
    }

    /// TCP sessions: per flow SYN, data, FIN, then the next session on a new source
    /// port; sequence numbers advance by the payload (and one for SYN and FIN); every
    /// checksum verifies, at every size of a mix.
    #[test]
    fn tcp_sessions_open_carry_data_close_and_churn() {
        let mut pool = PacketPool::new(64);
        Generator::prime_pool(&mut pool);
        let flows = 3;
        let cfg = GeneratorConfig {
            sizes: FrameSizes::imix(),
            flows,
            l4: L4::Tcp,
            session_packets: Some(4),
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        let frames = collect(&mut g, &mut pool, 3);
        for flow in 0..flows as usize {
            let packets: Vec<_> = frames
                .iter()
                .skip(flow)
                .step_by(flows as usize)
                .map(|f| checked(f))
                .collect();
            let mut expected_seq = None;
            for (k, (port, tcp, payload)) in packets.iter().enumerate() {
                let (flags, seq) = tcp.unwrap();
                let want = match k % 4 {
                    0 => 0x02,
                    3 => 0x11,
                    _ => 0x18,
                };
                assert_eq!(flags, want, "flow {flow} packet {k}");
                if k % 4 != 0 {
                    assert_eq!(Some(seq), expected_seq, "flow {flow} packet {k}");
                }
                let used = *payload as u32 + u32::from(flags & 0x03 != 0);
                expected_seq = Some(seq.wrapping_add(used));
                // Sessions keep their port; the next one moves 16 ports on.
                assert_eq!(*port, packets[k - k % 4].0);
                if k >= 4 {
                    assert_eq!(*port, packets[k - 4].0 + 16, "flow {flow} packet {k}");
                }
            }
        }
        let started = g
            .counters()
            .iter()
            .find(|c| c.name == "sessions_started")
            .unwrap()
            .value;
        assert_eq!(started, 3 * 32 / 4);
    }

    /// UDP with `session_packets`: the source port moves on every N packets (flow
    /// churn), checksums stay right.
    #[test]
    fn udp_sessions_churn_ports_with_valid_checksums() {
        let mut pool = PacketPool::new(64);
        Generator::prime_pool(&mut pool);
        let cfg = GeneratorConfig {
            flows: 2,
            session_packets: Some(3),
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        let frames = collect(&mut g, &mut pool, 2);
        let ports: Vec<u16> = frames.iter().step_by(2).map(|f| checked(f).0).collect();
        assert_eq!(&ports[..7], &[1024, 1024, 1024, 1040, 1040, 1040, 1056]);
    }

    #[test]
    fn session_settings_are_checked() {
        let bad = |cfg: GeneratorConfig| Generator::new(cfg, 32).err().unwrap().0;
        let tcp = GeneratorConfig {
            l4: L4::Tcp,
            ..Default::default()
        };
        assert_eq!(
            bad(GeneratorConfig {
                session_packets: Some(1),
                ..tcp.clone()
            }),
            "session_packets"
        );
        assert_eq!(
            bad(GeneratorConfig {
                ip: IpVersion::V6,
                ..tcp
            }),
            "proto"
        );
    }

    #[test]
    fn imix_stream_has_exact_ratios_and_valid_frames() {
        let mut pool = PacketPool::new(64);
        Generator::prime_pool(&mut pool);
        let cfg = GeneratorConfig {
            sizes: FrameSizes::imix(),
            flows: 5,
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        // 32,736 packets: 8 periods of the schedule, each 341 of IMIX's 12.
        let frames = collect(&mut g, &mut pool, 1023);
        assert_eq!(frames.len(), 32_736);
        for (size, weight) in crate::sizes::SIMPLE_IMIX {
            let n = frames.iter().filter(|f| f.len() + 4 == usize::from(size)).count();
            assert_eq!(n, 8 * 341 * weight as usize, "size {size}");
        }
        for f in &frames {
            let s = etherparse::SlicedPacket::from_ethernet(f).unwrap();
            let etherparse::NetSlice::Ipv4(ip) = s.net.unwrap() else {
                panic!()
            };
            let h = ip.header();
            assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
            let Some(etherparse::TransportSlice::Udp(udp)) = s.transport else {
                panic!()
            };
            let want = udp
                .to_header()
                .calc_checksum_ipv4_raw(h.source(), h.destination(), udp.payload())
                .unwrap();
            assert_eq!(udp.checksum(), want);
        }
        let st = g.generator_stats();
        assert_eq!(st.port.packets, 32_736);
        assert_eq!(st.l1_bytes, 8 * 341 * (7 * 84 + 4 * 614 + 1538));
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn flows_rotate_and_sequence_numbers_count_up() {
        let mut pool = PacketPool::new(64);
        Generator::prime_pool(&mut pool);
        let cfg = GeneratorConfig {
            flows: 3,
            ip: IpVersion::V6,
            sizes: FrameSizes::Fixed { size: 78 },
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        let mut batch = Batch::new(8);
        g.rx(1, &mut pool, &mut batch);
        let seqs: Vec<u32> = batch.iter().map(|p| p.meta.seq).collect();
        assert_eq!(seqs, (0..8).collect::<Vec<_>>());
        let src_last: Vec<u8> = batch.iter().map(|p| p.data()[14 + 8 + 15]).collect();
        assert_eq!(src_last, vec![0, 1, 2, 0, 1, 2, 0, 1]);
        assert!(batch.iter().all(|p| p.len() == 74));
        pool.free_batch(&mut batch);
    }

    #[test]
    fn limit_stops_exactly() {
        let mut pool = PacketPool::new(64);
        let cfg = GeneratorConfig {
            limit: Some(100),
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        assert_eq!(collect(&mut g, &mut pool, 10).len(), 100);
        assert!(g.exhausted());
    }

    #[test]
    fn paced_rate_is_met_within_one_percent() {
        // Paced against a synthetic clock, so the test checks the arithmetic, not the machine.
        let hz = tsc::hz();
        let mut pool = PacketPool::new(64);
        let cfg = GeneratorConfig {
            rate: Rate::Pps(1e6),
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        let mut batch = Batch::new(32);
        let start = 1_000_000u64;
        let step = (hz / 1e6 * 10.0) as u64; // ten packets' worth per call
        let mut now = start;
        while now < start + hz as u64 / 10 {
            g.rx(now, &mut pool, &mut batch);
            pool.free_batch(&mut batch);
            now += step;
        }
        let sent = g.generator_stats().port.packets as f64;
        assert!((sent - 100_000.0).abs() < 1000.0, "sent {sent} in 100 ms at 1 Mpps");
    }

    /// Hiccups of 20 us (a timer interrupt, a hypervisor exit) at 100 Mpps are caught up
    /// on, not skipped: four batches of slack (1.3 us) once lost ~1% of the rate.
    #[test]
    fn short_hiccups_are_caught_up_at_high_rates() {
        let hz = tsc::hz();
        let mut pool = PacketPool::new(64);
        let cfg = GeneratorConfig {
            rate: Rate::Pps(100e6),
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        let mut batch = Batch::new(32);
        let (start, step, hiccup) = (1_000_000u64, (hz * 0.1e-6) as u64, (hz * 20e-6) as u64);
        let mut now = start;
        for call in 1..=200_000u64 {
            g.rx(now, &mut pool, &mut batch);
            pool.free_batch(&mut batch);
            now += step + if call % 1000 == 0 { hiccup } else { 0 };
        }
        let due = (now - start) as f64 / hz * 100e6;
        let s = g.generator_stats();
        assert_eq!(s.behind, 0, "nothing skipped");
        assert!(
            s.port.packets as f64 > 0.995 * due,
            "sent {} of {due:.0}",
            s.port.packets
        );
    }

    #[test]
    fn gbps_pacing_counts_preamble_and_gap() {
        let hz = tsc::hz();
        let mut pool = PacketPool::new(64);
        // 64-byte frames are 84 bytes on the wire: 1 Gbit/s is 1.488 Mpps.
        let cfg = GeneratorConfig {
            rate: Rate::L1Bps(1e9),
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        let mut batch = Batch::new(32);
        let mut now = 1u64;
        while now < hz as u64 / 10 {
            g.rx(now, &mut pool, &mut batch);
            pool.free_batch(&mut batch);
            now += (hz / 1e5) as u64;
        }
        let mpps = g.generator_stats().port.packets as f64 / 0.1 / 1e6;
        assert!((mpps - 1e9 / 672.0 / 1e6).abs() < 0.015, "{mpps} Mpps");
    }

    #[test]
    fn probes_follow_the_probe_rate() {
        let hz = tsc::hz();
        let mut pool = PacketPool::new(64);
        let cfg = GeneratorConfig {
            probe_pps: 1000.0,
            ..Default::default()
        };
        let mut g = Generator::new(cfg, 32).unwrap();
        let mut batch = Batch::new(32);
        let mut probes = 0;
        let mut now = 0u64;
        while now < hz as u64 {
            g.rx(now, &mut pool, &mut batch);
            probes += batch.iter().filter(|p| p.is_probe()).count();
            pool.free_batch(&mut batch);
            now += (hz / 1e5) as u64;
        }
        assert!(
            (990..=1001).contains(&probes),
            "{probes} probes in one second at 1000/s"
        );
    }

    #[test]
    fn too_small_frames_for_ipv6_are_refused() {
        let cfg = GeneratorConfig {
            ip: IpVersion::V6,
            ..Default::default()
        };
        assert_eq!(Generator::new(cfg, 32).err().unwrap().0, "size");
        let cfg = GeneratorConfig {
            flows: 0,
            ..Default::default()
        };
        assert_eq!(Generator::new(cfg, 32).err().unwrap().0, "flows");
    }

    #[test]
    fn the_way_back_swaps_every_flows_addresses_ports_and_macs() {
        let cfg = GeneratorConfig {
            flows: 8,
            sizes: FrameSizes::imix(),
            destinations: Destinations::Spread,
            ..Default::default()
        };
        let mut pool = PacketPool::new(256);
        Generator::prime_pool(&mut pool);
        let there = collect(&mut Generator::new(cfg.clone(), 32).unwrap(), &mut pool, 2);
        let back = collect(
            &mut Generator::new(
                GeneratorConfig {
                    reverse: true,
                    ..cfg.clone()
                },
                32,
            )
            .unwrap(),
            &mut pool,
            2,
        );
        assert_eq!(there.len(), back.len());
        // The way back walks the sizes from half a period on (not each frame's twin).
        assert!(there.iter().zip(&back).any(|(t, b)| t.len() != b.len()));
        for (t, b) in there.iter().zip(&back) {
            assert_eq!((&t[0..6], &t[6..12]), (&b[6..12], &b[0..6]), "MACs swapped");
            assert_eq!((&t[26..30], &t[30..34]), (&b[30..34], &b[26..30]), "addresses swapped");
            assert_eq!((&t[34..36], &t[36..38]), (&b[36..38], &b[34..36]), "ports swapped");
            checked(b);
        }
        for bad in [
            GeneratorConfig {
                reverse: true,
                l4: L4::Tcp,
                ..cfg.clone()
            },
            GeneratorConfig {
                reverse: true,
                session_packets: Some(5),
                ..cfg
            },
        ] {
            assert_eq!(Generator::new(bad, 32).err().unwrap().0, "reverse");
        }
    }
}
