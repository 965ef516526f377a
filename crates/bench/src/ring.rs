//! `sfclab bench ring`: what a link between cores costs.
//!
//! 1. The ring alone: two threads on two cores pass the same buffer handles round a
//!    loop of two SPSC rings in bursts (one side pushes ring A and pops ring B, the
//!    other pops A and pushes B); each side's TSC cycles per element cover one push and
//!    one pop. DPDK's `ring_perf_autotest` (Debian `dpdk-test`) is the peer: its SP/SC
//!    bulk figures for two cores, enqueue plus dequeue per element.
//! 2. The full hop: the same loop with a forwarder on the far core, run through the
//!    chain runner as a pipeline stage runs it (MAC rewrite, verdicts, counters); per
//!    side cycles per packet. The reference in the same run is the bare loop the issue
//!    describes: 32-index bursts through `rtrb` rings, the far core storing the MACs.
//! 3. The whole pipeline: forwarder chains of two on one core (`s_core`) and across two
//!    cores (`bi:2`) with generator and sink; the extra busy cycles per packet of both
//!    cores together, which include the buffers' cache lines going back to the
//!    generator's core for reuse.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_core::{Batch, PacketPool, ReturnLink, RingConsumer, RingProducer, ring, tsc};
use sfclab_nf::NfSpec;
use sfclab_runtime::Chain;
use sfclab_runtime::{LinkMode, Placement, placement::allowed_cores};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::median;
use crate::pipeline::forwarder_pipeline;
use std::fmt::Write as _;

pub const RING_SCHEMA: &str = "sfclab.bench.ring/2";

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RingBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub burst: usize,
    /// Cycles per element for one push plus one pop, per side, median of the repetitions.
    pub ring_cycles_per_element: f64,
    pub ring_runs: Vec<f64>,
    /// DPDK ring_perf_autotest, SP/SC bulk of `burst`, two cores: enqueue + dequeue cycles
    /// per element, median of one run per repetition (interleaved with sfclab's).
    pub dpdk_ring_cycles_per_element: Option<f64>,
    pub dpdk_ring_runs: Vec<f64>,
    pub dpdk_skipped: Option<String>,
    /// The full hop, per side: a forwarder on the far core through sfclab's ring, batch
    /// and chain runner, the near core sending the buffers back round. Median.
    pub full_hop_cycles_per_packet: f64,
    pub full_hop_runs: Vec<f64>,
    /// The same hop with no framework (indices through `rtrb` rings, bare MAC stores) in
    /// the same run. Median.
    pub bare_hop_cycles_per_packet: f64,
    pub bare_hop_runs: Vec<f64>,
    /// Busy cycles per packet, s_core and bi:2 (both cores summed), forwarder*2.
    pub s_core_cycles_per_packet: f64,
    pub bi2_cycles_per_packet: f64,
    /// bi:2 minus s_core: what crossing a core costs per packet.
    pub hop_cycles_per_packet: f64,
    pub s_core_mpps: f64,
    pub bi2_mpps: f64,
    /// Per repetition: (busy cycles per packet, Mpps) of s_core and of bi:2.
    pub s_core_runs: Vec<(f64, f64)>,
    pub bi2_runs: Vec<(f64, f64)>,
}

/// The ring alone: the same buffer handles go round two rings between cores `a` and
/// `b` in `burst`-sized bursts, neither side touching them.
fn ring_loop(a: usize, b: usize, burst: usize, duration: Duration, stop: &Stop) -> f64 {
    let (mut to_far, mut from_near) = ring(1024);
    let (mut to_near, mut from_far) = ring(1024);
    let mut pool = PacketPool::new(512);
    let mut out = Batch::new(burst);
    while pool.in_use() < 256 && pool.alloc_into(&mut out, burst) > 0 {
        while !out.is_empty() {
            to_far.push_from(&mut out);
        }
    }
    let (mut near_batch, mut far_batch) = (Batch::new(burst), Batch::new(burst));
    let cycles = two_sides(
        a,
        b,
        duration,
        || pass_on(&mut from_far, &mut near_batch, &mut to_far, |_| {}),
        || pass_on(&mut from_near, &mut far_batch, &mut to_near, |_| {}),
        stop,
    );
    give_back(&mut pool, [near_batch, far_batch], [from_far, from_near]);
    cycles
}

/// One turn of a side: takes a burst when it holds none (after `work` on it), sends
/// what it holds on. Returns how many packets it took.
#[inline]
fn pass_on(
    from: &mut RingConsumer,
    held: &mut Batch,
    to: &mut RingProducer,
    mut work: impl FnMut(&mut Batch),
) -> usize {
    let mut n = 0;
    if held.is_empty() {
        n = from.pop_into(held);
        if n > 0 {
            work(held);
        }
    }
    to.push_from(held);
    n
}

/// Every buffer back to the pool before it goes.
fn give_back(pool: &mut PacketPool, held: [Batch; 2], rings: [RingConsumer; 2]) {
    let mut scratch = Batch::new(sfclab_core::MAX_BATCH);
    for mut b in held {
        pool.free_batch(&mut b);
    }
    for mut r in rings {
        while r.pop_into(&mut scratch) > 0 {
            pool.free_batch(&mut scratch);
        }
    }
    assert_eq!(pool.in_use(), 0, "a buffer went missing in the hop loop");
}

/// Runs `near` on core `a` and `far` on core `b` until `duration` has passed; each
/// returns how many packets it moved in one call. Returns the larger of the two sides'
/// TSC cycles per packet.
fn two_sides(
    a: usize,
    b: usize,
    duration: Duration,
    mut near: impl FnMut() -> usize + Send,
    mut far: impl FnMut() -> usize + Send,
    ctrl_c: &Stop,
) -> f64 {
    let done = AtomicBool::new(false);
    // Both sides on threads of their own: pinning this one would narrow what later runs
    // of this process may use.
    std::thread::scope(|s| {
        let far_side = s.spawn(|| side(b, &mut far, None, (&done, ctrl_c)));
        let near_side = s.spawn(|| side(a, &mut near, Some(Instant::now() + duration), (&done, ctrl_c)));
        let near = near_side.join().expect("near side");
        near.max(far_side.join().expect("far side"))
    })
}

/// One side of [`two_sides`]: calls `work` until told to stop (the side with the
/// deadline tells); returns TSC cycles per packet moved. Generic, so `work` inlines.
fn side<F: FnMut() -> usize>(
    core: usize,
    work: &mut F,
    deadline: Option<Instant>,
    (done, ctrl_c): (&AtomicBool, &Stop),
) -> f64 {
    core_affinity::set_for_current(core_affinity::CoreId { id: core });
    let (mut moved, t0) = (0u64, tsc::now());
    loop {
        for _ in 0..1024 {
            moved += work() as u64;
        }
        if deadline.is_some_and(|d| Instant::now() >= d || ctrl_c.requested()) {
            done.store(true, Ordering::Relaxed);
        }
        if done.load(Ordering::Relaxed) {
            break;
        }
    }
    (tsc::now() - t0) as f64 / moved.max(1) as f64
}

/// Buffers going round the hop loops: four bursts. Both loops keep what they touch in
/// L1 (128 x 2 lines here, 128 x 1 for the bare loop); at 256 sfclab's buffers spill to
/// L2 and the hop costs ~1.5 cycles/packet more.
const HOP_IN_FLIGHT: usize = 128;

/// The full hop through sfclab's parts: the near core sends batches of packet buffers
/// down a ring; the far core takes them, runs a forwarder over them through the chain
/// runner (MAC rewrite, verdicts, counters) and sends them back.
fn full_hop_loop(a: usize, b: usize, burst: usize, duration: Duration, stop: &Stop) -> f64 {
    let (mut to_far, mut from_near) = ring(1024);
    let (mut to_near, mut from_far) = ring(1024);
    let mut pool = PacketPool::new(512);
    let mut chain = Chain::new(
        vec![(
            "forwarder".into(),
            NfSpec::default_of("forwarder").expect("the default forwarder").build(),
        )],
        burst,
        1,
    );
    let mut out = Batch::new(burst);
    while pool.in_use() < HOP_IN_FLIGHT && pool.alloc_into(&mut out, burst) > 0 {
        out.iter_mut().for_each(|p| {
            p.reset(60);
        });
        while !out.is_empty() {
            to_far.push_from(&mut out);
        }
    }
    // The forwarder drops nothing; a return link stands in for the pool on the far side.
    let (unused_tx, _unused_rx) = ring(2);
    let mut recycle = ReturnLink::new(unused_tx, burst);
    let (mut near_batch, mut far_batch) = (Batch::new(burst), Batch::new(burst));
    let cycles = two_sides(
        a,
        b,
        duration,
        || pass_on(&mut from_far, &mut near_batch, &mut to_far, |_| {}),
        || {
            pass_on(&mut from_near, &mut far_batch, &mut to_near, |batch| {
                // As a pipeline stage does with what arrives.
                batch.prefetch();
                // The clock as a stage has it: read once per batch.
                chain.process::<false, _>(batch, &mut recycle, tsc::now())
            })
        },
        stop,
    );
    give_back(&mut pool, [near_batch, far_batch], [from_far, from_near]);
    cycles
}

/// The same hop with no framework (the reference loop): 32-index bursts through
/// `rtrb` rings, the far core rewriting the MACs of the buffers the indices name.
fn bare_hop_loop(a: usize, b: usize, burst: usize, duration: Duration, stop: &Stop) -> f64 {
    const STRIDE: usize = 2112;
    const BUFFERS: u32 = HOP_IN_FLIGHT as u32;
    struct Frames(*mut u8);
    // SAFETY: each index is held by one side at a time (it travels in the rings), so
    // no two threads touch the same buffer at once.
    unsafe impl Send for Frames {}
    // SAFETY: as above: shared references only ever reach buffers their thread holds.
    unsafe impl Sync for Frames {}
    let mut memory = vec![0u8; STRIDE * BUFFERS as usize];
    let frames = Frames(memory.as_mut_ptr());
    let (mut to_far, mut from_near) = rtrb::RingBuffer::<u32>::new(1024);
    let (mut to_near, mut from_far) = rtrb::RingBuffer::<u32>::new(1024);
    for i in 0..BUFFERS {
        to_far.push(i).expect("room for every buffer");
    }
    let macs = [2u8, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    let (mut near_buf, mut far_buf) = (vec![0u32; burst], vec![0u32; burst]);
    let (mut near_held, mut far_held) = (0..0, 0..0);
    let frames = &frames;
    two_sides(
        a,
        b,
        duration,
        || {
            let mut n = 0;
            if near_held.is_empty() {
                n = burst - from_far.pop_partial_slice(&mut near_buf).1.len();
                near_held = 0..n;
            }
            near_held.start += to_far.push_partial_slice(&near_buf[near_held.clone()]).0.len();
            n
        },
        || {
            let mut n = 0;
            if far_held.is_empty() {
                n = burst - from_near.pop_partial_slice(&mut far_buf).1.len();
                for &i in &far_buf[..n] {
                    // SAFETY: buffer i is ours until its index goes back down the ring.
                    unsafe { std::ptr::copy_nonoverlapping(macs.as_ptr(), frames.0.add(i as usize * STRIDE), 12) };
                }
                far_held = 0..n;
            }
            far_held.start += to_near.push_partial_slice(&far_buf[far_held.clone()]).0.len();
            n
        },
        stop,
    )
}

/// Busy cycles per packet of all cores together, and Mpps, of `forwarder*2` at capacity.
fn pipeline_cycles(
    placement: Placement,
    duration: Duration,
    cores: &[usize],
    stop: &Stop,
) -> Result<(f64, f64), String> {
    let r = forwarder_pipeline(
        2,
        &placement,
        LinkMode::Backpressure,
        duration,
        Duration::from_millis(200),
        cores,
        stop,
    )?;
    let busy: u64 = r.cores.iter().map(|c| c.busy_cycles).sum();
    Ok((busy as f64 / r.received.max(1) as f64, r.mpps))
}

pub fn run(
    repeat: usize,
    duration: Duration,
    burst: usize,
    progress: &mut Progress,
    stop: &Stop,
) -> Result<RingBench, String> {
    let cores = allowed_cores();
    if cores.len() < 2 {
        return Err(format!("needs two cores; this process has {}", cores.len()));
    }
    progress.plan(repeat * 6);
    let (mut ring_runs, mut s_runs, mut b_runs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut hop_runs, mut bare_runs, mut dpdk_runs) = (Vec::new(), Vec::new(), Vec::new());
    let mut dpdk_skipped = None;
    let mut rounds = crate::Rounds::new(repeat, stop);
    // One measurement of the round: skipped once Ctrl-C came; cut (not counted) when
    // Ctrl-C ended its window. A failed one ends the benchmark.
    let mut step = |rounds: &mut crate::Rounds, what: &str, measure: &mut dyn FnMut() -> Result<(), String>| {
        if rounds.go_on() {
            measure()?;
            if stop.requested() {
                rounds.cut();
            }
        }
        progress.finished(what);
        Ok::<(), String>(())
    };
    while rounds.start_next() {
        let (a, b) = (cores[0], cores[1]);
        step(&mut rounds, "ring", &mut || {
            ring_runs.push(ring_loop(a, b, burst, duration, stop));
            Ok(())
        })?;
        step(&mut rounds, "full hop", &mut || {
            hop_runs.push(full_hop_loop(a, b, burst, duration, stop));
            Ok(())
        })?;
        step(&mut rounds, "bare hop", &mut || {
            bare_runs.push(bare_hop_loop(a, b, burst, duration, stop));
            Ok(())
        })?;
        step(&mut rounds, "s_core", &mut || {
            s_runs.push(pipeline_cycles(Placement::SCore, duration, &cores, stop)?);
            Ok(())
        })?;
        step(&mut rounds, "bi:2", &mut || {
            b_runs.push(pipeline_cycles(Placement::Bi(2), duration, &cores, stop)?);
            Ok(())
        })?;
        step(&mut rounds, "dpdk-test", &mut || {
            if dpdk_skipped.is_none() {
                match sfclab_peers::dpdk_test::ring_perf(burst, (a, b), &|| stop.requested()) {
                    Ok(c) => dpdk_runs.push(c),
                    Err(_) if stop.requested() => {}
                    Err(why) => dpdk_skipped = Some(why),
                }
            }
            Ok(())
        })?;
    }
    for runs in [&mut ring_runs, &mut hop_runs, &mut bare_runs] {
        rounds.keep_completed(runs);
    }
    rounds.keep_completed(&mut s_runs);
    rounds.keep_completed(&mut b_runs);
    rounds.keep_completed(&mut dpdk_runs);
    let (repeat_done, interrupted) = (rounds.completed(), rounds.interrupted());
    let s_cycles = median(&s_runs.iter().map(|x| x.0).collect::<Vec<_>>());
    let b_cycles = median(&b_runs.iter().map(|x| x.0).collect::<Vec<_>>());
    Ok(RingBench {
        header: crate::BenchHeader::new(RING_SCHEMA, repeat_done, interrupted),
        burst,
        ring_cycles_per_element: median(&ring_runs),
        ring_runs,
        dpdk_ring_cycles_per_element: crate::median_if_any(&dpdk_runs),
        dpdk_ring_runs: dpdk_runs,
        dpdk_skipped,
        full_hop_cycles_per_packet: median(&hop_runs),
        full_hop_runs: hop_runs,
        bare_hop_cycles_per_packet: median(&bare_runs),
        bare_hop_runs: bare_runs,
        s_core_cycles_per_packet: s_cycles,
        bi2_cycles_per_packet: b_cycles,
        hop_cycles_per_packet: b_cycles - s_cycles,
        s_core_mpps: median(&s_runs.iter().map(|x| x.1).collect::<Vec<_>>()),
        bi2_mpps: median(&b_runs.iter().map(|x| x.1).collect::<Vec<_>>()),
        s_core_runs: s_runs,
        bi2_runs: b_runs,
    })
}

benchmark!(RingBench, render_table);

fn render_table(b: &RingBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, bursts of {}, {} repetitions (medians)\n",
        b.header.title("ring"),
        b.burst,
        b.header.repeat
    );

    let firsts = |v: &[(f64, f64)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
    let seconds = |v: &[(f64, f64)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
    let wide = [
        &b.ring_runs,
        &b.dpdk_ring_runs,
        &b.full_hop_runs,
        &b.bare_hop_runs,
        &firsts(&b.s_core_runs),
        &firsts(&b.bi2_runs),
    ]
    .iter()
    .filter(|v| crate::is_wide(v))
    .count();
    let _ = writeln!(
        s,
        "ring alone        {} TSC cycles/element (one push + one pop, per side, two cores; median [min–max])",
        crate::with_range(&b.ring_runs, 2)
    );
    match (b.dpdk_ring_cycles_per_element, &b.dpdk_skipped) {
        (Some(d), _) => {
            let _ = writeln!(
                s,
                "peer              DPDK ring_perf_autotest SP/SC bulk {} on two cores: {} cycles/element (enqueue + dequeue): sfclab/DPDK = {:.2}x",
                b.burst,
                crate::with_range(&b.dpdk_ring_runs, 2),
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
        "full hop          {} cycles/packet per side (ring + forwarder on the far core through the chain runner); bare loop (indices through rtrb, MAC stores) {}: {:.2}x",
        crate::with_range(&b.full_hop_runs, 2),
        crate::with_range(&b.bare_hop_runs, 2),
        b.full_hop_cycles_per_packet / b.bare_hop_cycles_per_packet
    );
    let _ = writeln!(
        s,
        "forwarder*2       s_core {} busy cycles/packet ({} Mpps), bi:2 {} over both cores ({} Mpps)",
        crate::with_range(&firsts(&b.s_core_runs), 2),
        crate::with_range(&seconds(&b.s_core_runs), 1),
        crate::with_range(&firsts(&b.bi2_runs), 2),
        crate::with_range(&seconds(&b.bi2_runs), 1),
    );
    let _ = writeln!(
        s,
        "full hop          {:.2} cycles/packet added by crossing a core (both cores together)",
        b.hop_cycles_per_packet
    );
    s.push_str(&crate::footer(wide, b.header.interrupted, b.header.repeat));
    s
}

/// `sfclab bench ring`'s flags.
#[derive(clap::Args)]
pub struct RingFlags {
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Window of each trial.
    #[arg(long, default_value = "500ms")]
    duration: String,
    /// Packets per push and pop.
    #[arg(long, default_value_t = 32)]
    burst: usize,
}

pub static BENCH: crate::registry::Entry<RingFlags, RingBench> = crate::registry::Entry {
    name: "ring",
    schema: RING_SCHEMA,
    about: "Cost of a link between cores: the SPSC ring alone (DPDK ring_perf_autotest as the peer), a full hop with a forwarder on the far core (a bare loop as the reference), and a 2-stage forwarder pipeline against one core",
    run: |f, stop, progress| {
        let duration = humantime::parse_duration(&f.duration)
            .map_err(|e| crate::registry::BenchError::Usage(format!("--duration `{}`: {e}", f.duration)))?;
        if f.repeat == 0 || !(1..=256).contains(&f.burst) {
            return Err(crate::registry::BenchError::Usage(
                "need at least one repetition and a burst of 1..=256".into(),
            ));
        }
        Ok(run(f.repeat, duration, f.burst, progress, stop)?)
    },
    figure: None,
};
