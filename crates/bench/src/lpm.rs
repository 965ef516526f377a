//! IPv4 longest-prefix match against DPDK's `rte_lpm`, measured the way DPDK's
//! `lpm_perf_autotest` measures it, in the same run: a table of the same size and shape
//! (routes per prefix length, read from the peer's own output), 1024 rounds of 4096
//! fresh random addresses, TSC cycles of the lookups alone, one address at a time and
//! in bursts of 32. Both tables are DIR-24-8; the ratio says what the code adds.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_core::tsc;
use sfclab_nf::tables::lpm::{BGP4_SHAPE, Lpm4, SplitMix, counts_of, random_table4};
use std::time::Instant;

use crate::{Rounds, median, median_if_any, on_core};
use std::fmt::Write as _;

pub const LPM_SCHEMA: &str = "sfclab.bench.lpm/1";

/// Rounds and addresses per round, as `lpm_perf_autotest` (ITERATIONS, BATCH_SIZE).
const ROUNDS: usize = 1 << 10;
const ADDRESSES: usize = 1 << 12;
/// Burst of a bulk lookup, as `lpm_perf_autotest`'s BULK_SIZE.
const BULK: usize = 32;

#[derive(Debug, Clone)]
pub struct LpmArgs {
    pub repeat: usize,
    pub core: Option<usize>,
    /// Measure DPDK's rte_lpm in the same run.
    pub peer: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LpmBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    /// Routes in the table, and per prefix length.
    pub routes: usize,
    pub shape: Vec<(u8, usize)>,
    /// Where the shape came from: the peer's own table, or the built-in BGP shape.
    pub shape_source: String,
    /// Seconds to build sfclab's table.
    pub build_s: f64,
    pub table_bytes: usize,
    /// Random addresses without a route, percent.
    pub fails_percent: f64,
    /// The lookups, sfclab's and rte_lpm's (bursts of 32).
    #[serde(flatten)]
    pub lookups: Lookups,
    /// Random addresses without a route in rte_lpm's own run, percent.
    pub dpdk_fails_percent: Option<f64>,
}

/// Cycles per lookup (single, bulk) and the share of misses, over fresh random addresses.
fn measure(table: &Lpm4, seed: u64, stop: &Stop) -> Option<(f64, f64, f64)> {
    let mut rng = SplitMix(seed);
    let mut addrs = vec![0u32; ADDRESSES];
    let mut hops = vec![None; ADDRESSES];
    let (mut single, mut bulk, mut misses) = (0u64, 0u64, 0usize);
    for _ in 0..ROUNDS {
        if stop.requested() {
            return None;
        }
        addrs.iter_mut().for_each(|a| *a = rng.next() as u32);
        let t0 = tsc::now();
        let mut found = 0u64;
        for &a in &addrs {
            found += u64::from(table.lookup(a).is_some());
        }
        let t1 = tsc::now();
        for (a, h) in addrs.chunks(BULK).zip(hops.chunks_mut(BULK)) {
            table.lookup_bulk(a, h);
        }
        let t2 = tsc::now();
        single += t1 - t0;
        bulk += t2 - t1;
        misses += ADDRESSES - std::hint::black_box(found) as usize;
        std::hint::black_box(&hops);
    }
    let n = (ROUNDS * ADDRESSES) as f64;
    Some((single as f64 / n, bulk as f64 / n, misses as f64 / n * 100.0))
}

pub fn lpm(args: &LpmArgs, progress: &mut Progress, stop: &Stop) -> Result<LpmBench, String> {
    let core = args.core.or_else(sfclab_runtime::placement::default_chain_core);
    progress.plan(args.repeat * if args.peer { 2 } else { 1 } + 1);
    // The peer first: its table's shape is the one sfclab builds.
    let mut peer_runs = Vec::new();
    let mut skipped = None;
    if args.peer {
        progress.next("dpdk-test lpm_perf_autotest");
        match sfclab_peers::dpdk_test::lpm_perf(core.unwrap_or(0), &|| stop.requested()) {
            Ok(p) => peer_runs.push(p),
            Err(_) if stop.requested() => {}
            Err(e) => skipped = Some(e),
        }
    }
    let (shape, shape_source) = match peer_runs.first() {
        Some(p) => (p.shape.clone(), "dpdk lpm_perf_autotest's table (same run)".to_string()),
        None => (counts_of(&BGP4_SHAPE, 1_076_806), "built-in BGP shape".to_string()),
    };
    // Ctrl-C during the peer: no table is built for rounds that will not run.
    if stop.requested() {
        return Err(crate::INTERRUPTED_BEFORE_A_ROUND.into());
    }
    progress.next("building the table");
    let started = Instant::now();
    let table = Lpm4::new(&random_table4(&shape, 1 << 16, 42))?;
    let build_s = started.elapsed().as_secs_f64();
    let mut peer = || sfclab_peers::dpdk_test::lpm_perf(core.unwrap_or(0), &|| stop.requested());
    let done = lookup_rounds(
        args.repeat,
        args.peer.then_some(("dpdk-test lpm_perf_autotest", &mut peer as _)),
        peer_runs,
        skipped,
        |p| (p.single_cycles, p.bulk_cycles),
        |round| on_core(core, || measure(&table, round as u64 + 1, stop)),
        (progress, stop),
    );
    Ok(LpmBench {
        header: crate::BenchHeader::new(LPM_SCHEMA, done.repeat, done.interrupted),
        routes: shape.iter().map(|(_, n)| n).sum(),
        shape,
        shape_source,
        build_s,
        table_bytes: table.bytes(),
        fails_percent: done.fails_percent,
        dpdk_fails_percent: done.peer_runs.first().map(|p| p.fails_percent),
        lookups: done.lookups,
    })
}

benchmark!(LpmBench, render_table);

fn render_table(b: &LpmBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, {} repetitions (medians [min–max])",
        b.header.title("lpm"),
        b.header.repeat
    );
    let _ = writeln!(
        s,
        "table             {} IPv4 routes shaped as {}; built in {:.2} s, {} MiB; {:.1}% of random addresses have no route\n",
        b.routes,
        b.shape_source,
        b.build_s,
        b.table_bytes >> 20,
        b.fails_percent
    );
    write_lookups(
        &mut s,
        &LookupFigures {
            header: &b.header,
            sfclab_notes: [" (one address at a time)", " (bursts of 32)"],
            peer: ["rte_lpm", "rte_lpm_lookup", "rte_lpm_lookup_bulk, 32"],
            lookups: &b.lookups,
        },
    );
    s
}

/// What the LPM benchmarks (IPv4 and IPv6) print after their table's line.
pub(crate) struct LookupFigures<'a> {
    pub header: &'a crate::BenchHeader,
    /// After sfclab's single and bulk figures.
    pub sfclab_notes: [&'a str; 2],
    /// The peer, and its single and bulk calls.
    pub peer: [&'a str; 3],
    pub lookups: &'a Lookups,
}

/// sfclab's lookups, the peer's (or why it was not measured), the ratio, the footer.
pub(crate) fn write_lookups(s: &mut String, f: &LookupFigures) {
    let l = f.lookups;
    let (single, bulk, peer_single, peer_bulk) = (&l.single_runs, &l.bulk_runs, &l.dpdk_single_runs, &l.dpdk_bulk_runs);
    let [peer, single_call, bulk_call] = f.peer;
    let cycles = |runs: &[f64]| crate::with_range(runs, 1);
    let _ = writeln!(
        s,
        "sfclab single     {} TSC cycles/lookup{}",
        cycles(single),
        f.sfclab_notes[0]
    );
    let _ = writeln!(
        s,
        "sfclab bulk       {} TSC cycles/lookup{}",
        cycles(bulk),
        f.sfclab_notes[1]
    );
    match ((l.single_ratio, l.bulk_ratio), l.dpdk_skipped.as_deref()) {
        ((Some(rs), Some(rb)), _) => {
            let _ = writeln!(
                s,
                "{:<18}{} TSC cycles/lookup ({single_call})",
                format!("{peer} single"),
                cycles(peer_single)
            );
            let _ = writeln!(
                s,
                "{:<18}{} TSC cycles/lookup ({bulk_call})",
                format!("{peer} bulk"),
                cycles(peer_bulk)
            );
            let _ = writeln!(
                s,
                "ratio             sfclab/{peer} = {rs:.2}x single, {rb:.2}x bulk (below 1: sfclab is cheaper)"
            );
        }
        (_, Some(why)) => {
            let _ = writeln!(s, "peer              skipped: {why}");
        }
        _ => {
            let _ = writeln!(s, "peer              not measured (--peer none)");
        }
    }
    let wide = [single, bulk, peer_single, peer_bulk]
        .iter()
        .filter(|v| crate::is_wide(v))
        .count();
    s.push_str(&crate::footer(wide, f.header.interrupted, f.header.repeat));
}

/// sfclab's lookups against the peer's, every repetition: what `lpm` and `lpm6` report
/// alike.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Lookups {
    /// TSC cycles per lookup, one address at a time: median and every repetition.
    pub single_cycles: f64,
    pub single_runs: Vec<f64>,
    /// TSC cycles per address in bursts.
    pub bulk_cycles: f64,
    pub bulk_runs: Vec<f64>,
    pub dpdk_single_cycles: Option<f64>,
    pub dpdk_single_runs: Vec<f64>,
    pub dpdk_bulk_cycles: Option<f64>,
    pub dpdk_bulk_runs: Vec<f64>,
    pub dpdk_skipped: Option<String>,
    /// sfclab / peer cycles (below 1: sfclab is cheaper).
    pub single_ratio: Option<f64>,
    pub bulk_ratio: Option<f64>,
}

/// One run of a peer's lookup benchmark (dpdk-test's `lpm*_perf_autotest`).
pub(crate) type PeerRun<'a, P> = dyn FnMut() -> Result<P, String> + 'a;

/// What [`lookup_rounds`] measured.
pub(crate) struct LookupRounds<P> {
    pub lookups: Lookups,
    /// Every whole round's peer run, the one before the table first.
    pub peer_runs: Vec<P>,
    /// sfclab's misses in its last round, percent.
    pub fails_percent: f64,
    /// Whole rounds.
    pub repeat: usize,
    pub interrupted: bool,
}

/// An LPM benchmark's rounds once its table is built: each round the peer (from the
/// second on: the first ran before the table, for its shape) then sfclab's lookups
/// (`sfclab(round)`: single and bulk cycles, misses percent; `None` when stopped).
/// Whole rounds only; `progress` is told each step; `stop` (Ctrl-C) ends them early.
pub(crate) fn lookup_rounds<P>(
    repeat: usize,
    mut peer: Option<(&str, &mut PeerRun<P>)>,
    mut peer_runs: Vec<P>,
    mut skipped: Option<String>,
    cycles_of: fn(&P) -> (f64, f64),
    mut sfclab: impl FnMut(usize) -> Option<(f64, f64, f64)>,
    (progress, stop): (&mut Progress, &Stop),
) -> LookupRounds<P> {
    let (mut single_runs, mut bulk_runs, mut fails) = (Vec::new(), Vec::new(), 0.0);
    let mut rounds = Rounds::new(repeat, stop);
    while rounds.start_next() {
        let r = rounds.completed();
        if let Some((label, run)) = peer.as_mut()
            && skipped.is_none()
            && r > 0
            && rounds.go_on()
        {
            progress.next(label);
            match run() {
                Ok(p) => peer_runs.push(p),
                Err(_) if stop.requested() => rounds.cut(),
                Err(e) => skipped = Some(e),
            }
        }
        if !rounds.go_on() {
            break;
        }
        progress.next("sfclab lookups");
        let Some((s, b, f)) = sfclab(r) else {
            rounds.cut();
            break;
        };
        single_runs.push(s);
        bulk_runs.push(b);
        fails = f;
    }
    for runs in [&mut single_runs, &mut bulk_runs] {
        rounds.keep_completed(runs);
    }
    rounds.keep_completed(&mut peer_runs);
    let dpdk_single_runs: Vec<f64> = peer_runs.iter().map(|p| cycles_of(p).0).collect();
    let dpdk_bulk_runs: Vec<f64> = peer_runs.iter().map(|p| cycles_of(p).1).collect();
    let (dpdk_single, dpdk_bulk) = (median_if_any(&dpdk_single_runs), median_if_any(&dpdk_bulk_runs));
    let (single, bulk) = (median(&single_runs), median(&bulk_runs));
    LookupRounds {
        repeat: single_runs.len(),
        interrupted: rounds.interrupted(),
        fails_percent: fails,
        lookups: Lookups {
            single_cycles: single,
            single_runs,
            bulk_cycles: bulk,
            bulk_runs,
            dpdk_single_cycles: dpdk_single,
            dpdk_single_runs,
            dpdk_bulk_cycles: dpdk_bulk,
            dpdk_bulk_runs,
            dpdk_skipped: skipped,
            single_ratio: dpdk_single.map(|d| single / d),
            bulk_ratio: dpdk_bulk.map(|d| bulk / d),
        },
        peer_runs,
    }
}

pub static BENCH: crate::registry::Entry<crate::registry::TableFlags, LpmBench> = crate::registry::Entry {
    name: "lpm",
    schema: LPM_SCHEMA,
    about: "IPv4 longest-prefix match (the router's DIR-24-8) against DPDK's rte_lpm (dpdk-test lpm_perf_autotest) on a table of the same size and shape, same run",
    run: |f, stop, progress| {
        if f.repeat == 0 {
            return Err(crate::registry::BenchError::Usage(
                "need at least one repetition".into(),
            ));
        }
        let args = LpmArgs {
            repeat: f.repeat,
            core: f.core,
            peer: f.peer == crate::registry::DpdkPeer::Dpdk,
        };
        Ok(lpm(&args, progress, stop)?)
    },
    figure: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The measurement counts what it says: on a table with only a default route, every
    /// lookup hits; on an empty one, every lookup misses.
    #[test]
    fn misses_are_counted() {
        let all = Lpm4::new(&[sfclab_nf::tables::lpm::Route {
            prefix: 0,
            len: 0,
            hop: 1,
        }])
        .unwrap();
        assert_eq!(measure(&all, 1, &Stop::new()).unwrap().2, 0.0);
        let none = Lpm4::new(&[]).unwrap();
        assert_eq!(measure(&none, 1, &Stop::new()).unwrap().2, 100.0);
    }
}
