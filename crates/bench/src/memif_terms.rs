//! The model's terms for scenarios (`model calibrate --memif`): what the tester thread and
//! a VNF process joined to it by memif cost per frame, and what sharing a core costs the
//! VNF processes, each measured by running small scenarios as `sfclab scenario` runs
//! them (every VNF an sfclab process in a namespace of its own, the tester on its core,
//! the VNFs on the others), offered all the tester sends.
//!
//! - The tester always polls: its core is full whatever it carries, so in a run where it
//!   is the limit its clock is spent on what it did: `TSC = g T_gen + a T_send + r T_recv`
//!   per second, g frames generated, a taken by the first VNF's ring, r received back.
//!   Three chains make three such runs, solved for the three terms: a forwarder (all
//!   come back), a firewall without rules (every frame taken, none back) and a VNF far
//!   slower than the tester (most refused at its ring).
//! - A VNF process alone on its core, doing a synthetic NF of `W` cycles (TSC time),
//!   forwards `TSC / ((hop + W) / a)` frames a second: its core gives it a share `a` of
//!   its time (the rest goes to interrupts, kernel threads, the hypervisor), so the
//!   cycles a frame takes grow with its work by `1 / a`, not 1. Two works, a light one
//!   (the tester's round trip: the VNF still the limit) and a heavy one, give `a` and
//!   `hop`; the light work one way only gives the one-way hop.
//! - Sharing a core, polling: k such chains, one heavy VNF each on one core:
//!   `sharing(k) = a × TSC / what they forward together − the NF − hop`.
//! - Taking turns, interrupt mode: k chains of one forwarder each on one core. A VNF
//!   that empties its ring sleeps; woken, it waits its turn on the core, and its ring,
//!   full meanwhile, refuses the tester's frames: what the k carry in all is a ceiling
//!   whatever their work.
//! - A link between two VNFs on one core, interrupt mode: the light work split between
//!   the two VNFs of one chain, both ways: `link = a × TSC / what it forwards − hop −
//!   their NFs` (their switching included), in place of the two half hops a link to
//!   the tester costs.
//! - A polling process's turn on a shared core: a chain of k polling forwarders on one
//!   core passes one ring of frames per link while each has its turn once, so
//!   `turn(k) = ring / (k × what it forwards)`, at k = 2, 6 and 12.

use std::path::Path;

use sfclab_experiment::Settings;
use sfclab_experiment::scenario::{Scenario, ScenarioFlags, ScenarioRun};
use sfclab_model::calibration::{LinkPoint, MemifCalibration, MemifWaitCalibration, SharingPoint, TurnsPoint};
use sfclab_model::{Curve, CurvePoint};
use sfclab_runtime::{Progress, Stop};

use crate::calibrate::NfWorkload;
use crate::median;

/// The work each VNF does in the runs that measure its hop and its sharing: enough that
/// it, not the tester, is the limit at every size (the tester's round trip is ~460
/// cycles a 64 B frame here, ~900 at 1518 B; with 600, the runs at 512 and 1518 B were
/// sometimes the tester's, and their hop read 900 to 2,000 cycles). TSC time, so it
/// adds no noise of its own.
pub const VNF_WORK_CYCLES: u64 = 1500;

/// How the terms were measured, for the calibration's notes.
pub const NOTE: &str = "memif (scenarios: VNF processes in namespaces joined by memif, one tester thread; PVP chains offered all the tester sends, one way for the tester's terms, both ways for the VNFs' unless said): the tester's T_gen, T_send, T_recv solved from TSC = generated T_gen + taken T_send + received T_recv over three runs (a polling forwarder, a firewall without rules, a synthetic NF of 4 W cycles); W = the larger of 1500 and 3 × the tester's round trip R; one VNF alone on its core (its ring refusing frames: the VNF, not the tester, the limit) doing synthetic(cycles=W) and synthetic(cycles=R) takes TSC / forwarded = (hop + synthetic) / a, solved for its core's availability a and hop; hop one way = a × TSC / forwarded − synthetic(cycles=R) one way; polling: sharing(k) = a × TSC / forwarded by k VNFs of synthetic(cycles=W) on one core − synthetic(cycles=W) − hop (at the smallest size); interrupt: what k PVP forwarders on one core, taking turns, carry in all, and k PVP VNFs of synthetic(cycles=60) beside them (at the smallest size), a link between two VNFs on one core = a × TSC / forwarded by one chain of two VNFs of synthetic(cycles=R/2) each − hop − their NFs, and a link one way in a chain of k = 5, 8, 12 forwarders on one core, fitted L + S / k = (a × TSC / forwarded − hop one way) / (k − 1) (at the smallest size); polling turn(k) = ring / (k × forwarded) by a chain of k = 2, 6, 12 polling forwarders on one core (each link passes a ring of frames per round of turns), fitted L + S / k; each point's interval is its repetitions' range";

/// What to measure.
#[derive(Clone, Debug)]
pub struct MemifTermsArgs {
    /// `polling`, `interrupt`.
    pub waits: Vec<String>,
    /// Processes per core at which sharing is measured, per wait (polling: a polling
    /// process spends its whole share whatever it carries; k = 2 says what it costs).
    pub sharing: Vec<usize>,
    pub duration: std::time::Duration,
    pub warmup: std::time::Duration,
    /// The NFs of scenarios' VNFs, each after the NFs before it in its VNF, to price in
    /// a VNF process (`in_vnf`) besides their compound calibration.
    pub vnf_nfs: Vec<NfWorkload>,
    /// VNF presets (`router`, `multi-feature`) whose own turns are measured at each k
    /// of the sharing (interrupt mode): what VNFs of that kind carry taking turns.
    pub turn_vnfs: Vec<TurnVnf>,
}

/// A VNF preset whose turns are measured, with its NFs' calibration keys (what the
/// model matches a scenario's processes by).
#[derive(Clone, Debug)]
pub struct TurnVnf {
    pub preset: String,
    pub nfs: Vec<String>,
}

impl MemifTermsArgs {
    pub fn new(waits: Vec<String>, duration: std::time::Duration, warmup: std::time::Duration) -> Self {
        MemifTermsArgs {
            waits,
            sharing: vec![2, 4, 8],
            duration,
            warmup,
            vnf_nfs: Vec::new(),
            turn_vnfs: Vec::new(),
        }
    }

    /// The VNF presets whose own turns a calibration measures: every one but the
    /// forwarder (measured anyway).
    pub fn preset_turn_vnfs() -> Result<Vec<TurnVnf>, String> {
        sfclab_experiment::scenario::VNF_PRESETS
            .iter()
            .filter(|p| **p != "forwarder")
            .map(|p| {
                Ok(TurnVnf {
                    preset: p.to_string(),
                    nfs: preset_keys(p)?,
                })
            })
            .collect()
    }

    /// The same, measuring the turns of VNFs of these presets too.
    pub fn with_turn_vnfs(mut self, presets: Vec<TurnVnf>) -> Self {
        self.turn_vnfs = presets;
        self
    }

    /// The same, pricing `nfs` (scenarios' VNFs' NFs) in a VNF process too.
    pub fn with_vnf_nfs(mut self, nfs: Vec<NfWorkload>) -> Self {
        self.vnf_nfs = nfs;
        self
    }

    /// The VNFs run to price the VNFs' NFs at frames of `size`, each once: every NF
    /// after the NFs before it, and those before it alone, each followed by `work`.
    fn vnf_nf_runs(&self, size: u16, work: &str, vnf_core: usize) -> Vec<String> {
        let runs = Runs {
            args: self,
            size,
            vnf_core,
        };
        let mut yamls: Vec<String> = Vec::new();
        for w in &self.vnf_nfs {
            for with in [true, false] {
                let yaml = runs.vnf_nf(w, with, work);
                if !yamls.contains(&yaml) {
                    yamls.push(yaml);
                }
            }
        }
        yamls
    }

    /// Runs of one repetition at `sizes` frame sizes (for the progress bar).
    pub fn runs(&self, sizes: usize) -> usize {
        sizes
            * (3 + 3 * self.waits.len()
                + self.waits.iter().filter(|w| *w != "polling").count()
                + self.vnf_nf_runs(64, "noop", 0).len())
            // Interrupt mode's turns (forwarders and VNFs with work at each k) and
            // one-way links.
            + self
                .waits
                .iter()
                .map(|w| match w.as_str() {
                    "polling" => self.sharing_of(w).len(),
                    _ => (2 + self.turn_vnfs.len()) * self.sharing_of(w).len() + LINK_CHAINS.len(),
                })
                .sum::<usize>()
            + TURN_CHAINS.len() * self.waits.iter().filter(|w| *w == "polling").count()
            // A crossing between hosts, into a VNF, out of one and between two
            // (interrupt).
            + 3 * self.waits.iter().filter(|w| *w != "polling").count()
    }

    fn sharing_of(&self, wait: &str) -> Vec<usize> {
        match wait {
            // Polling processes on one core each spin their share: 2 and 4 say enough.
            "polling" => self.sharing.iter().copied().filter(|&k| k <= 4).collect(),
            _ => self.sharing.clone(),
        }
    }
}

/// One repetition at one frame size: each term's estimate.
#[derive(Clone, Debug)]
pub struct MemifRound {
    /// `T_gen`, `T_send`, `T_recv`.
    tester: [f64; 3],
    /// Per wait of the args, in order: the hop both ways and one way, and the share of
    /// its core's time the VNF got.
    hops: Vec<f64>,
    hops_one_way: Vec<f64>,
    availability: Vec<f64>,
    /// Per wait: a link between two VNFs on one core, their switching between them
    /// included; `None` where not measured (polling).
    linked: Vec<Option<f64>>,
    /// Per wait, per k of [`LINK_CHAINS`] (interrupt, at the smallest size): a link one
    /// way in a chain of k forwarders on one core (NaN where the tester was the limit).
    links_one_way: Vec<Vec<f64>>,
    /// Per wait, per k of its sharing: cycles per frame beyond the hop (only at the
    /// smallest size).
    sharing: Vec<Vec<f64>>,
    /// Per wait, per k of [`TURN_CHAINS`]: a polling process's turn on a core shared by
    /// k, seconds (polling, at the smallest size; empty elsewhere).
    turns: Vec<Vec<f64>>,
    /// Per wait, per k of its sharing (interrupt, at the smallest size): what k
    /// chains of forwarders on one core carry in all, frames a second; and k chains of
    /// VNFs doing [`TURNS_WORK_CYCLES`] of synthetic work.
    taking_turns: Vec<Vec<f64>>,
    taking_turns_working: Vec<Vec<f64>>,
    /// Per wait, per preset of the args' `turn_vnfs`, per k (interrupt): what k PVP
    /// VNFs of that preset carry in all.
    vnf_turns: Vec<Vec<Vec<f64>>>,
    /// That work's compound cost, cycles per frame.
    turns_work: f64,
    /// Per NF of the args' `vnf_nfs`: its cycles in a VNF process.
    in_vnf: Vec<f64>,
    /// Per wait (at the smallest size): a crossing between hosts into a VNF, out of
    /// one, between two, and the tester's send into one, cycles per frame.
    tunnels: Vec<Option<[f64; 4]>>,
}

/// The chains of polling hops on one core that measure a turn: the scenarios' cells
/// run 4 and 10, between them (the turn grows with the hops, 2.0 ms at 2 to 3.5 at 12,
/// and one measured at 4 priced 10 hops 17 % high).
const TURN_CHAINS: [usize; 3] = [2, 6, 12];

/// The chains of forwarders one way on one core that price a link one way: long enough
/// that the link sets their pace. Chains of 2 and 3 are held by how often the tester
/// wakes their first VNF: 2 forwarded 2.6 Mpps in the host's slow state and 5.5 in its
/// fast one, 3 forwarded less than 4 in both; from 4 to 12 the link costs 95 to 130
/// cycles in either (X, 2026-12-05). The scenarios' cells run 4 and 10.
const LINK_CHAINS: [usize; 3] = [5, 8, 12];

/// The synthetic work of the VNFs whose turns are measured beside forwarders': about a
/// router's (45 to 60 cycles in a VNF here), light enough that two of them on a core
/// are still held by their turns, not by their cycles.
const TURNS_WORK_CYCLES: u64 = 60;

/// What a run gives the terms, packets per second: generated, taken by the first ring,
/// received.
struct Rates {
    generated: f64,
    taken: f64,
    received: f64,
}

fn run(yaml: &str, stop: &Stop) -> Result<ScenarioRun, String> {
    let mut s = Scenario::from_text(
        yaml,
        Path::new("model calibrate --memif"),
        &ScenarioFlags::default(),
        &Settings::default(),
    )
    .map_err(|e| e.to_string())?;
    s.stop_on(stop);
    let doc = sfclab_experiment::scenario::run(&s, &mut Progress::quiet()).map_err(|e| e.to_string())?;
    doc.runs
        .into_iter()
        .next()
        .ok_or_else(|| "the scenario ran no repetition".to_string())
}

fn rates(r: &ScenarioRun) -> Rates {
    let a = &r.aggregate;
    let refused = if a.window.sent == 0 {
        0.0
    } else {
        a.not_offered as f64 / a.window.sent as f64
    };
    Rates {
        generated: a.generated_mpps * 1e6,
        taken: a.generated_mpps * 1e6 * (1.0 - refused),
        received: a.throughput_mpps * 1e6,
    }
}

/// How a calibration run lays out its chains.
struct Layout<'a> {
    chains: usize,
    /// Each entry of the VNF a VNF of its own, chained (else one PVP VNF doing them all).
    split: bool,
    both_ways: bool,
    wait: &'a str,
}

/// The calibration runs' usual flows.
const FLOWS: &str = "flows: 256";

/// The runs of one repetition at one frame size, every VNF on one core (the tester on
/// its usual), each as fast as the tester goes.
struct Runs<'a> {
    args: &'a MemifTermsArgs,
    size: u16,
    vnf_core: usize,
}

impl Runs<'_> {
    /// Chains of the VNF `vnf` (as a scenario writes it: `[forwarder, ...]` or a preset)
    /// laid out as `layout`, with `traffic`'s flows.
    fn scenario(&self, layout: Layout, vnf: &str, traffic: &str) -> String {
        format!(
            "name: model calibrate --memif\nchains: {}\n{}vnf: {vnf}\nbidirectional: {}\n\
             vnf_cores: \"{}\"\n\
             traffic: {{ rate: max, size: {}, {traffic} }}\n\
             run: {{ duration: {}ms, warmup: {}ms, memif_wait: {} }}\nrepeat: 1\n",
            layout.chains,
            if layout.split { "split: true\n" } else { "shape: pvp\n" },
            layout.both_ways,
            self.vnf_core,
            self.size,
            self.args.duration.as_millis(),
            self.args.warmup.as_millis(),
            layout.wait,
        )
    }

    /// `chains` PVP chains of one VNF doing `vnf`, one way or both.
    fn pvp(&self, chains: usize, vnf: &str, wait: &str, both_ways: bool) -> String {
        let layout = Layout {
            chains,
            split: false,
            both_ways,
            wait,
        };
        self.scenario(layout, &format!("[{vnf}]"), FLOWS)
    }

    /// Forwarders one way on hosts `vnf_hosts` of two, each a VNF of its own, the tester
    /// sending from host 1 and receiving on host 2: one forwarder on host 2 receives
    /// through the tunnel between the hosts, one on host 1 sends through it, two on
    /// hosts 1 and 2 pass it between them. The cable is fast enough never to be the
    /// limit.
    fn across(&self, vnf_hosts: &[usize], wait: &str) -> String {
        let hosts: Vec<String> = vnf_hosts.iter().map(usize::to_string).collect();
        format!(
            "{}hosts: {{ count: 2, vnfs: [{}], sink: 2, link: 400Gbit/s }}\n",
            self.split(&vec!["forwarder"; vnf_hosts.len()], wait, false),
            hosts.join(", ")
        )
    }

    /// `chains` PVP chains of the VNF preset `preset` (`router`, `multi-feature`), both
    /// ways.
    fn preset_pvp(&self, chains: usize, preset: &str, wait: &str) -> String {
        let layout = Layout {
            chains,
            split: false,
            both_ways: true,
            wait,
        };
        self.scenario(layout, preset, FLOWS)
    }

    /// One chain of VNFs doing `vnfs` in turn, each a process of its own.
    fn split(&self, vnfs: &[&str], wait: &str, both_ways: bool) -> String {
        let layout = Layout {
            chains: 1,
            split: true,
            both_ways,
            wait,
        };
        self.scenario(layout, &format!("[{}]", vnfs.join(", ")), FLOWS)
    }

    /// One PVP chain, both ways, whose VNF does the NFs before `w`'s NF, its NF
    /// (`with`) and then `work`, with `w`'s traffic (interrupt mode).
    fn vnf_nf(&self, w: &NfWorkload, with: bool, work: &str) -> String {
        let entry = |nf: &sfclab_nf::NfSpec| {
            let mut m = serde_json::Map::new();
            m.insert(nf.kind().to_string(), nf.settings().clone());
            serde_json::Value::Object(m).to_string()
        };
        let mut vnf: Vec<String> = w.before.iter().map(entry).collect();
        if with {
            vnf.push(entry(&w.nf));
        }
        vnf.push(work.to_string());
        let traffic = match &w.destinations {
            sfclab_traffic::Destinations::One => format!("flows: {}", w.flows),
            other => format!("flows: {}, destinations: \"{other}\"", w.flows),
        };
        let layout = Layout {
            chains: 1,
            split: false,
            both_ways: true,
            wait: "interrupt",
        };
        self.scenario(layout, &format!("[{}]", vnf.join(", ")), &traffic)
    }
}

/// One repetition at `size`: the tester's three runs, each wait's hop, and (`sharing`)
/// each wait's sharing runs. `work` is the compound cost of the synthetic NF of
/// [`VNF_WORK_CYCLES`] at
/// `size`.
/// `guard`, when given, takes every run at one distance between the tester's core and
/// the VNFs' (`cores`): frames cross between them twice per round trip.
#[allow(clippy::too_many_arguments)]
pub fn round(
    args: &MemifTermsArgs,
    size: u16,
    work: f64,
    hz: f64,
    sharing: bool,
    guard: (Option<&crate::cores::CoreDistance>, [usize; 2]),
    progress: &mut Progress,
    stop: &Stop,
) -> Result<MemifRound, String> {
    // The tester's runs one way (its three terms apart); the VNFs' both ways, as
    // scenarios run them unless told (a VNF working both directions wakes for both).
    let (distance, [tester, vnfs]) = guard;
    // The scenarios' tester takes the first allowed core; the VNFs one other, all of
    // them on it (the sharing runs' k per core).
    let allowed = sfclab_runtime::placement::allowed_cores();
    let vnf_core = allowed.get(1).or(allowed.first()).copied().unwrap_or(0);
    let mut measure = |yaml: String, what: &str| -> Result<Rates, String> {
        let r = crate::cores::run_guarded(distance, tester, vnfs, || run(&yaml, stop))?;
        progress.finished(&format!("memif {what} at {size} B"));
        Ok(rates(&r))
    };
    let runs = Runs { args, size, vnf_core };
    // The VNFs are the limit only where their rings refuse frames.
    let vnf_bound = |r: &Rates, what: &str| {
        if r.taken < r.generated * 0.99 {
            Ok(())
        } else {
            Err(format!(
                "memif {what} at {size} B: the VNF's ring refused nothing, so the tester, not the VNF, was the limit ({:.2} Mpps)",
                r.received / 1e6
            ))
        }
    };
    // The tester is the limit in the first two: the VNF polls on its own core.
    let pass = measure(runs.pvp(1, "forwarder", "polling", false), "tester: forwarder")?;
    // The VNFs' work: at least [`VNF_WORK_CYCLES`], and three times the tester's round
    // trip just measured (a slower tester, as a debug build's, needs heavier VNFs to be
    // the limit); a synthetic NF costs its cycles and a constant, known from `work`.
    let round_trip = hz / pass.received.max(1.0);
    let cycles = (3.0 * round_trip).max(VNF_WORK_CYCLES as f64).round() as u64;
    // A synthetic NF's compound cost is its cycles and a constant.
    let work_of = |c: u64| work - VNF_WORK_CYCLES as f64 + c as f64;
    let mut light_work_cycles = round_trip.round() as u64;
    let (work, mut light_work) = (work_of(cycles), work_of(light_work_cycles));
    let synthetic = |c: u64| format!("{{synthetic: {{cycles: {c}}}}}");
    let heavy = synthetic(cycles);
    let mut light = synthetic(light_work_cycles);
    let slow = synthetic(cycles * 4);
    let drop = measure(
        runs.pvp(1, "firewall", "polling", false),
        "tester: firewall without rules",
    )?;
    let refuse = measure(
        runs.pvp(1, &slow, "polling", false),
        "tester: a VNF slower than the tester",
    )?;
    let rows = [
        [pass.generated, pass.taken, pass.received],
        [drop.generated, drop.taken, drop.received],
        [refuse.generated, refuse.taken, refuse.received],
    ];
    let tester = solve3(rows, [hz, hz, hz]).ok_or_else(|| {
        let said: Vec<String> = rows
            .iter()
            .zip(["forwarder", "firewall without rules", "a slow VNF"])
            .map(|(r, what)| format!("{what}: generated {:.3}, taken {:.3}, received {:.3} Mpps", r[0] / 1e6, r[1] / 1e6, r[2] / 1e6))
            .collect();
        format!(
            "memif at {size} B: the tester's three runs do not tell its terms apart ({}): was the tester the limit in the first two?",
            said.join("; ")
        )
    })?;
    let mut hops = Vec::new();
    let mut hops_one_way = Vec::new();
    let mut availability = Vec::new();
    let mut linked = Vec::new();
    let mut links_one_way = Vec::new();
    let mut tunnels = Vec::new();
    let mut shared = Vec::new();
    let mut taking_turns = Vec::new();
    let mut taking_turns_working = Vec::new();
    let mut vnf_turns = Vec::new();
    let mut turns = Vec::new();
    for wait in &args.waits {
        let mut vnf_run = |vnf: &str, both_ways: bool, what: String| -> Result<f64, String> {
            let r = measure(runs.pvp(1, vnf, wait, both_ways), &what)?;
            vnf_bound(&r, &what)?;
            Ok(hz / r.received)
        };
        let heavy_cycles = vnf_run(&heavy, true, format!("{wait} hop"))?;
        // A round trip's work did not always make the VNF the limit (a calibration
        // failed on it at 1518 B, the tester at 3.49 Mpps): then twice that, for this
        // hop and every run after that uses the light work (still lighter than the
        // heavy one, which is three round trips or more).
        let light_cycles = match vnf_run(&light, true, format!("{wait} hop, light work")) {
            Ok(c) => c,
            Err(why) if 2 * light_work_cycles < cycles => {
                light_work_cycles *= 2;
                light_work = work_of(light_work_cycles);
                light = synthetic(light_work_cycles);
                vnf_run(&light, true, format!("{wait} hop, light work doubled"))
                    .map_err(|again| format!("{why}; with the light work doubled: {again}"))?
            }
            Err(why) => return Err(why),
        };
        // One way, the tester's round trip is cheaper than the one the light work was
        // sized by, and at large frames its light work did not always make the VNF the
        // limit (a calibration failed on it at 594 and 1518 B): the heavy work does,
        // its term then a difference of larger figures.
        let (one_way_cycles, one_way_work) = match vnf_run(&light, false, format!("{wait} hop one way")) {
            Ok(cycles) => (cycles, light_work),
            Err(_) => (vnf_run(&heavy, false, format!("{wait} hop one way, heavy work"))?, work),
        };
        // The light work split between two VNFs on one core, both ways: one link
        // between them in place of two half hops (polling VNFs there take turns, and
        // the turn is their limit, not the link).
        let halves = light_work_cycles.div_ceil(2);
        let pair = if wait == "polling" {
            None
        } else {
            let what = format!("{wait} link between two VNFs on one core");
            let half = synthetic(halves);
            let r = measure(runs.split(&[&half, &half], wait, true), &what)?;
            vnf_bound(&r, &what)?;
            Some(hz / r.received)
        };
        // cycles a frame = (hop + work) / a at both works; noise can put a past 1.
        let share = ((work - light_work) / (heavy_cycles - light_cycles)).clamp(0.5, 1.0);
        let hop = share * light_cycles - light_work;
        let hop_one_way = share * one_way_cycles - one_way_work;
        hops.push(hop);
        hops_one_way.push(hop_one_way);
        linked.push(pair.map(|cycles| share * cycles - hop - 2.0 * work_of(halves)));
        // Chains of k forwarders one way on one core (interrupt): the tester's ends a
        // hop one way, the k − 1 links what is left (the forwarders' few cycles in
        // them). A chain the tester could not keep busy is left out.
        let mut per_k_links = Vec::new();
        if sharing && wait != "polling" {
            for k in LINK_CHAINS {
                let what = format!("{wait} chain of {k} forwarders on one core, one way");
                let r = measure(runs.split(&vec!["forwarder"; k], wait, false), &what)?;
                per_k_links.push(match vnf_bound(&r, &what) {
                    Ok(()) => (share * hz / r.received - hop_one_way) / (k - 1) as f64,
                    Err(_) => f64::NAN,
                });
            }
        }
        links_one_way.push(per_k_links);
        // A crossing between hosts in place of a memif end: one forwarder one way whose
        // input crosses, then one whose output does; its core saturated by the kernel's
        // work (receive steering puts it there), the forwarder's few cycles in each.
        // Interrupt mode only: polling VNFs on one core take turns, and two of them
        // across the tunnel are held by their turns, not by its costs.
        tunnels.push(if sharing && wait != "polling" {
            let what = format!("{wait} link between hosts into a VNF");
            let into = measure(runs.across(&[2], wait), &what)?;
            let what = format!("{wait} link between hosts out of a VNF");
            let out = measure(runs.across(&[1], wait), &what)?;
            let what = format!("{wait} link between hosts, between two VNFs on one core");
            let between = measure(runs.across(&[1, 2], wait), &what)?;
            let half = hop_one_way / 2.0;
            let [t_gen, _, t_recv] = tester;
            Some([
                share * hz / into.received.max(1.0) - half,
                share * hz / out.received.max(1.0) - half,
                // Both its ends' work, and the kernel's between them, once.
                share * hz / between.received.max(1.0) - hop_one_way,
                // The tester's thread runs throughout: its time is every frame's.
                (hz - into.generated * t_gen - into.received * t_recv) / into.taken.max(1.0),
            ])
        } else {
            None
        });
        availability.push(share);
        let mut per_k = Vec::new();
        let mut carried = Vec::new();
        let mut carried_working = Vec::new();
        if sharing && wait == "polling" {
            // Polling VNFs never sleep: they share a core by preemption, and what that
            // costs each frame is measured with busy ones. Where the tester, driving k
            // chains, cannot keep k of them busy, more per core is not measured (the
            // largest measured k's is priced beyond).
            let mut tester_bound = false;
            for k in args.sharing_of(wait) {
                let what = format!("{wait} sharing at {k} per core");
                if tester_bound {
                    per_k.push(f64::NAN);
                    continue;
                }
                let r = measure(runs.pvp(k, &heavy, wait, true), &what)?;
                tester_bound = vnf_bound(&r, &what).is_err();
                per_k.push(if tester_bound {
                    f64::NAN
                } else {
                    share * hz / r.received - work - hop
                });
            }
        } else if sharing {
            // Waiting VNFs sleep and wake and take turns on their core: what k chains
            // of forwarders carry in all (their sharing shows there and in the link,
            // not as a cost per frame: measured so with busy VNFs, it swung from −47 to
            // 693 cycles between rounds a minute apart). VNFs with work sleep less
            // often: measured beside, interleaved.
            let working = synthetic(TURNS_WORK_CYCLES);
            for k in args.sharing_of(wait) {
                let r = measure(
                    runs.pvp(k, "forwarder", wait, true),
                    &format!("{wait} {k} forwarders taking turns"),
                )?;
                carried.push(r.received);
                let r = measure(
                    runs.pvp(k, &working, wait, true),
                    &format!("{wait} {k} VNFs with work taking turns"),
                )?;
                carried_working.push(r.received);
            }
        }
        shared.push(per_k);
        taking_turns.push(carried);
        taking_turns_working.push(carried_working);
        let mut per_vnf = Vec::new();
        for TurnVnf { preset, .. } in &args.turn_vnfs {
            let mut carried = Vec::new();
            if sharing && wait != "polling" {
                for k in args.sharing_of(wait) {
                    let r = measure(
                        runs.preset_pvp(k, preset, wait),
                        &format!("{wait} {k} {preset} VNFs taking turns"),
                    )?;
                    carried.push(r.received);
                }
            }
            per_vnf.push(carried);
        }
        vnf_turns.push(per_vnf);
        // Polling hops on one core take turns: each link passes at most a ring of
        // frames while every hop has its turn once.
        let mut per_k_turns = Vec::new();
        if sharing && wait == "polling" {
            let ring = f64::from(sfclab_io::memif::Config::default().ring_frames());
            for k in TURN_CHAINS {
                let what = format!("polling turns of {k} hops on one core");
                let r = measure(runs.split(&vec!["forwarder"; k], wait, false), &what)?;
                vnf_bound(&r, &what)?;
                per_k_turns.push(ring / (k as f64 * r.received.max(1.0)));
            }
        }
        turns.push(per_k_turns);
    }
    // The VNFs' NFs in a VNF process, after the NFs before them, the light work after
    // them: each NF's cycles are the share of the run with it over the run without.
    // Each run once: NFs of one VNF share their prefixes.
    let share = availability.first().copied().unwrap_or(1.0);
    let mut priced: Vec<(String, f64)> = Vec::new();
    let mut cycles_of = |yaml: String| -> Result<f64, String> {
        if let Some((_, cycles)) = priced.iter().find(|(y, _)| *y == yaml) {
            return Ok(*cycles);
        }
        let what = "an NF in a VNF";
        let r = measure(yaml.clone(), what)?;
        vnf_bound(&r, what)?;
        priced.push((yaml, hz / r.received));
        Ok(hz / r.received)
    };
    let mut in_vnf = Vec::new();
    for w in &args.vnf_nfs {
        // The light work does not always make the VNF the limit (a CI calibration in a
        // debug build failed on it at 0.38 Mpps, the run without the NF): the heavy
        // work does, the NF's cycles then a difference of larger figures.
        let mut pair = |work: &str| -> Result<f64, String> {
            let with = cycles_of(runs.vnf_nf(w, true, work))?;
            let without = cycles_of(runs.vnf_nf(w, false, work))?;
            Ok(with - without)
        };
        let nf = match pair(&light) {
            Ok(cycles) => cycles,
            Err(_) => pair(&heavy)?,
        };
        in_vnf.push(share * nf);
    }
    Ok(MemifRound {
        in_vnf,
        tunnels,
        tester,
        hops,
        hops_one_way,
        availability,
        linked,
        links_one_way,
        sharing: shared,
        taking_turns,
        taking_turns_working,
        vnf_turns,
        turns_work: work_of(TURNS_WORK_CYCLES),
        turns,
    })
}

/// `m x = b` for three unknowns (Cramer's rule, each row scaled to its first element);
/// `None` when the rows are too nearly alike to tell the unknowns apart.
fn solve3(m: [[f64; 3]; 3], b: [f64; 3]) -> Option<[f64; 3]> {
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let mut m = m;
    let mut b = b;
    for (row, bv) in m.iter_mut().zip(&mut b) {
        let scale = row[0];
        if !(scale.is_finite() && scale > 0.0) {
            return None;
        }
        row.iter_mut().for_each(|v| *v /= scale);
        *bv /= scale;
    }
    let d = det(m);
    if !d.is_finite() || d.abs() < 1e-3 {
        return None;
    }
    let mut x = [0.0; 3];
    for (i, xi) in x.iter_mut().enumerate() {
        let mut mi = m;
        for (row, &bv) in mi.iter_mut().zip(&b) {
            row[i] = bv;
        }
        *xi = det(mi) / d;
    }
    Some(x)
}

/// A point of repetitions' estimates: their median, and their range as its interval (a
/// term taken as a difference of runs may not be told from zero).
fn point(size: u16, runs: Vec<f64>) -> CurvePoint {
    let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    CurvePoint {
        size,
        cycles: median(&runs),
        interval: Some([lo, hi]),
        runs,
    }
}

/// The terms from every repetition's rounds, `rounds[i]` at `sizes[i]` (the first size's
/// rounds carry the sharing runs).
/// Each of the args' `vnf_nfs`, by its calibration key, with its cycles in a VNF process.
pub fn in_vnf_terms(args: &MemifTermsArgs, sizes: &[u16], rounds: &[Vec<MemifRound>]) -> Vec<(String, Curve)> {
    args.vnf_nfs
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let curve = Curve::new(
                sizes
                    .iter()
                    .zip(rounds)
                    .map(|(&size, rs)| point(size, rs.iter().map(|r| r.in_vnf[i]).collect()))
                    .collect(),
            );
            (w.key(), curve)
        })
        .collect()
}

/// The calibration keys of a VNF preset's NFs, as a scenario's model names them.
fn preset_keys(preset: &str) -> Result<Vec<String>, String> {
    let s = Scenario::from_text(
        &format!("chains: 1\nvnf: {preset}\n"),
        Path::new(preset),
        &ScenarioFlags::default(),
        &Settings::default(),
    )
    .map_err(|e| e.to_string())?;
    let model = s.model().map_err(|e| e.to_string())?;
    model
        .processes
        .first()
        .map(|p| p.nfs.clone())
        .ok_or_else(|| format!("the VNF preset {preset} makes no process"))
}

/// At each k of `ks`, what the rounds measured (`of` a round, in the order of `ks`): k,
/// the median and the runs. A run that is NaN (a k the tester could not keep busy) is
/// left out, and a k with none left.
fn per_k(ks: &[usize], rounds: &[MemifRound], of: impl Fn(&MemifRound) -> &Vec<f64>) -> Vec<(f64, f64, Vec<f64>)> {
    ks.iter()
        .enumerate()
        .take(rounds.first().map_or(0, |r| of(r).len()))
        .filter_map(|(i, &k)| {
            let runs: Vec<f64> = rounds.iter().map(|r| of(r)[i]).filter(|c| c.is_finite()).collect();
            (!runs.is_empty()).then(|| (k as f64, median(&runs), runs))
        })
        .collect()
}

/// What k VNFs taking turns carried, per k.
fn turns_points(ks: &[usize], rounds: &[MemifRound], of: impl Fn(&MemifRound) -> &Vec<f64>) -> Vec<TurnsPoint> {
    per_k(ks, rounds, of)
        .into_iter()
        .map(|(per_core, pps, runs)| TurnsPoint { per_core, pps, runs })
        .collect()
}

pub fn terms(args: &MemifTermsArgs, sizes: &[u16], rounds: &[Vec<MemifRound>]) -> MemifCalibration {
    let curve = |f: &dyn Fn(&MemifRound) -> f64| {
        Curve::new(
            sizes
                .iter()
                .zip(rounds)
                .map(|(&size, rs)| point(size, rs.iter().map(f).collect()))
                .collect(),
        )
    };
    let waits = args
        .waits
        .iter()
        .enumerate()
        .map(|(w, wait)| MemifWaitCalibration {
            wait: wait.clone(),
            hop: curve(&|r| r.hops[w]),
            hop_one_way: Some(curve(&|r| r.hops_one_way[w])),
            // Its switching between the pair included.
            same_core_link: rounds[0]
                .first()
                .is_some_and(|r| r.linked[w].is_some())
                .then(|| curve(&|r| r.linked[w].unwrap_or(f64::NAN))),
            same_core_link_one_way: per_k(&LINK_CHAINS, &rounds[0], |r| &r.links_one_way[w])
                .into_iter()
                .map(|(per_core, cycles, runs)| LinkPoint { per_core, cycles, runs })
                .collect(),
            availability: {
                let runs: Vec<f64> = rounds.iter().flatten().map(|r| r.availability[w]).collect();
                Some(sfclab_model::calibration::Availability {
                    share: median(&runs),
                    runs,
                })
            },
            turns: per_k(&TURN_CHAINS, &rounds[0], |r| &r.turns[w])
                .into_iter()
                .map(|(per_core, seconds, runs)| sfclab_model::calibration::Turn {
                    per_core,
                    seconds,
                    runs,
                })
                .collect(),
            // Measured for interrupt mode only.
            taking_turns: turns_points(&args.sharing_of(wait), &rounds[0], |r| &r.taking_turns[w]),
            vnf_turns: args
                .turn_vnfs
                .iter()
                .enumerate()
                .filter_map(|(v, kind)| {
                    let points = turns_points(&args.sharing_of(wait), &rounds[0], |r| &r.vnf_turns[w][v]);
                    (!points.is_empty()).then(|| sfclab_model::calibration::VnfTurns {
                        nfs: kind.nfs.clone(),
                        points,
                    })
                })
                .collect(),
            taking_turns_working: {
                let points = turns_points(&args.sharing_of(wait), &rounds[0], |r| &r.taking_turns_working[w]);
                let works: Vec<f64> = rounds[0].iter().map(|r| r.turns_work).collect();
                (!points.is_empty()).then(|| sfclab_model::calibration::WorkingTurns {
                    work_cycles: median(&works),
                    points,
                })
            },
            tunnel: {
                let runs =
                    |i: usize| -> Vec<f64> { rounds[0].iter().filter_map(|r| r.tunnels[w]).map(|t| t[i]).collect() };
                let measured = |i: usize| {
                    let runs = runs(i);
                    sfclab_model::calibration::Measured {
                        cycles: median(&runs),
                        runs,
                    }
                };
                (!runs(0).is_empty()).then(|| sfclab_model::calibration::TunnelTerms {
                    into_vnf: measured(0),
                    out_of_vnf: measured(1),
                    between_vnfs: measured(2),
                    tester_send: measured(3),
                })
            },
            // Measured for polling only (a k the tester could not keep busy left out).
            sharing: per_k(&args.sharing_of(wait), &rounds[0], |r| &r.sharing[w])
                .into_iter()
                .map(|(per_core, cycles, runs)| SharingPoint { per_core, cycles, runs })
                .collect(),
        })
        .collect();
    MemifCalibration {
        tester_generate: curve(&|r| r.tester[0]),
        tester_send: curve(&|r| r.tester[1]),
        tester_receive: curve(&|r| r.tester[2]),
        waits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_runs_tell_the_testers_three_terms_apart() {
        // T_gen 135, T_send 145, T_recv 180 on a 2.445 GHz clock.
        let t = [135.0, 145.0, 180.0];
        let hz = 2.445e9;
        let rows = [[1.0, 1.0, 1.0], [1.0, 0.86, 0.0], [1.0, 0.07, 0.07]];
        let m = rows.map(|r| {
            let per_frame: f64 = r.iter().zip(&t).map(|(a, b)| a * b).sum();
            let g = hz / per_frame;
            r.map(|v| v * g)
        });
        let x = solve3(m, [hz; 3]).unwrap();
        for (got, want) in x.iter().zip(t) {
            assert!((got - want).abs() < 1e-6, "{x:?}");
        }
        assert!(solve3([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 0.0]], [1.0; 3]).is_none());
    }

    #[test]
    fn every_presets_nf_is_priced_in_a_vnf_after_the_nfs_before_it_and_without_itself() {
        let args = MemifTermsArgs::new(
            vec!["interrupt".into()],
            std::time::Duration::from_millis(500),
            std::time::Duration::from_millis(200),
        )
        .with_vnf_nfs(crate::vnf_workloads::preset_workloads().unwrap());
        let runs = Runs {
            args: &args,
            size: 64,
            vnf_core: 1,
        };
        let work = "{synthetic: {cycles: 300}}";
        for w in &args.vnf_nfs {
            for with in [true, false] {
                let yaml = runs.vnf_nf(w, with, work);
                let s = Scenario::from_text(&yaml, Path::new("t"), &ScenarioFlags::default(), &Settings::default())
                    .unwrap_or_else(|e| panic!("{e}: {yaml}"));
                let m = s.model().unwrap();
                assert_eq!(m.processes.len(), 1, "{yaml}");
                let nfs = &m.processes[0].nfs;
                // The NFs before it, it (or not), the work.
                assert_eq!(nfs.len(), w.before.len() + usize::from(with) + 1, "{nfs:?}");
                assert_eq!(nfs.contains(&w.key()), with, "{nfs:?}");
                assert_eq!(m.streams.len(), 2, "both ways");
            }
        }
        // Each prefix run once: the multi-feature VNF's four NFs take five runs, not eight.
        assert!(args.vnf_nf_runs(64, work, 1).len() < 2 * args.vnf_nfs.len());
    }

    #[test]
    fn a_calibration_scenario_is_one_the_scenario_loader_takes() {
        let args = MemifTermsArgs::new(
            vec!["interrupt".into()],
            std::time::Duration::from_millis(500),
            std::time::Duration::from_millis(200),
        );
        let runs = Runs {
            args: &args,
            size: 512,
            vnf_core: 1,
        };
        let yaml = runs.pvp(4, "{synthetic: {cycles: 1500}}", "interrupt", true);
        let s = Scenario::from_text(&yaml, Path::new("t"), &ScenarioFlags::default(), &Settings::default()).unwrap();
        assert_eq!(s.chains().len(), 4);
        let m = s.model().unwrap();
        assert_eq!(m.wait, "interrupt");
        assert_eq!(m.streams.len(), 8, "both ways");
        assert_eq!(m.streams[0].offered_pps, None);
        assert_eq!(m.streams[0].frames, vec![(512.0, 1.0)]);
        // Three sizes of 7 runs; forwarders and VNFs with work taking turns at 2, 4 and
        // 8, chains of 5, 8 and 12 forwarders one way; the links between hosts into a
        // VNF, out of one and between two.
        assert_eq!(args.runs(3), 3 * 7 + 2 * 3 + 3 + 3);
        // Those cross the hosts' cable where their places change host.
        for (hosts, crossings) in [
            (vec![2], vec![Some(0), None]),
            (vec![1], vec![None, Some(0)]),
            (vec![1, 2], vec![None, Some(0), None]),
        ] {
            let yaml = runs.across(&hosts, "interrupt");
            let s =
                Scenario::from_text(&yaml, Path::new("t"), &ScenarioFlags::default(), &Settings::default()).unwrap();
            let m = s.model().unwrap();
            assert_eq!(m.streams.len(), 1, "one way");
            assert_eq!(m.streams[0].crossings, crossings, "{yaml}");
        }
    }
}
