//! Runs a resolved chain on the runtime it names, and as a trial for the searches.

use sfclab_io::{AfXdpSettings, PcapSink, PcapSource};
use sfclab_measure::{Trial, TrialResult};
use sfclab_runtime::{
    DeviceUnderTest, RunError, RunReport, RunSettings, WiredReport, WiredSettings, run_across_veth, run_compound_on,
    run_parallel, run_pipeline,
};
use sfclab_traffic::{Generator, Rate, Sink};
use std::time::Duration;

use crate::config::ChainSpec;
use crate::settings::Ports;

/// Builds the chain's NFs (once per replica) and runs it. A wired run (`ports: veth`,
/// `linux`) reports what its tester measured across the device under test.
pub fn run(spec: &ChainSpec) -> Result<RunReport, RunError> {
    if spec.ports != Ports::Memory {
        return run_wired(spec).map(|w| w.tester);
    }
    let build = || spec.build_nfs();
    match &spec.pipeline {
        Some(p) if spec.replicas > 1 => {
            run_parallel(spec.traffic.clone(), (0..spec.replicas).map(|_| build()).collect(), p)
        }
        Some(p) => run_pipeline(spec.traffic.clone(), spec.graph(), p),
        None => run_compound_between_ports(spec),
    }
}

/// Builds the testbed (tester and device-under-test namespaces joined by veth pairs),
/// runs the tester's traffic across the device, and removes the testbed. The device
/// under test runs on the run's core, the tester on another one.
pub fn run_wired(spec: &ChainSpec) -> Result<WiredReport, RunError> {
    let dut = match spec.ports {
        Ports::Linux => DeviceUnderTest::Linux,
        Ports::Veth | Ports::Memory => DeviceUnderTest::Chain(spec.graph()),
    };
    let ports = AfXdpSettings {
        xdp_mode: spec.xdp_mode,
        ..AfXdpSettings::default()
    };
    let dut_core = spec.settings.core;
    let tester_core = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .find(|&c| Some(c) != dut_core)
        .or(dut_core);
    let wired = WiredSettings {
        io: spec.io_kind,
        dut_ports: ports.clone(),
        tester_ports: ports,
        dut_core,
        ..WiredSettings::default()
    };
    let run = RunSettings {
        core: tester_core,
        ..spec.settings.clone()
    };
    run_across_veth(spec.traffic.clone(), dut, &run, &wired)
}

/// A compound chain between its ports: a pcap file at an end that names one (`replay`,
/// `capture`), the generator and the in-memory sink otherwise.
fn run_compound_between_ports(spec: &ChainSpec) -> Result<RunReport, RunError> {
    let setting = |key: &'static str, reason: String| RunError::Setting { key, reason };
    let settings = &spec.settings;
    let source = |(file, loops): &(std::path::PathBuf, Option<u64>)| {
        PcapSource::open(file, *loops).map_err(|e| setting("replay", e))
    };
    let sink =
        |path: &std::path::PathBuf| PcapSink::create(path, sfclab_core::tsc::hz()).map_err(|e| setting("capture", e));
    let generator = || Generator::new(spec.traffic.clone(), settings.batch).map_err(|(k, r)| setting(k, r));
    let graph = spec.graph();
    match (&spec.io.replay, &spec.io.capture) {
        (Some(r), Some(c)) => run_compound_on(source(r)?, sink(c)?, graph, settings),
        (Some(r), None) => run_compound_on(source(r)?, Sink::new(settings.verify), graph, settings),
        (None, Some(c)) => run_compound_on(generator()?, sink(c)?, graph, settings),
        (None, None) => run_compound_on(generator()?, Sink::new(settings.verify), graph, settings),
    }
}

/// A trial on a real chain: the spec at a paced rate for a duration, latency probes and
/// per-NF accounting off (they would cost the chain cycles), counts from the report.
pub struct ChainTrial {
    pub spec: ChainSpec,
    /// Every report, for the record.
    pub reports: Vec<RunReport>,
    /// Ctrl-C: no further trial starts, the current one ends early and is not counted.
    pub stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ChainTrial {
    /// One run at `offered_pps` with latency probes at `probe_pps`, for latency at a load.
    /// `empty_chain` runs the same traffic through no NF: the generator's and sink's own
    /// latency, to calibrate against.
    pub fn latency_run(
        &self,
        offered_pps: f64,
        duration: Duration,
        probe_pps: f64,
        empty_chain: bool,
    ) -> Result<RunReport, String> {
        let mut spec = self.spec.as_trial(Rate::Pps(offered_pps), probe_pps, duration);
        if empty_chain {
            spec.nfs.clear();
            spec.wiring = None;
            if let Some(p) = spec.pipeline.as_mut() {
                p.placement = sfclab_runtime::Placement::SCore;
            }
        }
        spec.stop_on(&self.stop);
        run(&spec).map_err(|e| e.to_string())
    }
}

impl Trial for ChainTrial {
    fn interrupted(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn run(&mut self, offered_pps: f64, duration: Duration) -> Result<TrialResult, String> {
        if self.interrupted() {
            return Err(format!("interrupted by Ctrl-C after {} trials", self.reports.len()));
        }
        let mut spec = self.spec.as_trial(Rate::Pps(offered_pps), 0.0, duration);
        spec.stop_on(&self.stop);
        let r = run(&spec).map_err(|e| e.to_string())?;
        if self.interrupted() {
            return Err(format!("interrupted by Ctrl-C after {} trials", self.reports.len()));
        }
        // The window's own traffic, counted after the drain: exact in every runtime, and
        // free of warm-up traffic (validity and loss over the same packets and time).
        let w = r.window_loss;
        let t = TrialResult::new(offered_pps, r.duration_s, w.sent, w.received);
        self.reports.push(r);
        Ok(t)
    }
}
