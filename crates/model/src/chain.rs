//! The RC graph of one chain as placed and chained, priced by a calibration: every core
//! the chain uses with the cycles each packet costs it, the tester where one is between
//! the chain and its traffic, and a NIC profile's line, engine and bus where given; the
//! maximum throughput is the least capacity, its resource the bottleneck (seed 000
//! Section V, seed 002 Section III).

use crate::calibration::Calibration;
use crate::rc::{HardwareProfile, Resource};
use serde::Serialize;
use std::ops::Range;

/// How the chain runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// Generator, NFs and sink in one loop on one core (function calls).
    Compound,
    /// Stages (contiguous NFs) on cores, joined by rings; the generator on the first
    /// stage's core, the sink on the last's.
    Pipeline { stages: Vec<(Range<usize>, usize)> },
    /// Every NF a hop in a namespace of its own (`veth`, `nic-switch`, `linux`, `ovs`),
    /// all hops on the DUT's core, the tester on another core.
    Hops { technology: String },
}

/// A chain to predict.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainModel {
    /// Each NF's calibration key, in order.
    pub nfs: Vec<String>,
    /// Frame sizes (with FCS) and their shares of the traffic (one size: `[(64, 1.0)]`).
    pub frames: Vec<(f64, f64)>,
    pub layout: Layout,
}

/// One term of a core's sum, for the reader to check.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Term {
    pub what: String,
    pub cycles: f64,
    /// The NF this term prices (0-based position in the chain), if it is one.
    pub nf: Option<usize>,
}

/// A core and what one packet costs it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CoreCost {
    pub core: String,
    pub terms: Vec<Term>,
    pub cycles_per_packet: f64,
}

/// What the model says of a chain.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ChainPrediction {
    pub cores: Vec<CoreCost>,
    /// Every resource with its capacity (cores, tester, NIC line/engine/bus).
    pub resources: Vec<Resource>,
    /// The least capacity, packets per second.
    pub max_pps: f64,
    pub bottleneck: String,
    /// What happens when more is offered than `max_pps`, per seed 002.
    pub overload: Overload,
}

/// The shape of the throughput past the maximum.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Overload {
    /// `flat` (the excess is dropped where it enters, before any work is spent on it) or
    /// `falling` (some is dropped inside the chain, after cycles were spent on it).
    pub shape: String,
    pub why: String,
    /// Where it falls and the calibration has the software drops' cost: what the chain
    /// delivers offered all sfclab's tester sends, `f_CPU / (C_total,n + C_SWdrops,n)`
    /// (seed 002, equation 2), packets per second; at most the tester's rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated_pps: Option<f64>,
    /// `C_SWdrops,n` there: cycles per frame delivered spent on frames dropped inside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software_drops_cycles: Option<f64>,
}

/// What a chain of hops in namespaces chained by `technology` does with more than it
/// forwards. Where it falls, what it delivers saturated is less than its maximum: the
/// maximum is measured at the offered rate that delivers most.
pub fn hops_overload(technology: &str) -> Overload {
    match technology {
        "linux" => Overload::new(
            "falling",
            "the kernel drops at a hop's backlog inside the chain, after the hops before it forwarded the frame (seed 002 Section IV)",
        ),
        _ => Overload::new(
            "flat",
            "the hops' rings fill at the first hop: the excess is dropped at the chain's entry",
        ),
    }
}

impl Overload {
    fn new(shape: &str, why: &str) -> Overload {
        Overload {
            shape: shape.into(),
            why: why.into(),
            saturated_pps: None,
            software_drops_cycles: None,
        }
    }

    /// Past the maximum, throughput falls (work is spent on frames dropped later).
    pub fn falls(&self) -> bool {
        self.shape == "falling"
    }
}

impl ChainPrediction {
    /// Each resource's utilisation at `offered_pps` (1.0: saturated; above: overloaded).
    pub fn utilisation(&self, offered_pps: f64) -> Vec<(String, f64)> {
        self.resources
            .iter()
            .map(|r| (r.name.clone(), offered_pps / r.max_pps))
            .collect()
    }
}

/// Where an NF runs, for its cost.
#[derive(Clone, Copy)]
enum NfAt {
    /// A compound loop (`cycles`).
    Loop,
    /// A pipeline's stage (`in_stage`).
    Stage,
    /// The first of a stage whose frames come from another core (`across`).
    FirstAcross,
}

/// The traffic-weighted mean of `f` over the chain's frame sizes.
pub(crate) fn mean_over(frames: &[(f64, f64)], f: impl Fn(f64) -> Result<f64, String>) -> Result<f64, String> {
    let total: f64 = frames.iter().map(|(_, w)| w).sum();
    if frames.is_empty() || total.is_nan() || total <= 0.0 {
        return Err("the chain's traffic has no frame size".into());
    }
    let mut sum = 0.0;
    for &(size, weight) in frames {
        sum += weight * f(size)?;
    }
    Ok(sum / total)
}

fn core(name: String, terms: Vec<Term>) -> CoreCost {
    CoreCost {
        cycles_per_packet: terms.iter().map(|t| t.cycles).sum(),
        core: name,
        terms,
    }
}

/// Prices `chain` with `cal`; `hardware`, when given, adds its NIC's line, engine and bus
/// (software-linked: the chain's traffic crosses them once).
pub fn predict_chain(
    cal: &Calibration,
    chain: &ChainModel,
    hardware: Option<&HardwareProfile>,
) -> Result<ChainPrediction, String> {
    if chain.nfs.is_empty() {
        return Err("the chain has no NF".into());
    }
    let pricing = Pricing { cal, chain };
    // Cycles as calibrated here, at the profile's clock where it names one (seed 000's
    // 2.0 GHz Xeon); the calibration's TSC otherwise.
    let hz = match hardware {
        Some(hw) if hw.cpu_hz > 0.0 => hw.cpu_hz,
        _ => cal.machine.tsc_hz,
    };
    let mut extra: Vec<Resource> = Vec::new();
    let (cores, overload) = match &chain.layout {
        Layout::Compound => pricing.compound()?,
        Layout::Pipeline { stages } => pricing.pipeline(stages)?,
        Layout::Hops { technology } => {
            let (dut, overload, tester) = pricing.hops(technology, hardware.is_none(), hz)?;
            extra.extend(tester);
            (vec![dut], overload)
        }
    };
    // Each term is at least zero, but a short calibration on a loaded host can leave
    // every term of a core at zero (differences of runs, clamped): a core that costs
    // nothing is the same failed measurement as a term below zero.
    if let Some(free) = cores
        .iter()
        .find(|c| !(c.cycles_per_packet.is_finite() && c.cycles_per_packet > 0.0))
    {
        return Err(format!(
            "{} comes to {} cycles/packet from this calibration ({}): a core that costs nothing is a failed measurement, not a price; calibrate again (`sfclab model calibrate`)",
            free.core,
            free.cycles_per_packet,
            free.terms
                .iter()
                .map(|t| t.what.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut resources: Vec<Resource> = cores
        .iter()
        .map(|c| Resource {
            name: c.core.clone(),
            cost_per_packet: c.cycles_per_packet,
            unit: "cycles".into(),
            max_pps: hz / c.cycles_per_packet,
        })
        .collect();
    resources.extend(extra);
    if let Some(hw) = hardware {
        // Through the NIC's switch a frame crosses the bus at every hop and is switched
        // n + 1 times (seed 000 Section V); software-linked chains cross it once.
        let nic_switched = matches!(&chain.layout, Layout::Hops { technology } if technology.starts_with("nic-switch"));
        let n = chain.nfs.len() as f64;
        let (crossings, switchings) = if nic_switched { (n, n + 1.0) } else { (1.0, 0.0) };
        let bits = mean_over(&chain.frames, |s| Ok(s * 8.0))?;
        resources.extend(crate::rc::nic_resources(hw, bits, crossings, switchings));
    }
    if let Some(bad) = resources.iter().find(|r| !(r.max_pps.is_finite() && r.max_pps > 0.0)) {
        return Err(format!(
            "{} costs {} {} per packet: not a resource with a capacity",
            bad.name, bad.cost_per_packet, bad.unit
        ));
    }
    let bottleneck = resources
        .iter()
        .min_by(|a, b| a.max_pps.total_cmp(&b.max_pps))
        .expect("a core is always a resource");
    Ok(ChainPrediction {
        max_pps: bottleneck.max_pps,
        bottleneck: bottleneck.name.clone(),
        cores,
        resources,
        overload,
    })
}

/// A chain priced term by term with a calibration, over the chain's frame sizes.
struct Pricing<'a> {
    cal: &'a Calibration,
    chain: &'a ChainModel,
}

impl Pricing<'_> {
    /// The term `what`, `cycles(size)` averaged over the chain's frames. A term below
    /// zero is a calibration that failed (e.g. two stages measured cheaper than one: a
    /// link that costs less than nothing), not a price: refused.
    fn term(&self, what: String, cycles: &dyn Fn(f64) -> Result<f64, String>) -> Result<Term, String> {
        let cycles = mean_over(&self.chain.frames, cycles)?;
        if cycles < 0.0 {
            return Err(format!(
                "the term `{what}` comes to {cycles:.0} cycles/packet from this calibration: a term below zero is a failed measurement, not a price; calibrate again (`sfclab model calibrate`)"
            ));
        }
        Ok(Term { what, cycles, nf: None })
    }

    /// NF `i`'s cost in a compound loop, or in a pipeline's stage (`in_stage`; `across`
    /// when it is the first of a stage whose frames come from another core).
    fn nf_term(&self, i: usize, at: NfAt) -> Result<Term, String> {
        let (cal, key) = (self.cal, &self.chain.nfs[i]);
        let what = format!(
            "nf {} `{key}`{}",
            i + 1,
            match at {
                NfAt::Loop => "",
                NfAt::Stage => " in a stage",
                NfAt::FirstAcross => " first in a stage fed from another core",
            }
        );
        Ok(Term {
            nf: Some(i),
            ..self.term(what, &|s| match at {
                NfAt::Loop => cal.nf_cycles(key, s),
                NfAt::Stage => cal.nf_stage_cycles(key, s, false),
                NfAt::FirstAcross => cal.nf_stage_cycles(key, s, true),
            })?
        })
    }

    /// One loop on one core: the generator, loop and sink, then every NF.
    fn compound(&self) -> Result<(Vec<CoreCost>, Overload), String> {
        let cal = self.cal;
        let mut terms = vec![self.term("generator, loop and sink".into(), &|s| cal.compound_base.at(s))?];
        for i in 0..self.chain.nfs.len() {
            terms.push(self.nf_term(i, NfAt::Loop)?);
        }
        Ok((
            vec![core("core".into(), terms)],
            Overload::new(
                "flat",
                "one loop: what the core cannot take stays in the generator (in-memory) or is dropped at the port's ring, before any NF",
            ),
        ))
    }

    /// Stages on cores joined by rings: each core pays its stages' ends and NFs.
    fn pipeline(&self, stages: &[(Range<usize>, usize)]) -> Result<(Vec<CoreCost>, Overload), String> {
        let p = self
            .cal
            .pipeline
            .as_ref()
            .ok_or("the calibration has no pipeline terms (it was measured on one core)")?;
        check_stages(stages, self.chain.nfs.len())?;
        let mut by_core: Vec<(usize, Vec<Term>)> = Vec::new();
        for (s, (nfs, c)) in stages.iter().enumerate() {
            let mut terms = self.stage_ends(p, stages, s)?;
            let fed_across = s > 0 && stages[s - 1].1 != *c;
            for i in nfs.clone() {
                let at = if fed_across && i == nfs.start {
                    NfAt::FirstAcross
                } else {
                    NfAt::Stage
                };
                terms.push(self.nf_term(i, at)?);
            }
            match by_core.iter_mut().find(|(k, _)| k == c) {
                Some((_, t)) => t.extend(terms),
                None => by_core.push((*c, terms)),
            }
        }
        Ok((
            by_core.into_iter().map(|(c, t)| core(format!("core {c}"), t)).collect(),
            Overload::new(
                "flat",
                "with flow control or backpressure the excess waits before the chain; with dropping links it is dropped at a full ring, after the stages before it worked on it (seed 002: falling)",
            ),
        ))
    }

    /// Stage `s`'s own terms besides its NFs: the generator or the sink, and the ends
    /// of the rings into and out of it.
    fn stage_ends(
        &self,
        p: &crate::calibration::PipelineCalibration,
        stages: &[(Range<usize>, usize)],
        s: usize,
    ) -> Result<Vec<Term>, String> {
        if stages.len() == 1 {
            return Ok(vec![
                self.term("stage: generator, ingress queue, sink".into(), &|x| {
                    p.single_stage.at(x)
                })?,
            ]);
        }
        let c = stages[s].1;
        let mut terms = Vec::new();
        // A ring between stages on one core costs that core both ends (`same_core_link`,
        // counted on the receiving stage); across cores its cost is split between its
        // ends (`StageEnds::dequeue`, `enqueue`).
        let dequeue = |x: f64| Ok(p.ends(x)?.dequeue());
        let enqueue = |x: f64| Ok(p.ends(x)?.enqueue());
        if s == 0 {
            terms.push(self.term("stage 1: generator, ingress queue".into(), &|x| {
                Ok(p.first_stage.at(x)? - enqueue(x)?)
            })?);
        } else if stages[s - 1].1 == c {
            terms.push(self.term(format!("ring into stage {} (same core)", s + 1), &|x| {
                p.same_core_link.at(x)
            })?);
        } else {
            terms.push(self.term(format!("ring into stage {} (dequeue)", s + 1), &dequeue)?);
        }
        if s == stages.len() - 1 {
            terms.push(self.term(format!("stage {}: sink", s + 1), &|x| {
                Ok(p.last_stage.at(x)? - dequeue(x)?)
            })?);
        } else if stages[s + 1].1 != c {
            terms.push(self.term(format!("ring out of stage {} (enqueue)", s + 1), &enqueue)?);
        }
        Ok(terms)
    }

    /// Hops of one forwarder each in namespaces, all on the DUT's core; with sfclab's
    /// tester (`with_tester`: no NIC profile, whose line brings the traffic) the tester
    /// as a resource of its own, and what falling chains deliver offered all of it
    /// priced with the drops measured at its rate.
    fn hops(
        &self,
        technology: &str,
        with_tester: bool,
        hz: f64,
    ) -> Result<(CoreCost, Overload, Option<Resource>), String> {
        let w = self.cal.wired(technology)?;
        let n = self.chain.nfs.len() as f64;
        if let Some(other) = self.chain.nfs.iter().find(|k| *k != "forwarder") {
            return Err(format!(
                "chaining `{technology}` is calibrated for hops of one forwarder each; `{other}` in a hop is not (yet) priced"
            ));
        }
        let terms = vec![
            self.term("chain ends (tester side I/O)".into(), &|s| w.fixed.at(s))?,
            self.term(hops_term(w, n), &|s| Ok(n * w.per_hop.at(s)?.max(0.0)))?,
        ];
        let dut = core("dut core".into(), terms);
        let mut shape = hops_overload(technology);
        if !with_tester {
            return Ok((dut, shape, None));
        }
        let tester = mean_over(&self.chain.frames, |s| w.tester_pps.at(s))?;
        if let Some(drops) = w.software_drops.as_ref().filter(|_| shape.falls()) {
            let wasted = mean_over(&self.chain.frames, |s| drops.at(n, s))?;
            shape.saturated_pps = Some((hz / (dut.cycles_per_packet + wasted)).min(tester));
            shape.software_drops_cycles = Some(wasted);
        }
        let tester = Resource {
            name: "tester".into(),
            cost_per_packet: hz / tester,
            unit: "cycles".into(),
            max_pps: tester,
        };
        Ok((dut, shape, Some(tester)))
    }
}

/// The name of `n` hops' term. A per-hop cost its calibration could not tell from zero
/// prices the hops as measured, said so; one measured below zero is priced at zero, the
/// nearest cost there is, said so too.
fn hops_term(w: &crate::calibration::WiredCalibration, n: f64) -> String {
    let said = w
        .per_hop
        .points
        .iter()
        .find(|p| p.indistinct_from_zero() || p.cycles < 0.0);
    match said.and_then(|p| Some((p, p.interval?))) {
        Some((p, [lo, hi])) => format!(
            "{n} hop(s) (per hop {}: 95% interval {lo:.0} to {hi:.0} at {} B{}; calibrate with more --repeat)",
            if p.indistinct_from_zero() {
                "not told from zero"
            } else {
                "measured below zero"
            },
            p.size,
            if p.cycles < 0.0 { ", priced at 0" } else { "" }
        ),
        None => format!("{n} hop(s)"),
    }
}

fn check_stages(stages: &[(Range<usize>, usize)], n: usize) -> Result<(), String> {
    let mut next = 0;
    for (nfs, _) in stages {
        if nfs.start != next || nfs.end <= nfs.start {
            return Err(format!(
                "stages must cover the chain's NFs in order, each at least one: {stages:?}"
            ));
        }
        next = nfs.end;
    }
    if next != n || stages.is_empty() {
        return Err(format!("stages {stages:?} do not cover the chain's {n} NF(s)"));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::calibration::*;

    /// A hand-made calibration: 64 and 1518 B; base 100 → 130; forwarder 20 → 20 (in a
    /// stage too; first in a stage fed from another core 25), nat44 60 → 90 (in a stage
    /// 75 → 105, fed from another core 85 → 115); pipeline single 140, first 160,
    /// last 120, same-core link 30 (cross link 160 + 120 − 140 = 140, 70 a side); TSC 1 GHz.
    pub(crate) fn cal() -> Calibration {
        let sizes = [64, 1518];
        let two = |a: f64, b: f64| {
            Curve::new(vec![
                CurvePoint {
                    size: 64,
                    cycles: a,
                    runs: vec![a],
                    interval: None,
                },
                CurvePoint {
                    size: 1518,
                    cycles: b,
                    runs: vec![b],
                    interval: None,
                },
            ])
        };
        Calibration {
            schema: CALIBRATION_SCHEMA.into(),
            version: "test".into(),
            machine: CalibratedMachine {
                cpu: "test".into(),
                cores: 2,
                tsc_hz: 1e9,
                kernel: "test".into(),
            },
            date: "2026-11-24T00:00:00Z".into(),
            method: Method {
                duration_s: 1.0,
                repeat: 1,
                batch: 32,
                flows: 1024,
                notes: vec![],
            },
            sizes: sizes.to_vec(),
            compound_base: two(100.0, 130.0),
            nfs: vec![
                NfCalibration {
                    key: "forwarder".into(),
                    kind: "forwarder".into(),
                    cycles: Curve::flat(&sizes, 20.0),
                    in_stage: Some(Curve::flat(&sizes, 20.0)),
                    across: Some(Curve::flat(&sizes, 25.0)),
                    in_vnf: None,
                },
                NfCalibration {
                    key: "nat44".into(),
                    kind: "nat44".into(),
                    cycles: two(60.0, 90.0),
                    in_stage: Some(two(75.0, 105.0)),
                    across: Some(two(85.0, 115.0)),
                    in_vnf: None,
                },
            ],
            pipeline: Some(PipelineCalibration {
                single_stage: Curve::flat(&sizes, 140.0),
                first_stage: Curve::flat(&sizes, 160.0),
                last_stage: Curve::flat(&sizes, 120.0),
                same_core_link: Curve::flat(&sizes, 30.0),
            }),
            wired: vec![WiredCalibration {
                technology: "veth".into(),
                fixed: Curve::flat(&sizes, 1000.0),
                per_hop: Curve::flat(&sizes, 8000.0),
                tester_pps: Curve::flat(&sizes, 500_000.0),
                software_drops: None,
            }],
            memif: None,
        }
    }

    fn chain(nfs: &[&str], layout: Layout, size: f64) -> ChainModel {
        ChainModel {
            nfs: nfs.iter().map(|s| s.to_string()).collect(),
            frames: vec![(size, 1.0)],
            layout,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn a_compound_chain_costs_its_base_and_its_nfs_on_one_core() {
        let p = predict_chain(&cal(), &chain(&["forwarder", "nat44"], Layout::Compound, 64.0), None).unwrap();
        // 100 + 20 + 60 = 180 cycles at 1 GHz: 5.556 Mpps.
        assert!(close(p.cores[0].cycles_per_packet, 180.0));
        assert!(close(p.max_pps, 1e9 / 180.0));
        assert_eq!(p.bottleneck, "core");
        // Half way to 1518 B (791 B): base 115, nat44 75: 210.
        let p = predict_chain(&cal(), &chain(&["forwarder", "nat44"], Layout::Compound, 791.0), None).unwrap();
        assert!(close(p.cores[0].cycles_per_packet, 210.0));
        // IMIX-like mix: 3/4 at 64 B, 1/4 at 1518 B: 0.75*180 + 0.25*(130+20+90=240) = 195.
        let mix = ChainModel {
            frames: vec![(64.0, 3.0), (1518.0, 1.0)],
            ..chain(&["forwarder", "nat44"], Layout::Compound, 64.0)
        };
        assert!(close(
            predict_chain(&cal(), &mix, None).unwrap().cores[0].cycles_per_packet,
            195.0
        ));
    }

    #[test]
    fn a_pipeline_prices_each_core_with_its_rings() {
        // NFs in stages cost what they cost in a stage (nat44 75, not its compound 60),
        // the first of a stage fed from another core what it costs there (forwarder 25).
        // bi:2 of forwarder, nat44, forwarder, forwarder on cores 0 and 1:
        // core 0: first stage 160 (generator 90 + enqueue 70) + 20 + 75 = 255;
        // core 1: dequeue 70 + sink 50 (= 120 − 70) + 25 + 20 = 165.
        let nfs = ["forwarder", "nat44", "forwarder", "forwarder"];
        let bi2 = Layout::Pipeline {
            stages: vec![(0..2, 0), (2..4, 1)],
        };
        let p = predict_chain(&cal(), &chain(&nfs, bi2, 64.0), None).unwrap();
        assert!(close(p.cores[0].cycles_per_packet, 255.0), "{:?}", p.cores[0]);
        assert!(close(p.cores[1].cycles_per_packet, 165.0), "{:?}", p.cores[1]);
        assert!(p.cores[1].terms[2].what.contains("fed from another core"));
        assert_eq!(p.bottleneck, "core 0");
        assert!(close(p.max_pps, 1e9 / 255.0));
        // A last stage cheaper than half the link: the receiving side takes what the last
        // stage measured (120 of the link's 400 + 120 − 140 = 380), the sink 0, and the
        // core totals stay what was measured (core 1: 120 + 25 + 20).
        let mut lopsided = cal();
        lopsided.pipeline.as_mut().unwrap().first_stage = Curve::flat(&[64, 1518], 400.0);
        let bi2 = Layout::Pipeline {
            stages: vec![(0..2, 0), (2..4, 1)],
        };
        let p = predict_chain(&lopsided, &chain(&nfs, bi2, 64.0), None).unwrap();
        assert!(close(p.cores[1].cycles_per_packet, 165.0), "{:?}", p.cores[1]);
        assert!(p.cores[1].terms.iter().all(|t| t.cycles >= 0.0), "{:?}", p.cores[1]);
        // A link measured cheaper than nothing (first + last < single) is a failed
        // calibration: its term is refused, not priced.
        let mut broken = cal();
        broken.pipeline.as_mut().unwrap().single_stage = Curve::flat(&[64, 1518], 400.0);
        let bi2 = Layout::Pipeline {
            stages: vec![(0..2, 0), (2..4, 1)],
        };
        let e = predict_chain(&broken, &chain(&nfs, bi2, 64.0), None).unwrap_err();
        assert!(
            e.contains("`ring out of stage 1 (enqueue)` comes to -120 cycles/packet") && e.contains("calibrate again"),
            "{e}"
        );
        // pbp:2 (stages on 0,1,0,1), every stage after the first fed from the other core:
        // core 0: generator 90 + enqueue 70 + 20, then dequeue 70 + 25 + enqueue 70 = 345;
        // core 1: 70 + 85 + 70, then 70 + 25 + sink 50 = 370.
        let pbp = Layout::Pipeline {
            stages: vec![(0..1, 0), (1..2, 1), (2..3, 0), (3..4, 1)],
        };
        let p = predict_chain(&cal(), &chain(&nfs, pbp, 64.0), None).unwrap();
        assert!(close(p.cores[0].cycles_per_packet, 345.0), "{:?}", p.cores[0]);
        assert!(close(p.cores[1].cycles_per_packet, 370.0), "{:?}", p.cores[1]);
        // Two stages on one core (nothing crosses cores: nat44 at 75, its in-stage cost):
        // generator 90 + 20 + same-core ring 30 + 75 + sink 50 = 265;
        // half way to 1518 B nat44 costs 90 in a stage: 280.
        let same = Layout::Pipeline {
            stages: vec![(0..1, 0), (1..2, 0)],
        };
        let p = predict_chain(&cal(), &chain(&["forwarder", "nat44"], same.clone(), 64.0), None).unwrap();
        assert_eq!(p.cores.len(), 1);
        assert!(close(p.cores[0].cycles_per_packet, 265.0), "{:?}", p.cores[0]);
        let p = predict_chain(&cal(), &chain(&["forwarder", "nat44"], same, 791.0), None).unwrap();
        assert!(close(p.cores[0].cycles_per_packet, 280.0), "{:?}", p.cores[0]);
        // One stage: 140 + 20.
        let one = Layout::Pipeline {
            stages: vec![(0..1, 3)],
        };
        let p = predict_chain(&cal(), &chain(&["forwarder"], one, 64.0), None).unwrap();
        assert!(close(p.cores[0].cycles_per_packet, 160.0));
        assert_eq!(p.bottleneck, "core 3");
    }

    #[test]
    fn a_per_hop_cost_not_told_from_zero_is_said_so_and_priced_at_no_less_than_zero() {
        let with_per_hop = |cycles: f64, interval: [f64; 2]| {
            let mut c = cal();
            for p in &mut c.wired[0].per_hop.points {
                (p.cycles, p.interval) = (cycles, Some(interval));
            }
            c
        };
        // Two hops of veth: the DUT core's cycles per packet and what the hops' term says.
        let two_hops = |c: &Calibration| {
            let hops = Layout::Hops {
                technology: "veth".into(),
            };
            let p = predict_chain(c, &chain(&["forwarder"; 2], hops, 64.0), None).unwrap();
            (p.cores[0].cycles_per_packet, p.cores[0].terms[1].what.clone())
        };
        // Clearly above zero: priced as measured, nothing said.
        let (cycles, what) = two_hops(&with_per_hop(8000.0, [7000.0, 9000.0]));
        assert!(close(cycles, 1000.0 + 2.0 * 8000.0) && what == "2 hop(s)", "{what}");
        // Its interval holds zero: still priced, the term says so.
        let (cycles, what) = two_hops(&with_per_hop(300.0, [-100.0, 700.0]));
        assert!(close(cycles, 1600.0), "{cycles}");
        assert!(
            what.contains("per hop not told from zero: 95% interval -100 to 700"),
            "{what}"
        );
        // Below zero inside its interval: priced at zero, said so.
        let (cycles, what) = two_hops(&with_per_hop(-926.0, [-3000.0, 1200.0]));
        assert!(close(cycles, 1000.0), "{cycles}");
        assert!(
            what.contains("not told from zero: 95% interval -3000 to 1200 at 64 B, priced at 0"),
            "{what}"
        );
        // Below zero beyond its interval (every length bound alike by another limit):
        // priced at zero, said so; with no interval it is not a cost at all.
        let below = with_per_hop(-926.0, [-1500.0, -300.0]);
        assert!(below.check().is_ok());
        let (cycles, what) = two_hops(&below);
        assert!(close(cycles, 1000.0), "{cycles}");
        assert!(
            what.contains("per hop measured below zero: 95% interval -1500 to -300"),
            "{what}"
        );
        let mut bad = below;
        bad.wired[0].per_hop.points.iter_mut().for_each(|p| p.interval = None);
        assert!(bad.check().unwrap_err().contains("not a cost"));
    }

    #[test]
    fn hops_in_namespaces_are_bound_by_the_dut_core_or_the_tester() {
        let veth = || Layout::Hops {
            technology: "veth".into(),
        };
        // n = 1: 1000 + 8000 = 9000 cycles: 111 kpps... at 1 GHz; the tester 500 kpps.
        let p = predict_chain(&cal(), &chain(&["forwarder"], veth(), 64.0), None).unwrap();
        assert!(close(p.max_pps, 1e9 / 9000.0));
        assert_eq!(p.bottleneck, "dut core");
        let mut fast = cal();
        fast.machine.tsc_hz = 10e9;
        let p = predict_chain(&fast, &chain(&["forwarder"], veth(), 64.0), None).unwrap();
        assert_eq!(p.bottleneck, "tester");
        assert!(close(p.max_pps, 500_000.0));
        let e = predict_chain(
            &cal(),
            &chain(
                &["forwarder"],
                Layout::Hops {
                    technology: "ovs".into(),
                },
                64.0,
            ),
            None,
        )
        .unwrap_err();
        assert!(
            e.contains("chaining `ovs` is not in the calibration (it has veth)"),
            "{e}"
        );
        assert!(
            predict_chain(&cal(), &chain(&["nat44"], veth(), 64.0), None)
                .unwrap_err()
                .contains("one forwarder")
        );
    }

    #[test]
    fn where_linux_drops_inside_the_chain_offered_all_the_tester_sends_is_priced_with_its_software_drops() {
        let mut c = cal();
        let sizes = c.sizes.clone();
        c.wired.push(WiredCalibration {
            technology: "linux".into(),
            // C_SWdrops: 0 at one hop, 4,000 cycles per frame delivered at three.
            software_drops: Some(SoftwareDrops {
                lengths: [1, 3],
                short: Curve::flat(&sizes, 0.0),
                long: Curve::flat(&sizes, 4000.0),
            }),
            ..c.wired[0].clone()
        });
        let linux = |n| {
            chain(
                &vec!["forwarder"; n],
                Layout::Hops {
                    technology: "linux".into(),
                },
                64.0,
            )
        };
        // n = 5: the DUT core 1000 + 5 x 8000 = 41,000 cycles at its maximum (24.39 kpps
        // at 1 GHz); the drops 0 + 4000 x (5 - 1) / 2 = 8,000 more offered all the
        // tester sends: 1e9 / 49,000 = 20.41 kpps.
        let p = predict_chain(&c, &linux(5), None).unwrap();
        assert!(close(p.max_pps, 1e9 / 41_000.0));
        assert_eq!(p.overload.shape, "falling");
        assert!(close(p.overload.software_drops_cycles.unwrap(), 8000.0));
        assert!(close(p.overload.saturated_pps.unwrap(), 1e9 / 49_000.0));
        // n = 2: 2,000 cycles of drops; one hop: none, and never below zero (a line
        // through 0 and 4,000 would give -2,000 at n = 0).
        let p = predict_chain(&c, &linux(2), None).unwrap();
        assert!(close(p.overload.saturated_pps.unwrap(), 1e9 / (17_000.0 + 2000.0)));
        let d = c.wired[1].software_drops.as_ref().unwrap();
        assert_eq!(d.at(0.0, 64.0), Ok(0.0));
        let p = predict_chain(&c, &linux(1), None).unwrap();
        assert!(close(p.overload.saturated_pps.unwrap(), p.max_pps));
        // Where the tester is slower than the saturated chain, it is the tester's rate.
        c.machine.tsc_hz = 100e9;
        let p = predict_chain(&c, &linux(5), None).unwrap();
        assert!(close(p.overload.saturated_pps.unwrap(), 500_000.0));
        // Flat chainings, and falling ones calibrated without the drops, say nothing.
        let p = predict_chain(
            &c,
            &chain(
                &["forwarder"],
                Layout::Hops {
                    technology: "veth".into(),
                },
                64.0,
            ),
            None,
        )
        .unwrap();
        assert_eq!(
            (p.overload.saturated_pps, p.overload.software_drops_cycles),
            (None, None)
        );
        c.wired[1].software_drops = None;
        assert_eq!(predict_chain(&c, &linux(5), None).unwrap().overload.saturated_pps, None);
    }

    #[test]
    fn what_was_not_calibrated_is_refused_not_guessed() {
        let e = predict_chain(&cal(), &chain(&["router"], Layout::Compound, 64.0), None).unwrap_err();
        assert!(
            e.contains("NF `router` is not in the calibration (it has forwarder, nat44)"),
            "{e}"
        );
        let e = predict_chain(&cal(), &chain(&["forwarder"], Layout::Compound, 9000.0), None).unwrap_err();
        assert!(e.contains("outside the calibrated frame sizes"), "{e}");
        let mut one_core = cal();
        one_core.pipeline = None;
        let e = predict_chain(
            &one_core,
            &chain(
                &["forwarder"],
                Layout::Pipeline {
                    stages: vec![(0..1, 0)],
                },
                64.0,
            ),
            None,
        )
        .unwrap_err();
        assert!(e.contains("no pipeline terms"), "{e}");
        let gap = Layout::Pipeline {
            stages: vec![(0..1, 0), (2..3, 1)],
        };
        assert!(predict_chain(&cal(), &chain(&["forwarder"; 3], gap, 64.0), None).is_err());
    }

    #[test]
    fn a_nic_profile_adds_its_line_engine_and_bus() {
        // cpu_hz 0: the cores at the calibration's clock.
        let hw = HardwareProfile {
            cpu_hz: 0.0,
            line_rate_bps: Some(10e9),
            line_overhead_bits: 160.0,
            nic_ops_per_s: Some(60e6),
            nic_rx_ops: 1.0,
            nic_tx_ops: 1.0,
            nic_switch_ops: 1.0,
            pcie_bps: Some(16e9),
            pcie_overhead_bits: 256.0,
        };
        let mut fast = cal();
        fast.machine.tsc_hz = 100e9;
        let p = predict_chain(&fast, &chain(&["forwarder"], Layout::Compound, 64.0), Some(&hw)).unwrap();
        // core: 100e9 / 120 = 833 Mpps; line 10e9 / 672 = 14.88 Mpps; engine 30; bus 20.8.
        assert_eq!(p.bottleneck, "nic line");
        assert!(close(p.max_pps, 10e9 / 672.0));
        let u = p.utilisation(p.max_pps);
        assert!(close(u.iter().find(|(n, _)| n == "nic line").unwrap().1, 1.0));
    }

    #[test]
    fn a_term_below_zero_or_a_core_that_costs_nothing_is_refused_as_a_failed_measurement() {
        let two_stages = Layout::Pipeline {
            stages: vec![(0..1, 0), (1..2, 1)],
        };
        let fwd2 = chain(&["forwarder", "forwarder"], two_stages, 64.0);
        predict_chain(&cal(), &fwd2, None).unwrap();
        // A first stage measured at nothing (a difference of runs, clamped at zero; the
        // last stage as dear as a single one, so the ring between costs nothing) and a
        // forwarder too cheap to see: core 0 has no cost, and no capacity.
        let mut c = cal();
        let p = c.pipeline.as_mut().unwrap();
        p.first_stage = Curve::flat(&[64, 1518], 0.0);
        p.last_stage = p.single_stage.clone();
        c.nfs[0].in_stage = Some(Curve::flat(&[64, 1518], 0.0));
        let e = predict_chain(&c, &fwd2, None).unwrap_err();
        assert!(e.starts_with("core 0 comes to 0 cycles/packet"), "{e}");
        assert!(e.contains("a failed measurement, not a price; calibrate again"), "{e}");
        // Core 1 still costs its sink: only the core without a cost is refused.
        let mut c = cal();
        c.nfs[0].in_stage = Some(Curve::flat(&[64, 1518], 0.0));
        predict_chain(&c, &fwd2, None).unwrap();
        // An NF priced below zero (a calibration written by hand): a term below zero.
        let mut c = cal();
        c.nfs[0].cycles = Curve::flat(&[64, 1518], -5.0);
        let e = predict_chain(&c, &chain(&["forwarder"], Layout::Compound, 64.0), None).unwrap_err();
        assert!(
            e.contains("a term below zero is a failed measurement, not a price"),
            "{e}"
        );
    }

    #[test]
    fn a_calibration_that_contradicts_itself_is_refused() {
        let mut c = cal();
        c.nfs[1].cycles = Curve::flat(&[64], 60.0);
        assert!(c.check().unwrap_err().contains("covers sizes [64]"));
        let mut c = cal();
        c.nfs[0].cycles.points[0].cycles = f64::NAN;
        assert!(c.check().unwrap_err().contains("not a cost"));
        let mut c = cal();
        c.nfs[1].key = "forwarder".into();
        assert!(c.check().unwrap_err().contains("calibrated twice"));
        let mut c = cal();
        c.nfs[1].in_stage = None;
        assert!(
            c.check()
                .unwrap_err()
                .contains("nat44` has an across cost but no in_stage cost")
        );
        let mut c = cal();
        c.nfs[0].across = None;
        assert!(
            c.check()
                .unwrap_err()
                .contains("forwarder` has an in_stage cost but no across cost")
        );
        // Neither: an NF calibrated after the NFs before it in a VNF, priced in compound
        // loops only, and refused in a stage saying why.
        let mut c = cal();
        c.nfs[1].in_stage = None;
        c.nfs[1].across = None;
        c.check().unwrap();
        let e = c.nf_stage_cycles("nat44", 64.0, false).unwrap_err();
        assert!(e.contains("after the NFs before it"), "{e}");
        let mut c = cal();
        c.pipeline = None;
        assert!(c.check().unwrap_err().contains("has an in_stage cost, but no pipeline"));
        let mut c = cal();
        c.nfs[1].in_stage = Some(Curve::flat(&[64], 75.0));
        assert!(c.check().unwrap_err().contains("in_stage covers sizes [64]"));
        let text = serde_json::to_string(&cal()).unwrap();
        assert_eq!(Calibration::from_json(&text, "cal.json").unwrap(), cal());
        let old = text.replace(CALIBRATION_SCHEMA, "sfclab.calibration/0");
        assert!(
            Calibration::from_json(&old, "cal.json")
                .unwrap_err()
                .contains("cal.json: schema `sfclab.calibration/0`")
        );
    }

    #[test]
    fn a_nic_switched_chain_crosses_the_bus_per_hop_and_the_switch_n_plus_one_times() {
        let hw = HardwareProfile {
            cpu_hz: 100e9,
            line_rate_bps: Some(10e9),
            line_overhead_bits: 160.0,
            nic_ops_per_s: Some(60e6),
            nic_rx_ops: 1.0,
            nic_tx_ops: 1.0,
            nic_switch_ops: 1.0,
            pcie_bps: Some(32e9),
            pcie_overhead_bits: 512.0,
        };
        let mut c = cal();
        c.wired.push(WiredCalibration {
            technology: "nic-switch".into(),
            ..c.wired[0].clone()
        });
        let nic = Layout::Hops {
            technology: "nic-switch".into(),
        };
        // n = 4 at 64 B: engine 1 + 1 + 5 = 7 ops: 8.571 Mpps; bus 4 x (512 + 512) bits:
        // 7.8125 Mpps; line 14.88; the cores at 100 GHz: 100e9 / 33000 = 3.03 Mpps...
        // so at 100 GHz the CPU is the limit; at 1 THz the bus is.
        let p = predict_chain(&c, &chain(&["forwarder"; 4], nic.clone(), 64.0), Some(&hw)).unwrap();
        let engine = p.resources.iter().find(|r| r.name == "nic engine").unwrap();
        assert!(close(engine.max_pps, 60e6 / 7.0));
        let bus = p.resources.iter().find(|r| r.name == "pcie").unwrap();
        assert!(close(bus.max_pps, 32e9 / 4096.0));
        assert_eq!(p.bottleneck, "dut core");
        assert!(close(p.max_pps, 100e9 / (1000.0 + 4.0 * 8000.0)));
        assert!(
            p.resources.iter().all(|r| r.name != "tester"),
            "a NIC profile replaces sfclab's tester"
        );
        let fast = HardwareProfile {
            cpu_hz: 1e12,
            ..hw.clone()
        };
        let p = predict_chain(&c, &chain(&["forwarder"; 4], nic, 64.0), Some(&fast)).unwrap();
        assert_eq!(p.bottleneck, "pcie");
        // The same chain software-linked (veth): the bus once, no switching.
        let p = predict_chain(
            &c,
            &chain(
                &["forwarder"; 4],
                Layout::Hops {
                    technology: "veth".into(),
                },
                64.0,
            ),
            Some(&fast),
        )
        .unwrap();
        let bus = p.resources.iter().find(|r| r.name == "pcie").unwrap();
        assert!(close(bus.max_pps, 32e9 / 1024.0));
        let engine = p.resources.iter().find(|r| r.name == "nic engine").unwrap();
        assert!(close(engine.max_pps, 30e6));
        // Its one crossing of the bus (31.25 Mpps) and of the engine (30) leave the line
        // (14.88) the limit.
        assert_eq!(p.bottleneck, "nic line");
        assert!(close(p.max_pps, 10e9 / 672.0));
    }
}
