//! What a run reports: throughput, cycles per packet per place, drops by place and
//! reason, latency, and the conservation check that ties them together.

use serde::Serialize;
use sfclab_core::pool::PoolStats;
use sfclab_core::{DropReason, LatencySummary, NfCounter, NfStats, PortInfo, PortStats, TxPort};
use std::collections::BTreeMap;

/// What a place is in the path of packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Where packets come from (a generator, a NIC queue, a pcap file).
    Source,
    /// A queue between places (the rx-queue, a link between cores).
    Queue,
    Nf,
    /// Where packets leave.
    Sink,
}

/// One place packets pass: the source, a queue, an NF, or a sink.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PlaceReport {
    pub name: String,
    pub role: Role,
    /// The NF's type, the port's kind (`generator`, `sink`), or `rx-queue`/`link`.
    pub kind: String,
    pub packets_in: u64,
    pub packets_out: u64,
    pub dropped: u64,
    /// Drops by reason (only non-zero ones).
    pub drops: BTreeMap<String, u64>,
    /// TSC cycles spent here per packet that entered; `None` with accounting off.
    pub cycles_per_packet: Option<f64>,
    /// NF-specific counters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
}

impl PlaceReport {
    /// The traffic source (`kind` as its port says): what it produced, less what it
    /// dropped (`drops` by cause, windowed: a wire's lost frames, oversize frames).
    pub fn source(
        kind: &str,
        stats: &PortStats,
        drops: Vec<(&'static str, u64)>,
        counters: Vec<(&'static str, u64)>,
        cycles_per_packet: Option<f64>,
    ) -> PlaceReport {
        let n = stats.packets;
        let mut by_cause: BTreeMap<String, u64> = drops
            .into_iter()
            .filter(|&(_, v)| v > 0)
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        // A port whose causes do not add up still has every drop shown.
        let explained: u64 = by_cause.values().sum();
        if explained < stats.dropped {
            *by_cause.entry("unaccounted".into()).or_default() += stats.dropped - explained;
        }
        PlaceReport {
            name: kind.into(),
            role: Role::Source,
            kind: kind.into(),
            packets_in: n,
            packets_out: n.saturating_sub(stats.dropped),
            dropped: stats.dropped,
            drops: by_cause,
            cycles_per_packet,
            counters: counters.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    /// Where packets leave: `packets_out` went out, what the port refused is dropped by
    /// the causes the port tells apart, the rest `tx-full` (an in-memory sink takes
    /// everything; a real TX queue may not).
    pub fn sink(name: String, kind: &str, counts: &TxCounts, cycles_per_packet: Option<f64>) -> PlaceReport {
        let (n, refused) = (counts.port.packets, counts.port.dropped);
        let mut counters: BTreeMap<String, u64> =
            counts.counters.iter().map(|c| (c.name.to_string(), c.value)).collect();
        if let Some(failed) = counts.verify_failed {
            counters.insert("verify_failed".into(), failed);
        }
        PlaceReport {
            name,
            role: Role::Sink,
            kind: kind.into(),
            packets_in: n + refused,
            packets_out: n,
            dropped: refused,
            drops: {
                // The port's own causes where it tells them apart; the rest `tx-full`.
                let mut by_cause: BTreeMap<String, u64> = counts
                    .drops
                    .iter()
                    .filter(|&&(_, n)| n > 0)
                    .map(|&(cause, n)| (cause.to_string(), n))
                    .collect();
                let told: u64 = by_cause.values().sum();
                if refused > told {
                    *by_cause.entry(DropReason::TX_FULL.name(&[]).to_string()).or_default() += refused - told;
                }
                by_cause
            },
            cycles_per_packet,
            counters,
        }
    }

    /// A queue between places (`rx-queue`, `link`): what did not fit was dropped for `reason`.
    pub fn queue(name: String, kind: &str, packets_in: u64, dropped: u64, reason: DropReason) -> PlaceReport {
        PlaceReport {
            name,
            role: Role::Queue,
            kind: kind.into(),
            packets_in,
            packets_out: packets_in.saturating_sub(dropped),
            dropped,
            drops: if dropped > 0 {
                [(reason.name(&[]).to_string(), dropped)].into()
            } else {
                Default::default()
            },
            cycles_per_packet: None,
            counters: Default::default(),
        }
    }

    /// An NF's place; `own_reasons` names its own drop reasons (`drop_reasons()`).
    pub fn from_nf(
        name: &str,
        kind: &str,
        s: &NfStats,
        own_reasons: &[&'static str],
        accounting: bool,
        counters: Vec<(&'static str, u64)>,
    ) -> PlaceReport {
        let mut counters: BTreeMap<String, u64> = counters.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if s.created > 0 {
            counters.insert("created".into(), s.created);
        }
        PlaceReport {
            name: name.to_string(),
            role: Role::Nf,
            kind: kind.to_string(),
            packets_in: s.packets_in,
            packets_out: s.packets_out,
            dropped: s.dropped(),
            drops: s
                .drops_by_reason()
                .map(|(r, n)| (r.name(own_reasons).to_string(), n))
                .collect(),
            cycles_per_packet: (accounting && s.packets_in > 0).then(|| s.cycles as f64 / s.packets_in as f64),
            counters,
        }
    }
}

/// One drop counter: where, why, how many.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DropRecord {
    pub place: String,
    pub reason: String,
    pub packets: u64,
    /// `ingress` (refused before the chain spent a cycle on it) or `software` (dropped
    /// inside the chain, after RX: the cycles already spent on it are wasted), as seed
    /// 002 tells them apart.
    pub kind: &'static str,
    /// Cycles spent upstream on the dropped packets (accounting on, software drops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wasted_cycles: Option<f64>,
}

/// What one core did over the window (pipeline runtime).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CoreReport {
    pub core: usize,
    /// Generator and stages this core runs, in turn.
    pub tasks: Vec<String>,
    pub busy_cycles: u64,
    /// Cycles spent polling with nothing to do.
    pub idle_cycles: u64,
    pub busy_share: f64,
    /// Packets it handled: the most any one of its tasks took in (or generated).
    pub packets: u64,
    /// Busy cycles per packet: the bottleneck core has the highest.
    pub cycles_per_packet: Option<f64>,
}

/// generated + created = received + dropped, exactly, and every buffer back in the pool.
/// (Packets NFs held when the run ended were flushed and counted as `held-at-end` drops.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Conservation {
    pub generated: u64,
    /// Packets NFs created (ICMP errors, replies).
    pub created: u64,
    pub received: u64,
    pub dropped: u64,
    /// Buffers not back in the pool after the run (must be 0).
    pub buffers_leaked: u64,
    pub holds: bool,
}

impl Conservation {
    pub fn check(generated: u64, created: u64, received: u64, dropped: u64, buffers_leaked: u64) -> Conservation {
        Conservation {
            generated,
            created,
            received,
            dropped,
            buffers_leaked,
            holds: generated + created == received + dropped && buffers_leaked == 0,
        }
    }
}

impl std::fmt::Display for Conservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (g, r, d) = (self.generated, self.received, self.dropped);
        let source = if self.created > 0 {
            format!("generated {g} + created {}", self.created)
        } else {
            format!("generated {g}")
        };
        if self.holds {
            write!(f, "holds: {source} = received {r} + dropped {d}")
        } else {
            write!(
                f,
                "VIOLATED: {source} != received {r} + dropped {d} (difference {}), {} buffers not returned",
                (g + self.created) as i128 - r as i128 - d as i128,
                self.buffers_leaked
            )
        }
    }
}

/// What became of the packets the generator sent inside the measured window, counted
/// after the run drained (sinks count packets carrying `FLAG_WINDOW`): exact in every
/// runtime, where per-place window counters are not across cores (a packet in flight at
/// an edge is generated in one span and received in another). Trials measure loss here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WindowLoss {
    /// Packets generated inside the window.
    pub sent: u64,
    /// Of those, packets that reached a sink (whenever they arrived).
    pub received: u64,
    /// `sent - received`: dropped somewhere, each drop counted at its place.
    pub lost: u64,
}

impl WindowLoss {
    /// The window's traffic from its counts; an error when more arrived than was sent,
    /// which only a bug can cause.
    pub fn new(sent: u64, received: u64) -> Result<WindowLoss, String> {
        if received > sent {
            return Err(format!(
                "{received} packets of the window's traffic arrived but only {sent} were sent"
            ));
        }
        Ok(WindowLoss {
            sent,
            received,
            lost: sent - received,
        })
    }

    /// `lost / sent` (0 when nothing was sent).
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 / self.sent as f64
        }
    }
}

/// The result of one run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunReport {
    /// sfclab's version.
    pub version: &'static str,
    pub runtime: &'static str,
    pub chain: Vec<String>,
    /// Where packets came from (the generator and its traffic settings, or a real port).
    pub source: PortInfo,
    /// Where packets went.
    pub sink: PortInfo,
    pub batch: usize,
    pub core: Option<usize>,
    pub accounting: bool,
    pub tsc_hz: f64,
    pub warmup_s: f64,
    /// Length of the measured window (warm-up excluded).
    pub duration_s: f64,
    /// Stopped early (Ctrl-C): the window is shorter than asked; its figures hold for it.
    pub interrupted: bool,
    /// Packets generated in the window.
    pub generated: u64,
    /// Packets the sinks took in the window (across cores, some were generated just
    /// before it; `window_loss` counts the window's own traffic exactly).
    pub received: u64,
    /// Drops counted at the places in the window.
    pub dropped: u64,
    /// Received packets per second in the window, in millions.
    pub mpps: f64,
    /// Received L2 (frames with FCS) and L1 (plus preamble and gap) bit rates.
    pub gbps_l2: f64,
    pub gbps_l1: f64,
    /// The rate asked of the generator, Mpps (`None`: as fast as it can; an L1 bit rate
    /// is converted at the mean frame size).
    pub requested_mpps: Option<f64>,
    /// The rate the generator achieved in the window, Mpps.
    pub generated_mpps: f64,
    /// TSC cycles the busiest core spent working (not polling empty queues or waiting for
    /// the pacer) per packet it handled: the bottleneck's cost. In a compound run the one
    /// core runs the generator, the chain and the sink. `None` when no packet was handled.
    pub busy_cycles_per_packet: Option<f64>,
    /// Per-place counters of the window. Across cores, packets in flight at the window's
    /// edges are counted where they were then, so these need not add up exactly; the
    /// exact checks are `window_loss` and `conservation`.
    pub places: Vec<PlaceReport>,
    pub drops: Vec<DropRecord>,
    /// Latency of the probe packets, generator to sink.
    pub latency: Option<LatencySummary>,
    /// The window's own traffic: sent, received, lost; exact.
    pub window_loss: WindowLoss,
    /// With `verify` on: frames that failed checksum or length verification at a sink
    /// over the whole run (`None`: not verified).
    pub verify_failed: Option<u64>,
    /// The whole run (warm-up, window and the drain after it): generated = received +
    /// dropped, exactly, and every buffer back in the pool.
    pub conservation: Conservation,
    pub pool: PoolStats,
    /// Source batches cut short because the pool ran dry, and packets the pacer skipped
    /// for falling behind: either means the offered rate was not reached.
    pub pool_empty: u64,
    pub pacing_behind: u64,
    /// Window packets the source produced but never offered to the device under test
    /// (a tester's transmit refused them): counted as the source's drops and in
    /// `window_loss.lost`, but the tester's shortfall, not the device's loss.
    pub not_offered: u64,
    /// Pipeline runtime: the placement, the link mode and every core's load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_mode: Option<&'static str>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<CoreReport>,
    /// Other runs that took turns on this run's thread (the hops of a chain placed on one
    /// core, `chaining: veth`); its busy cycles are then the ticks of its own turns that
    /// moved a batch, not the core's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shares_thread_with: usize,
}

impl RunReport {
    /// Drop records from the places' counters, in chain order. A software drop wastes
    /// the cycles the places before it (and the dropping NF) spent per packet.
    pub fn collect_drops(places: &[PlaceReport]) -> Vec<DropRecord> {
        // Cycles per packet spent by the places passed so far, the generator excluded
        // (it stands for the traffic source); None once one of them is not measured.
        let mut upstream: Option<f64> = Some(0.0);
        let mut out = Vec::new();
        for p in places {
            let ingress = p.kind == "rx-queue";
            let own = match p.role {
                Role::Queue => Some(0.0),
                _ => p.cycles_per_packet,
            };
            for (reason, &n) in &p.drops {
                out.push(DropRecord {
                    place: p.name.clone(),
                    reason: reason.clone(),
                    packets: n,
                    kind: if ingress { "ingress" } else { "software" },
                    wasted_cycles: if ingress {
                        None
                    } else {
                        upstream.zip(own).map(|(u, o)| (u + o) * n as f64)
                    },
                });
            }
            if p.role != Role::Source {
                upstream = upstream.zip(own).map(|(u, o)| u + o);
            }
        }
        out
    }
}

/// Stable names of the common drop reasons (NFs name their own), for documentation and
/// schema checks.
pub fn drop_reason_names() -> Vec<&'static str> {
    DropReason::common().map(|r| r.name(&[])).collect()
}

/// A sink's counters at one instant, or over a window (`since`), or of several sinks
/// (`add`): what the runtimes read from a [`TxPort`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TxCounts {
    pub port: PortStats,
    /// Packets of the window's own traffic taken (`FLAG_WINDOW`).
    pub window_packets: u64,
    /// Frames that failed verification; `None` when the port does not verify.
    pub verify_failed: Option<u64>,
    pub counters: Vec<NfCounter>,
    /// Refused packets by cause, where the port tells them apart.
    pub drops: Vec<(&'static str, u64)>,
}

impl TxCounts {
    pub fn of<T: TxPort>(port: &T) -> TxCounts {
        TxCounts {
            port: port.stats(),
            window_packets: port.window_packets(),
            verify_failed: port.verify_failed(),
            counters: port.counters(),
            drops: port.drops(),
        }
    }

    /// What changed since `start` (gauges as they are now).
    pub fn since(&self, start: &TxCounts) -> TxCounts {
        TxCounts {
            port: self.port.since(&start.port),
            window_packets: self.window_packets - start.window_packets,
            verify_failed: self.verify_failed.map(|v| v - start.verify_failed.unwrap_or(0)),
            counters: NfCounter::window(&start.counters, &self.counters)
                .into_iter()
                .zip(&self.counters)
                .map(|((name, value), c)| NfCounter {
                    name,
                    value,
                    kind: c.kind,
                })
                .collect(),
            drops: self
                .drops
                .iter()
                .map(|&(cause, n)| {
                    let before = start.drops.iter().find(|d| d.0 == cause).map_or(0, |d| d.1);
                    (cause, n - before.min(n))
                })
                .collect(),
        }
    }

    /// Adds another sink's counts (sinks of several stages reported as one place).
    pub fn add(&mut self, o: &TxCounts) {
        self.port.add(&o.port);
        self.window_packets += o.window_packets;
        self.verify_failed = match (self.verify_failed, o.verify_failed) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        for c in &o.counters {
            match self.counters.iter_mut().find(|m| m.name == c.name) {
                Some(m) => m.value += c.value,
                None => self.counters.push(*c),
            }
        }
        for &(cause, n) in &o.drops {
            match self.drops.iter_mut().find(|d| d.0 == cause) {
                Some(d) => d.1 += n,
                None => self.drops.push((cause, n)),
            }
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
