//! The firewall's 5-tuple classifier against DPDK's `rte_acl`, measured the way
//! `dpdk-test-acl` measures it, in the same run: the same ClassBench rule file and
//! trace (written by sfclab, read by both), classified in steps of 256 headers, TSC
//! cycles per header. rte_acl runs twice: with its default method (the widest SIMD the
//! CPU has) and scalar. sfclab runs its bit-vector classifier (the firewall's) and tuple
//! space search. Before timing, every header's first matching rule from rte_acl is
//! compared with sfclab's: a disagreement is a failed benchmark, not a figure.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_core::tsc;
use sfclab_nf::tables::acl::{BitVector, Key, TupleSpace, classbench};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::{Rounds, median, median_if_any, on_core};
use std::fmt::Write as _;

pub const ACL_SCHEMA: &str = "sfclab.bench.acl/1";

/// Headers classified per call, as `dpdk-test-acl`'s default `--tracestep`.
const STEP: usize = 256;

#[derive(Debug, Clone)]
pub struct AclArgs {
    /// Rule set sizes to measure.
    pub rules: Vec<usize>,
    /// Headers in the trace.
    pub trace: usize,
    pub repeat: usize,
    pub core: Option<usize>,
    pub peer: bool,
    pub seed: u64,
    /// Headers classified per measurement, at least (the trace is repeated).
    pub headers: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AclBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    /// How the rules and trace were made.
    pub workload: String,
    pub trace_headers: usize,
    pub points: Vec<AclPoint>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AclPoint {
    pub rules: usize,
    /// Trace headers some rule matches, percent.
    pub matched_percent: f64,
    /// sfclab's bit vectors: build seconds, bytes, distinct rows.
    pub build_s: f64,
    pub memory_bytes: usize,
    pub distinct_rows: usize,
    /// TSC cycles per header: median and every repetition.
    pub bitvector_cycles: f64,
    pub bitvector_runs: Vec<f64>,
    pub tuple_space_cycles: f64,
    pub tuple_space_runs: Vec<f64>,
    /// Distinct masks of tuple space search (hash tables probed at most).
    pub tuple_space_tables: usize,
    /// rte_acl with its default method.
    pub dpdk_method: Option<String>,
    pub dpdk_cycles: Option<f64>,
    pub dpdk_runs: Vec<f64>,
    pub dpdk_scalar_cycles: Option<f64>,
    pub dpdk_scalar_runs: Vec<f64>,
    /// Headers whose first matching rule rte_acl and sfclab agree on, of those compared.
    pub agreed: Option<usize>,
    pub compared: Option<usize>,
    pub dpdk_skipped: Option<String>,
    /// sfclab bit vectors / rte_acl default and scalar (below 1: sfclab is cheaper).
    pub ratio: Option<f64>,
    pub scalar_ratio: Option<f64>,
}

/// Cycles per header over at least `min_headers` headers, in steps of [`STEP`].
fn cycles_per_header(
    trace: &[Key],
    min_headers: usize,
    mut classify: impl FnMut(&[Key], &mut [Option<usize>]),
    stop: &Stop,
) -> Option<f64> {
    let mut out = vec![None; STEP];
    let mut done = 0;
    let t0 = tsc::now();
    while done < min_headers {
        for (i, chunk) in trace.chunks(STEP).enumerate() {
            // One load per 64 bursts, next to thousands of classifications: a pass
            // of tuple space search over a big rule set takes seconds.
            if i % 64 == 0 && stop.requested() {
                return None;
            }
            classify(chunk, &mut out[..chunk.len()]);
            std::hint::black_box(&out);
        }
        done += trace.len();
    }
    Some((tsc::now() - t0) as f64 / done as f64)
}

pub fn acl(args: &AclArgs, progress: &mut Progress, stop: &Stop) -> Result<AclBench, String> {
    let core = args.core.or_else(sfclab_runtime::placement::default_chain_core);
    let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let per_point = 1 + args.repeat * if args.peer { 4 } else { 2 };
    progress.plan(args.rules.len() * per_point);
    let mut interrupted = false;
    let mut points = Vec::new();
    for &n in &args.rules {
        progress.working(&format!("{n} rules: building"));
        let set = RuleSet::build(args, n, dir.path())?;
        progress.advance();
        let mut point = set.point();
        if args.peer {
            set.check_against_rte_acl(core.unwrap_or(0), &mut point, stop)?;
        }
        let rounds = measure_rounds(args, &set, (core, &mut point), progress, stop);
        if rounds.interrupted() {
            interrupted = true;
            if rounds.completed() == 0 {
                break;
            }
        }
        point.bitvector_cycles = median(&point.bitvector_runs);
        point.tuple_space_cycles = median(&point.tuple_space_runs);
        point.dpdk_cycles = median_if_any(&point.dpdk_runs);
        point.dpdk_scalar_cycles = median_if_any(&point.dpdk_scalar_runs);
        point.ratio = point.dpdk_cycles.map(|d| point.bitvector_cycles / d);
        point.scalar_ratio = point.dpdk_scalar_cycles.map(|d| point.bitvector_cycles / d);
        points.push(point);
        if interrupted {
            break;
        }
    }
    Ok(AclBench {
        header: crate::BenchHeader::new(
            ACL_SCHEMA,
            points.iter().map(|p| p.bitvector_runs.len()).min().unwrap_or(0),
            interrupted,
        ),
        workload: format!(
            "ClassBench-style rules (acl1-like traits, sfclab's generator, seed {}) and a trace of headers drawn inside uniformly picked rules; both classifiers read the same files",
            args.seed
        ),
        trace_headers: args.trace,
        points,
    })
}

/// One point's rules and trace, in files both classifiers read, and sfclab's two
/// classifiers built over the rules.
struct RuleSet {
    n: usize,
    rules_path: PathBuf,
    trace_path: PathBuf,
    trace: Vec<Key>,
    bv: BitVector,
    build_s: f64,
    ts: TupleSpace,
    /// What the bit vectors classified each header of the trace as.
    ours: Vec<Option<usize>>,
}

impl RuleSet {
    fn build(args: &AclArgs, n: usize, dir: &Path) -> Result<RuleSet, String> {
        let rules = classbench::generate_rules(n, args.seed ^ n as u64);
        let trace = classbench::generate_trace(&rules, args.trace, args.seed ^ !(n as u64));
        let (rules_path, trace_path) = (dir.join(format!("rules-{n}")), dir.join(format!("trace-{n}")));
        let write = |p: &Path, text: String| std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()));
        write(&rules_path, classbench::format_rules(&rules))?;
        write(&trace_path, classbench::format_trace(&trace))?;
        let started = Instant::now();
        let bv = BitVector::new(&rules);
        let build_s = started.elapsed().as_secs_f64();
        let ts = TupleSpace::new(&rules);
        let mut ours = vec![None; trace.len()];
        bv.classify_bulk(&trace, &mut ours);
        Ok(RuleSet {
            n,
            rules_path,
            trace_path,
            trace,
            bv,
            build_s,
            ts,
            ours,
        })
    }

    /// The point before any measurement: what the rule set is.
    fn point(&self) -> AclPoint {
        let matched = self.ours.iter().filter(|r| r.is_some()).count();
        AclPoint {
            rules: self.n,
            matched_percent: matched as f64 * 100.0 / self.trace.len().max(1) as f64,
            build_s: self.build_s,
            memory_bytes: self.bv.memory_bytes(),
            distinct_rows: self.bv.distinct_rows(),
            bitvector_cycles: f64::NAN,
            bitvector_runs: Vec::new(),
            tuple_space_cycles: f64::NAN,
            tuple_space_runs: Vec::new(),
            tuple_space_tables: self.ts.tables(),
            dpdk_method: None,
            dpdk_cycles: None,
            dpdk_runs: Vec::new(),
            dpdk_scalar_cycles: None,
            dpdk_scalar_runs: Vec::new(),
            agreed: None,
            compared: None,
            dpdk_skipped: None,
            ratio: None,
            scalar_ratio: None,
        }
    }

    /// rte_acl classifies the same trace: every header as the bit vectors did, or the
    /// benchmark fails; a peer that does not run is noted and skipped.
    fn check_against_rte_acl(&self, peer_core: usize, point: &mut AclPoint, stop: &Stop) -> Result<(), String> {
        let theirs = match sfclab_peers::dpdk_acl::acl_results(&self.rules_path, &self.trace_path, peer_core, &|| {
            stop.requested()
        }) {
            Ok(theirs) => theirs,
            Err(e) => {
                point.dpdk_skipped = Some(e);
                return Ok(());
            }
        };
        let ours = &self.ours;
        let compared = theirs.len().min(ours.len());
        let agreed = theirs.iter().zip(ours).filter(|(a, b)| a == b).count();
        if theirs.len() != ours.len() || agreed != compared {
            let first = theirs.iter().zip(ours).position(|(a, b)| a != b);
            return Err(format!(
                "{} rules: rte_acl and sfclab disagree on {} of {compared} headers (rte_acl classified {} of {}; first difference at header {first:?})",
                self.n,
                compared - agreed,
                theirs.len(),
                ours.len(),
            ));
        }
        point.agreed = Some(agreed);
        point.compared = Some(compared);
        Ok(())
    }
}

/// The point's interleaved rounds: rte_acl (its default method, then scalar), sfclab's
/// bit vectors, its tuple space search. Whole rounds are kept.
fn measure_rounds(
    args: &AclArgs,
    set: &RuleSet,
    (core, point): (Option<usize>, &mut AclPoint),
    progress: &mut Progress,
    stop: &Stop,
) -> Rounds {
    let (n, trace) = (set.n, &set.trace);
    let min_headers = args.headers.max(trace.len());
    let iterations = min_headers.div_ceil(trace.len().max(1)) as u32;
    let mut rounds = Rounds::new(args.repeat, stop);
    'rounds: while rounds.start_next() {
        if args.peer && point.dpdk_skipped.is_none() {
            for method in [None, Some("scalar")] {
                if !rounds.go_on() {
                    break 'rounds;
                }
                progress.working(&format!("{n} rules: rte_acl ({})", method.unwrap_or("default method")));
                let peer = sfclab_peers::dpdk_acl::acl_perf(
                    &set.rules_path,
                    &set.trace_path,
                    core.unwrap_or(0),
                    iterations,
                    method,
                    &|| stop.requested(),
                );
                match (peer, method) {
                    (Ok(p), None) => {
                        point.dpdk_method = Some(p.method);
                        point.dpdk_runs.push(p.cycles_per_packet);
                    }
                    (Ok(p), Some(_)) => point.dpdk_scalar_runs.push(p.cycles_per_packet),
                    (Err(_), _) if stop.requested() => rounds.cut(),
                    (Err(e), None) => point.dpdk_skipped = Some(e),
                    // Not every build has the scalar method; its figure is left out.
                    (Err(_), Some(_)) => {}
                }
                progress.advance();
            }
        }
        if !rounds.go_on() {
            break;
        }
        progress.working(&format!("{n} rules: sfclab bit vectors"));
        match on_core(core, || {
            cycles_per_header(trace, min_headers, |k, o| set.bv.classify_bulk(k, o), stop)
        }) {
            Some(c) => point.bitvector_runs.push(c),
            None => {
                rounds.cut();
                break;
            }
        }
        progress.advance();
        if !rounds.go_on() {
            break;
        }
        progress.working(&format!("{n} rules: sfclab tuple space search"));
        // Tuple space search is slow on big rule sets: fewer headers, same trace.
        let tuple_space = on_core(core, || {
            cycles_per_header(
                trace,
                trace.len(),
                |keys, out| {
                    for (k, o) in keys.iter().zip(out) {
                        *o = set.ts.classify(k);
                    }
                },
                stop,
            )
        });
        match tuple_space {
            Some(c) => point.tuple_space_runs.push(c),
            None => {
                rounds.cut();
                break;
            }
        }
        progress.advance();
    }
    for runs in [
        &mut point.bitvector_runs,
        &mut point.tuple_space_runs,
        &mut point.dpdk_runs,
        &mut point.dpdk_scalar_runs,
    ] {
        rounds.keep_completed(runs);
    }
    rounds
}

benchmark!(AclBench, render_table);

fn render_table(b: &AclBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, {} repetitions (medians [min–max])",
        b.header.title("acl"),
        b.header.repeat
    );
    let _ = writeln!(s, "workload: {}; {} headers\n", b.workload, b.trace_headers);
    let _ = writeln!(
        s,
        "{:>6}  {:>22}  {:>22}  {:>22}  {:>10}  {:>7}  {:>7}  {:>9}  checked",
        "rules", "bit vectors cyc/hdr", "rte_acl cyc/hdr", "rte_acl scalar", "tuple sp.", "ratio", "scalar", "memory",
    );
    let mut wide = 0;
    for p in &b.points {
        wide += [&p.bitvector_runs, &p.dpdk_runs, &p.dpdk_scalar_runs]
            .iter()
            .filter(|v| crate::is_wide(v))
            .count();
        let opt = |v: &[f64]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                crate::with_range(v, 1)
            }
        };
        let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}x"));
        let checked = match (p.agreed, p.compared) {
            (Some(a), Some(c)) => format!("{a}/{c} agree"),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:>6}  {:>22}  {:>22}  {:>22}  {:>10.0}  {:>7}  {:>7}  {:>6} KiB  {checked}",
            p.rules,
            crate::with_range(&p.bitvector_runs, 1),
            opt(&p.dpdk_runs),
            opt(&p.dpdk_scalar_runs),
            p.tuple_space_cycles,
            ratio(p.ratio),
            ratio(p.scalar_ratio),
            p.memory_bytes >> 10,
        );
    }
    if let Some(m) = b.points.iter().find_map(|p| p.dpdk_method.as_ref()) {
        let _ = writeln!(
            s,
            "\nrte_acl's default method here: {m}. ratio = sfclab bit vectors / rte_acl (below 1: sfclab is cheaper); tuple sp. = tuple space search, cycles/header."
        );
    }
    if let Some(why) = b.points.iter().find_map(|p| p.dpdk_skipped.as_ref()) {
        let _ = writeln!(s, "peer skipped: {why}");
    }
    s.push_str(&crate::footer(wide, b.header.interrupted, b.header.repeat));
    s
}

/// `sfclab bench acl`'s flags.
#[derive(clap::Args)]
pub struct AclFlags {
    /// Rule set sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    rules: Vec<usize>,
    /// Headers in the trace.
    #[arg(long, default_value_t = 65536)]
    trace: usize,
    /// Headers classified per measurement, at least (the trace repeats).
    #[arg(long, default_value_t = 4 << 20)]
    headers: usize,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Core to measure on (default: the last core this process may use).
    #[arg(long)]
    core: Option<usize>,
    /// Seed of the rule and trace generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "dpdk")]
    peer: crate::registry::DpdkPeer,
}

pub static BENCH: crate::registry::Entry<AclFlags, AclBench> = crate::registry::Entry {
    name: "acl",
    schema: ACL_SCHEMA,
    about: "The firewall's 5-tuple classifier (bit vectors; tuple space search beside it) against DPDK's rte_acl (dpdk-test-acl) on the same ClassBench-style rules and trace, same run; every header's match is checked against rte_acl's first",
    run: |f, stop, progress| {
        if f.repeat == 0 || f.rules.is_empty() || f.trace == 0 {
            return Err(crate::registry::BenchError::Usage(
                "need at least one repetition, one rule set size and one trace header".into(),
            ));
        }
        let args = AclArgs {
            rules: f.rules,
            trace: f.trace,
            repeat: f.repeat,
            core: f.core,
            peer: f.peer == crate::registry::DpdkPeer::Dpdk,
            seed: f.seed,
            headers: f.headers,
        };
        Ok(acl(&args, progress, stop)?)
    },
    figure: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's own run without the peer: figures are positive, every header of a
    /// ClassBench-style trace matches a rule (each was drawn inside one).
    #[test]
    fn measures_without_the_peer() {
        let args = AclArgs {
            rules: vec![100],
            trace: 2048,
            repeat: 1,
            core: None,
            peer: false,
            seed: 7,
            headers: 4096,
        };
        let b = acl(&args, &mut Progress::quiet(), &Stop::new()).unwrap();
        let p = &b.points[0];
        assert_eq!(p.matched_percent, 100.0);
        assert!(p.bitvector_cycles > 0.0 && p.tuple_space_cycles > 0.0);
        assert!(p.ratio.is_none() && p.agreed.is_none());
    }
}
