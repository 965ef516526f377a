//! IPv6 longest-prefix match against DPDK's `rte_lpm6`, measured the way DPDK's
//! `lpm6_perf_autotest` measures it, in the same run: a table with the same number of
//! routes per prefix length (read from the peer's own output), 100 addresses inside each
//! route (random bits past the prefix, so every lookup hits), 1024 rounds over them, TSC
//! cycles of the lookups alone, one address at a time and the whole set in bulk. Both
//! tables walk a 24-bit first level, then one byte per level.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_core::tsc;
use sfclab_nf::tables::lpm::{Lpm6, Route, SplitMix, random_table6};

use crate::on_core;
use std::fmt::Write as _;

pub const LPM6_SCHEMA: &str = "sfclab.bench.lpm6/1";

const ROUNDS: usize = 1 << 10;
/// Addresses per route, as `lpm6_perf_autotest` (NUM_IPS_ENTRIES = routes * 100).
const PER_ROUTE: usize = 100;

#[derive(Debug, Clone)]
pub struct Lpm6Args {
    pub repeat: usize,
    pub core: Option<usize>,
    pub peer: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Lpm6Bench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub routes: usize,
    /// Routes per prefix length.
    pub shape: Vec<(u8, usize)>,
    pub shape_source: String,
    pub table_bytes: usize,
    /// Addresses looked up per round.
    pub addresses: usize,
    /// Lookups that found no route, percent (0: every address lies inside a route).
    pub fails_percent: f64,
    /// The lookups, sfclab's and rte_lpm6's.
    #[serde(flatten)]
    pub lookups: crate::lpm::Lookups,
}

/// 100 addresses inside each route, in route order (as DPDK's generator lays them out).
fn addresses(routes: &[Route<u128>], seed: u64) -> Vec<u128> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::with_capacity(routes.len() * PER_ROUTE);
    for r in routes {
        let keep = if r.len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(r.len))
        };
        for _ in 0..PER_ROUTE {
            let random = u128::from(rng.next()) << 64 | u128::from(rng.next());
            out.push(r.prefix & keep | random & !keep);
        }
    }
    out
}

/// Cycles per lookup (single, bulk) and the share of misses.
fn measure(table: &Lpm6, addrs: &[u128], stop: &Stop) -> Option<(f64, f64, f64)> {
    let mut hops = vec![None; addrs.len()];
    let (mut single, mut bulk, mut misses) = (0u64, 0u64, 0usize);
    for _ in 0..ROUNDS {
        if stop.requested() {
            return None;
        }
        let t0 = tsc::now();
        let mut found = 0u64;
        for &a in addrs {
            found += u64::from(table.lookup(a).is_some());
        }
        let t1 = tsc::now();
        table.lookup_bulk(addrs, &mut hops);
        let t2 = tsc::now();
        single += t1 - t0;
        bulk += t2 - t1;
        misses += addrs.len() - std::hint::black_box(found) as usize;
        std::hint::black_box(&hops);
    }
    let n = (ROUNDS * addrs.len()) as f64;
    Some((single as f64 / n, bulk as f64 / n, misses as f64 / n * 100.0))
}

/// lpm6_perf_autotest's table when the peer is not there: 1,000 routes over lengths 1..=128.
fn fallback_shape() -> Vec<(u8, usize)> {
    // 7 routes per length, one more for the first 104 lengths.
    (1..=128u8).map(|l| (l, 7 + usize::from(l <= 104))).collect()
}

pub fn lpm6(args: &Lpm6Args, progress: &mut Progress, stop: &Stop) -> Result<Lpm6Bench, String> {
    let core = args.core.or_else(sfclab_runtime::placement::default_chain_core);
    progress.plan(args.repeat * if args.peer { 2 } else { 1 });
    let mut peer_runs = Vec::new();
    let mut skipped = None;
    let run_peer = |peer_runs: &mut Vec<_>, skipped: &mut Option<String>| match sfclab_peers::dpdk_test::lpm6_perf(
        core.unwrap_or(0),
        &|| stop.requested(),
    ) {
        Ok(p) => peer_runs.push(p),
        Err(_) if stop.requested() => {}
        Err(e) => *skipped = Some(e),
    };
    // The peer first: its table's shape is the one sfclab builds.
    if args.peer {
        progress.next("dpdk-test lpm6_perf_autotest");
        run_peer(&mut peer_runs, &mut skipped);
    }
    let (shape, shape_source) = match peer_runs.first() {
        Some(p) => (
            p.shape.clone(),
            "dpdk lpm6_perf_autotest's table (same run)".to_string(),
        ),
        None => (
            fallback_shape(),
            "1,000 routes over lengths 1-128 (lpm6_perf_autotest's size)".to_string(),
        ),
    };
    // Ctrl-C during the peer: no table is built for rounds that will not run.
    if stop.requested() {
        return Err(crate::INTERRUPTED_BEFORE_A_ROUND.into());
    }
    let routes = random_table6(&shape, 1 << 16, 42);
    let table = Lpm6::new(&routes)?;
    let addrs = addresses(&routes, 7);
    let mut peer = || sfclab_peers::dpdk_test::lpm6_perf(core.unwrap_or(0), &|| stop.requested());
    let done = crate::lpm::lookup_rounds(
        args.repeat,
        args.peer.then_some(("dpdk-test lpm6_perf_autotest", &mut peer as _)),
        peer_runs,
        skipped,
        |p| (p.single_cycles, p.bulk_cycles),
        |_| on_core(core, || measure(&table, &addrs, stop)),
        (progress, stop),
    );
    Ok(Lpm6Bench {
        header: crate::BenchHeader::new(LPM6_SCHEMA, done.repeat, done.interrupted),
        routes: routes.len(),
        shape,
        shape_source,
        table_bytes: table.bytes(),
        addresses: addrs.len(),
        fails_percent: done.fails_percent,
        lookups: done.lookups,
    })
}

benchmark!(Lpm6Bench, render_table);

fn render_table(b: &Lpm6Bench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, {} repetitions (medians [min–max])",
        b.header.title("lpm6"),
        b.header.repeat
    );
    let _ = writeln!(
        s,
        "table             {} IPv6 routes shaped as {}; {} KiB; {} addresses inside the routes, {:.1}% missed\n",
        b.routes,
        b.shape_source,
        b.table_bytes >> 10,
        b.addresses,
        b.fails_percent
    );
    crate::lpm::write_lookups(
        &mut s,
        &crate::lpm::LookupFigures {
            header: &b.header,
            sfclab_notes: ["", ""],
            peer: ["rte_lpm6", "rte_lpm6_lookup", "rte_lpm6_lookup_bulk_func"],
            lookups: &b.lookups,
        },
    );
    s
}

pub static BENCH: crate::registry::Entry<crate::registry::TableFlags, Lpm6Bench> = crate::registry::Entry {
    name: "lpm6",
    schema: LPM6_SCHEMA,
    about: "IPv6 longest-prefix match (the router's 24-8-8... table) against DPDK's rte_lpm6 (dpdk-test lpm6_perf_autotest) on a table of the same shape, same run",
    run: |f, stop, progress| {
        if f.repeat == 0 {
            return Err(crate::registry::BenchError::Usage(
                "need at least one repetition".into(),
            ));
        }
        let args = Lpm6Args {
            repeat: f.repeat,
            core: f.core,
            peer: f.peer == crate::registry::DpdkPeer::Dpdk,
        };
        Ok(lpm6(&args, progress, stop)?)
    },
    figure: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generated address lies inside its route, so no lookup misses; the fallback
    /// table has lpm6_perf_autotest's 1,000 routes.
    #[test]
    fn addresses_hit_and_the_fallback_has_a_thousand_routes() {
        let shape = fallback_shape();
        assert_eq!(shape.iter().map(|(_, n)| n).sum::<usize>(), 1000);
        let routes = random_table6(&shape[..20], 16, 1);
        let table = Lpm6::new(&routes).unwrap();
        let addrs = addresses(&routes, 2);
        assert_eq!(addrs.len(), routes.len() * PER_ROUTE);
        assert!(addrs.iter().all(|&a| table.lookup(a).is_some()));
    }
}
