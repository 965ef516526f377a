//! The runtimes take any source and sink through the port traits: a port they have never
//! seen (a numbered source, a sink whose TX queue refuses packets) plugs in unchanged,
//! and what it reports (its kind, refusals as `tx-full` drops, the window's traffic, its
//! own counters) reaches the report with packets conserved exactly.

use sfclab_core::packet::FLAG_WINDOW;
use sfclab_core::{
    Batch, NetworkFunction, NfCounter, PacketMeta, PacketPool, PortInfo, PortStats, Recycle, RxPort, TxPort,
};
use sfclab_nf::NfSpec;
use sfclab_runtime::placement::allowed_cores;
use sfclab_runtime::{PipelineSettings, Placement, Role, RunReport, RunSettings, run_compound_on, run_parallel_on};
use std::time::Duration;

/// Numbers its packets 0, 1, 2, ... in one flow; stops `count` packets into the window.
#[derive(Default)]
struct NumberedSource {
    stats: PortStats,
    flags: u16,
    limit: Option<u64>,
}

impl RxPort for NumberedSource {
    fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut want = batch.room() as u64;
        if let Some(l) = self.limit {
            want = want.min(l - self.stats.packets);
        }
        let first = batch.len();
        let got = pool.alloc_into(batch, want as usize);
        let fresh = PacketMeta::fresh(60, 0, self.flags);
        for (k, p) in batch.iter_mut_from(first).enumerate() {
            let seq = (self.stats.packets + k as u64) as u32;
            p.stamp(&fresh, 7, seq, &[0u8; 64]);
        }
        self.stats.packets += got as u64;
        self.stats.bytes += 60 * got as u64;
        got
    }

    fn exhausted(&self) -> bool {
        self.limit.is_some_and(|l| self.stats.packets >= l)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn start_window(&mut self, count: Option<u64>) {
        self.flags = FLAG_WINDOW;
        self.limit = count.map(|c| self.stats.packets + c);
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "numbered".into(),
            summary: "one flow, numbered".into(),
            settings: Default::default(),
        }
    }
}

/// A TX queue that refuses every `refuse_every`-th packet offered, and checks that the
/// packets it sends keep their order.
struct RefusingSink {
    refuse_every: u64,
    offered: u64,
    stats: PortStats,
    window: u64,
    last_seq: Option<u32>,
    out_of_order: u64,
}

impl RefusingSink {
    fn new(refuse_every: u64) -> RefusingSink {
        RefusingSink {
            refuse_every,
            offered: 0,
            stats: PortStats::default(),
            window: 0,
            last_seq: None,
            out_of_order: 0,
        }
    }
}

impl TxPort for RefusingSink {
    fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
        for p in batch.iter() {
            self.offered += 1;
            if self.offered.is_multiple_of(self.refuse_every) {
                self.stats.dropped += 1;
                continue;
            }
            if self.last_seq.is_some_and(|s| p.meta.seq <= s) {
                self.out_of_order += 1;
            }
            self.last_seq = Some(p.meta.seq);
            self.stats.packets += 1;
            self.stats.bytes += p.len() as u64;
            self.window += u64::from(p.in_window());
        }
        recycle.recycle_batch(batch);
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn window_packets(&self) -> u64 {
        self.window
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![NfCounter::total("out_of_order", self.out_of_order)]
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "refusing".into(),
            summary: format!("refuses 1 in {}", self.refuse_every),
            settings: Default::default(),
        }
    }
}

fn forwarders(n: usize) -> Vec<(String, Box<dyn NetworkFunction>)> {
    (0..n)
        .map(|i| (format!("fwd{i}"), NfSpec::default_of("forwarder").unwrap().build()))
        .collect()
}

fn run_settings(count: u64) -> RunSettings {
    RunSettings {
        count: Some(count),
        duration: None,
        warmup: Duration::from_millis(20),
        core: allowed_cores().last().copied(),
        ..Default::default()
    }
}

/// What both runtimes must report of the two ports.
fn check(r: &RunReport, count: u64) {
    assert!(r.conservation.holds, "{}", r.conservation);
    assert_eq!((r.source.kind.as_str(), r.sink.kind.as_str()), ("numbered", "refusing"));
    assert_eq!(r.window_loss.sent, count);
    let sink = r.places.iter().find(|p| p.role == Role::Sink).unwrap();
    assert_eq!(sink.kind, "refusing");
    let refused = sink.drops.get("tx-full").copied().unwrap_or(0);
    assert!(refused > 0, "the sink refused packets: {sink:?}");
    assert_eq!(sink.packets_in, sink.packets_out + refused);
    // The sink's own counter, windowed: one flow keeps its order through the chain.
    assert_eq!(sink.counters.get("out_of_order"), Some(&0), "{sink:?}");
    let source = r.places.iter().find(|p| p.role == Role::Source).unwrap();
    assert_eq!((source.kind.as_str(), source.packets_out), ("numbered", count));
    // The whole run: what the sink refused is dropped, counted at its place.
    assert_eq!(
        r.conservation.dropped,
        r.conservation.generated - r.conservation.received
    );
}

#[test]
fn compound_runs_any_source_and_sink() {
    let sink = RefusingSink::new(10);
    let r = run_compound_on(NumberedSource::default(), sink, forwarders(2), &run_settings(50_000)).unwrap();
    check(&r, 50_000);
    // One thread, whole batches: the window's loss is exactly what the sink refused.
    let refused = r.drops.iter().find(|d| d.reason == "tx-full").unwrap().packets;
    assert_eq!(r.window_loss.lost, refused);
    assert_eq!(r.window_loss.lost, 5_000);
}

#[test]
fn pipeline_runs_any_source_and_sink_in_order() {
    let core = *allowed_cores().last().unwrap();
    let settings = PipelineSettings {
        run: RunSettings {
            core: None,
            pool_size: 0,
            ..run_settings(50_000)
        },
        placement: Placement::SCore,
        cores: vec![core],
        generator_core: Some(core),
        flow_control: true,
        ..Default::default()
    };
    let r = run_parallel_on(
        NumberedSource::default(),
        || RefusingSink::new(7),
        vec![forwarders(3)],
        &settings,
    )
    .unwrap();
    check(&r, 50_000);
    assert!(r.window_loss.lost > 0);
}
