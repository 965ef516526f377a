//! `sfclab bench ring`: what a link between cores costs.
//!
//! 1. The ring alone: two threads on two cores pass the same buffer handles round a
//!    loop of two SPSC rings in bursts (one side pushes ring A and pops ring B, the
//!    other pops A and pushes B); each side's TSC cycles per element cover one push and
//!    one pop. DPDK's `ring_perf_autotest` (Debian `dpdk-test`) is the peer: its SP/SC
//!    bulk figures for two cores, enqueue plus dequeue per element.
//! 2. The full hop: forwarder chains of two on one core (`s_core`) and across two cores
//!    (`bi:2`); the hop's cost is the extra busy cycles per packet, both cores together.

use serde::Serialize;
use sfclab_core::{Batch, PacketPool, ring, tsc};
use sfclab_runtime::{LinkMode, PipelineSettings, Placement, RunSettings, placement::online_cores, run_pipeline};
use sfclab_traffic::GeneratorConfig;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Machine, median, which};
use crate::config::{Overrides, from_shorthand};

pub const RING_SCHEMA: &str = "sfclab.bench.ring/1";

#[derive(Debug, Clone, Serialize)]
pub struct RingBench {
    pub schema: &'static str,
    pub version: &'static str,
    pub machine: Machine,
    pub burst: usize,
    pub repeat: usize,
    /// Cycles per element for one push plus one pop, per side, median of the repetitions.
    pub ring_cycles_per_element: f64,
    pub ring_runs: Vec<f64>,
    /// DPDK ring_perf_autotest, SP/SC bulk of `burst`, two cores: enqueue + dequeue cycles per element.
    pub dpdk_ring_cycles_per_element: Option<f64>,
    pub dpdk_skipped: Option<String>,
    /// Busy cycles per packet, s_core and bi:2 (both cores summed), forwarder*2.
    pub s_core_cycles_per_packet: f64,
    pub bi2_cycles_per_packet: f64,
    /// bi:2 minus s_core: what crossing a core costs per packet.
    pub hop_cycles_per_packet: f64,
    pub s_core_mpps: f64,
    pub bi2_mpps: f64,
}

/// Round trips of `burst`-sized bursts through two rings between cores `a` and `b`.
fn ring_loop(a: usize, b: usize, burst: usize, duration: Duration) -> f64 {
    let (mut to_b, mut from_a) = ring(1024);
    let (mut to_a, mut from_b) = ring(1024);
    let stop = AtomicBool::new(false);
    // Both sides on threads of their own: pinning this one would narrow what
    // later runs of this process may use.
    std::thread::scope(|s| {
        s.spawn(|| {
            let stop = &stop;
            let far = s.spawn(move || {
                core_affinity::set_for_current(core_affinity::CoreId { id: b });
                let mut batch = Batch::new(burst);
                let (mut moved, t0) = (0u64, tsc::now());
                while !stop.load(Ordering::Relaxed) {
                    moved += from_a.pop_into(&mut batch) as u64;
                    while !batch.is_empty() {
                        to_a.push_from(&mut batch);
                    }
                }
                (tsc::now() - t0, moved, from_a, to_a)
            });
            core_affinity::set_for_current(core_affinity::CoreId { id: a });
            let mut pool = PacketPool::new(512);
            let mut batch = Batch::new(burst);
            let mut held = 0;
            while pool.alloc_into(&mut batch, burst) > 0 {
                while !batch.is_empty() {
                    to_b.push_from(&mut batch);
                }
                held += burst;
                if held >= 256 {
                    break;
                }
            }
            let end = Instant::now() + duration;
            let (mut moved, t0) = (0u64, tsc::now());
            while Instant::now() < end {
                for _ in 0..1024 {
                    moved += from_b.pop_into(&mut batch) as u64;
                    while !batch.is_empty() {
                        to_b.push_from(&mut batch);
                    }
                }
            }
            let near = (tsc::now() - t0) as f64 / moved.max(1) as f64;
            stop.store(true, Ordering::Relaxed);
            let (far_ticks, far_moved, mut from_a, _) = far.join().expect("far side");
            // Give every buffer back before the pool goes.
            while pool.in_use() > 0 {
                from_b.pop_into(&mut batch);
                from_a.pop_into(&mut batch);
                pool.free_batch(&mut batch);
            }
            let far = far_ticks as f64 / far_moved.max(1) as f64;
            near.max(far)
        })
        .join()
        .expect("near side")
    })
}

/// Runs DPDK's ring_perf_autotest; returns SP/SC bulk enq+deq cycles per element on two cores.
fn dpdk_ring_perf(burst: usize) -> Result<f64, String> {
    let bin = which("dpdk-test").ok_or("dpdk-test not found (Debian package `dpdk-dev`)")?;
    let out = Command::new(&bin)
        .args([
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "-l",
            "0,1",
            "--file-prefix",
            &format!("sfclab-ring-{}", std::process::id()),
        ])
        .env("DPDK_TEST", "ring_perf_autotest")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run dpdk-test: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_ring_perf(&text, burst).ok_or_else(|| "ring_perf_autotest printed no SP/SC two-core figures".to_string())
}

/// Finds "SP/SC: bulk (size: N): X" in the first section for two physical cores (the
/// legacy pointer API, as sfclab's rings carry pointers).
pub fn parse_ring_perf(text: &str, burst: usize) -> Option<f64> {
    let section = text.split("Testing using two physical cores").nth(1)?;
    let section = section.split("Testing using").next()?;
    let key = format!("SP/SC: bulk (size: {burst}):");
    section
        .lines()
        .find_map(|l| l.split_once(&key).and_then(|(_, v)| v.trim().parse::<f64>().ok()))
}

fn pipeline_cycles(placement: Placement, duration: Duration) -> Result<(f64, f64), String> {
    let spec = from_shorthand("forwarder*2", &Overrides::default()).map_err(|e| e.to_string())?;
    let nfs = spec
        .nfs
        .iter()
        .map(|(n, c)| (n.clone(), c.build().expect("valid forwarder")))
        .collect();
    let settings = PipelineSettings {
        run: RunSettings {
            duration: Some(duration),
            warmup: Duration::from_millis(200),
            accounting: false,
            pool_size: 0,
            ..Default::default()
        },
        placement,
        links: LinkMode::Backpressure,
        flow_control: true,
        ..Default::default()
    };
    let traffic = GeneratorConfig {
        flows: 1024,
        probe_pps: 0.0,
        ..Default::default()
    };
    let r = run_pipeline(traffic, nfs, &settings).map_err(|e| e.to_string())?;
    let busy: u64 = r.cores.iter().map(|c| c.busy_cycles).sum();
    Ok((busy as f64 / r.received.max(1) as f64, r.mpps))
}

pub fn run(
    repeat: usize,
    duration: Duration,
    burst: usize,
    mut progress: impl FnMut(usize, usize, &str),
) -> Result<RingBench, String> {
    let cores = online_cores();
    if cores.len() < 2 {
        return Err(format!("needs two cores; this process has {}", cores.len()));
    }
    let total = repeat * 3 + 1;
    let mut done = 0;
    let (mut ring_runs, mut s_runs, mut b_runs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeat {
        ring_runs.push(ring_loop(cores[0], cores[1], burst, duration));
        done += 1;
        progress(done, total, "ring");
        s_runs.push(pipeline_cycles(Placement::SCore, duration)?);
        done += 1;
        progress(done, total, "s_core");
        b_runs.push(pipeline_cycles(Placement::Bi(2), duration)?);
        done += 1;
        progress(done, total, "bi:2");
    }
    let dpdk = dpdk_ring_perf(burst);
    progress(total, total, "dpdk-test");
    let s_cycles = median(&s_runs.iter().map(|x| x.0).collect::<Vec<_>>());
    let b_cycles = median(&b_runs.iter().map(|x| x.0).collect::<Vec<_>>());
    Ok(RingBench {
        schema: RING_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        machine: Machine::read(),
        burst,
        repeat,
        ring_cycles_per_element: median(&ring_runs),
        ring_runs,
        dpdk_ring_cycles_per_element: dpdk.as_ref().ok().copied(),
        dpdk_skipped: dpdk.err(),
        s_core_cycles_per_packet: s_cycles,
        bi2_cycles_per_packet: b_cycles,
        hop_cycles_per_packet: b_cycles - s_cycles,
        s_core_mpps: median(&s_runs.iter().map(|x| x.1).collect::<Vec<_>>()),
        bi2_mpps: median(&b_runs.iter().map(|x| x.1).collect::<Vec<_>>()),
    })
}

pub fn table(b: &RingBench) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench ring | {} ({} cores, TSC {:.3} GHz), bursts of {}, {} repetitions (medians)\n",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.burst,
        b.repeat
    );
    let _ = writeln!(
        s,
        "ring alone        {:.2} cycles/element (one push + one pop, per side, two cores)",
        b.ring_cycles_per_element
    );
    match (b.dpdk_ring_cycles_per_element, &b.dpdk_skipped) {
        (Some(d), _) => {
            let _ = writeln!(
                s,
                "peer              DPDK ring_perf_autotest SP/SC bulk {} on two cores: {d:.2} cycles/element (enqueue + dequeue): sfclab/DPDK = {:.2}x",
                b.burst,
                b.ring_cycles_per_element / d
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(s, "peer              skipped: {why}");
        }
        _ => {}
    }
    let _ = writeln!(
        s,
        "forwarder*2       s_core {:.2} cycles/packet ({:.1} Mpps), bi:2 {:.2} cycles/packet over both cores ({:.1} Mpps)",
        b.s_core_cycles_per_packet, b.s_core_mpps, b.bi2_cycles_per_packet, b.bi2_mpps
    );
    let _ = writeln!(
        s,
        "full hop          {:.2} cycles/packet added by crossing a core (both cores together)",
        b.hop_cycles_per_packet
    );
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_two_core_section_of_ring_perf() {
        let text = "### Testing bulk enq/deq ###\nlegacy APIs: SP/SC: bulk (size: 32): 73.35\n### Testing using two physical cores ###\nlegacy APIs: SP/SC: bulk (size: 8): 9.10\nlegacy APIs: MP/MC: bulk (size: 8): 32.45\nlegacy APIs: SP/SC: bulk (size: 32): 4.02\n### Testing using all worker nodes ###\n### Testing using two physical cores ###\nelem APIs: element size 16B: SP/SC: bulk (size: 32): 6.85\n";
        assert_eq!(super::parse_ring_perf(text, 32), Some(4.02));
        assert_eq!(super::parse_ring_perf(text, 8), Some(9.10));
        assert_eq!(super::parse_ring_perf("nothing", 32), None);
    }
}
