//! `sfclab model calibrate | predict | rc | hardware` and `sfclab plan`: argument
//! parsing and rendering only; the measuring is `sfclab_bench::calibrate`, the
//! arithmetic `sfclab_model`.

use crate::{RunArgs, outcome};
use clap::{Args, Subcommand};
use sfclab_bench::calibrate::{CalibrateArgs, NfWorkload};
use sfclab_experiment::scenario::{Scenario, ScenarioFlags};
use sfclab_experiment::{ChainFileError, ChainSource, Experiment, Settings};
use sfclab_model::documents::{CalibrationRef, PlanDocument, RcDocument, ScenarioPredictionDocument};
use sfclab_model::{Calibration, ChainPrediction};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum ModelCmd {
    /// Measure every cost term of the model on this machine and store it (JSON,
    /// schema `sfclab.calibration/9`, with the machine and date): the compound base,
    /// each NF (every NF type's usual settings, and those of the chains given), the
    /// pipeline's stages and rings, per frame size.
    Calibrate(CalibrateCli),
    /// Predict a chain's maximum throughput from a calibration: the cycles per packet
    /// on every core as placed, each resource's capacity, the bottleneck, utilisation at
    /// the chain's rate, and the shape under overload. The chain as `sfclab run` takes it.
    Predict(Box<PredictCli>),
    /// Seed 000's RC model swept over chain length and frame size on a hardware profile:
    /// software-linked against NIC-switched, each resource's capacity and the bottleneck.
    /// CPU costs from a calibration (in-memory I/O: a kernel-bypass driver's lower bound)
    /// or given.
    Rc(RcCli),
    /// The NIC presets `predict --hardware` takes, each number with its source.
    Hardware {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct CalibrateCli {
    /// Frame sizes to calibrate (with FCS); predictions interpolate between them.
    #[arg(long, value_delimiter = ',', default_value = "64,512,1518")]
    sizes: Vec<u16>,
    /// Also calibrate the NFs of this chain (shorthand, chain file, or `default`: the
    /// embedded chain `sfclab run` runs, calibrated when no chain is named), with its
    /// traffic; repeatable.
    #[arg(long)]
    chain: Vec<String>,
    /// Only the NFs of `--chain`, not every NF type's usual settings.
    #[arg(long, requires = "chain")]
    only_chains: bool,
    /// Also calibrate these chainings in namespaces (needs root): `veth`, `nic-switch`,
    /// `linux`, `ovs`; chains of 1 and 3 forwarders, sfclab's tester on one core.
    #[arg(long, value_delimiter = ',')]
    technologies: Vec<String>,
    /// Also calibrate scenarios' terms (needs root): the tester thread and a VNF process
    /// joined by memif, per frame, and what sharing a core costs VNFs; with the NFs of
    /// the VNF presets and a licence.
    #[arg(long)]
    memif: bool,
    /// With --memif: the VNFs' wait modes to calibrate.
    #[arg(long, value_delimiter = ',', default_value = "interrupt,polling")]
    memif_waits: Vec<String>,
    /// Also calibrate the NFs of this scenario's VNFs (implies --memif); repeatable.
    #[arg(long)]
    scenario: Vec<PathBuf>,
    #[arg(long, default_value = "500ms")]
    duration: String,
    #[arg(long, default_value = "200ms")]
    warmup: String,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Core of the compound runs and first core of the pipeline's (default: the chain's usual core).
    #[arg(long)]
    core: Option<usize>,
    /// Take runs on two cores (pipelines, chains in namespaces) at one distance between
    /// the cores: a hypervisor moves vCPUs, and on a VM a ring between far cores costs
    /// several times more. The round trip of a cache line between them is sampled right
    /// before and after each run, and a run is repeated (up to 10 times) while either
    /// sample exceeds this many TSC cycles. `auto`: every run in one state of that round
    /// trip (within 2.5x of the first run's; a run kept after 10 tries moves the state
    /// to its own); 0: take runs as they come.
    #[arg(long, default_value = "auto", value_name = "CYCLES")]
    max_core_round_trip: String,
    /// Where to write the calibration.
    #[arg(long, short, default_value = "calibration.json")]
    output: PathBuf,
    /// Print the calibration (JSON) instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct PredictCli {
    /// The calibration to price the chain or scenario with (`sfclab model calibrate`);
    /// where there is none, one is measured for what is priced and kept here.
    #[arg(long, default_value = "calibration.json")]
    calibration: PathBuf,
    /// Offered load to show each resource's utilisation at (`2Mpps`; default: the
    /// chain's `rate`, if it sets one).
    #[arg(long)]
    offered: Option<String>,
    /// Add a NIC's line, switching engine and PCIe bus to the resources, and price the
    /// cores at its clock: a preset (`x520`, `xl710`, `e810`: `sfclab model hardware`) or
    /// a profile's JSON file.
    #[arg(long, value_name = "PRESET|FILE")]
    hardware: Option<String>,
    /// Price a scenario (many chains of VNF processes joined by memif, as `sfclab
    /// scenario` runs it) instead of a chain: its file; `--chains`, `--shape`, `--vnf` or
    /// `--chain-file` ask for one too. `--offered` is then the aggregate, split evenly.
    #[arg(long, value_name = "FILE", help_heading = "Scenario")]
    scenario: Option<PathBuf>,
    #[command(flatten)]
    scenario_flags: ScenarioFlags,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args)]
pub struct RcCli {
    /// A preset (`x520`: seed 000's DuT; `sfclab model hardware`) or a profile file.
    #[arg(long, value_name = "PRESET|FILE")]
    hardware: String,
    /// Take the CPU costs from this calibration: receive + send = the compound base
    /// (half each), each NF = `--nf`'s cost, each software link = a `noop`'s (a call).
    #[arg(long)]
    calibration: Option<PathBuf>,
    /// The NF of the chains, as the calibration keys it.
    #[arg(long, default_value = "forwarder")]
    nf: String,
    /// Cycles per packet to receive (`C_CPU,RX`); overrides the calibration's.
    #[arg(long)]
    rx_cycles: Option<f64>,
    /// Cycles per packet to send (`C_CPU,TX`).
    #[arg(long)]
    tx_cycles: Option<f64>,
    /// Cycles per packet of each NF (`C_SF`).
    #[arg(long)]
    nf_cycles: Option<f64>,
    /// Cycles per packet of a software link between NFs (`C_SW`).
    #[arg(long)]
    link_cycles: Option<f64>,
    /// The cores' clock, Hz (default: the profile's, else the calibration's TSC).
    #[arg(long)]
    cpu_hz: Option<f64>,
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,6,7,8")]
    lengths: Vec<usize>,
    /// Frame sizes with FCS.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256,512,1024,1518")]
    sizes: Vec<u16>,
    /// Print JSON (schema `sfclab.rc/1`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print one CSV row per chain length, size and chaining.
    #[arg(long)]
    csv: bool,
}

#[derive(Args)]
pub struct PlanCli {
    /// A chain and the rate it must carry: `CHAIN@RATE` (`'firewall -> nat44 -> router@5Mpps'`,
    /// `chain.yaml@2Gbit/s`), or a chain file with a `rate`; repeatable.
    #[arg(
        long = "demand",
        value_name = "CHAIN@RATE",
        required_unless_present_any = ["scenario", "chains", "shape", "vnf", "chain_file"],
        conflicts_with_all = ["scenario", "chains", "shape", "vnf", "chain_file"]
    )]
    demands: Vec<String>,
    /// Plan a scenario instead (seed 001): its chains' features and rates are the demand;
    /// the plan chooses each VNF's features (all in one, or split), the chains sharing a
    /// group's rate (--scale-out), the VNF cores and the wait mode. `--chains`,
    /// `--vnf`, `--split`... ask for one too; `--cores` is the most cores to use.
    #[arg(long, value_name = "FILE", help_heading = "Scenario")]
    scenario: Option<PathBuf>,
    #[command(flatten)]
    scenario_flags: ScenarioFlags,
    /// The scenario's demand in all (`2Mpps`, `10Gbit/s`), split evenly over its streams,
    /// instead of its rates.
    #[arg(long, help_heading = "Scenario")]
    offered: Option<String>,
    /// The share of each stream's frames it may lose (seed 001's 0.001 %).
    #[arg(long, default_value = "0.001%", help_heading = "Scenario")]
    loss: String,
    /// Let the plan spread a group's rate over more chains than it asks for (VNF
    /// instances and licences are then part of the cost).
    #[arg(long, help_heading = "Scenario")]
    scale_out: bool,
    /// With --scale-out: chains per group at most.
    #[arg(long, default_value_t = 64, help_heading = "Scenario")]
    max_chains: usize,
    /// The VNFs' wait modes to try (default: every one the calibration has).
    #[arg(long, value_delimiter = ',', help_heading = "Scenario")]
    waits: Vec<String>,
    /// Write the chosen deployment as a scenario file here (`sfclab scenario FILE` runs it).
    #[arg(long, value_name = "FILE", help_heading = "Scenario")]
    write: Option<PathBuf>,
    /// Print the trade-off as CSV, one row per deployment tried (with --scenario).
    #[arg(long, conflicts_with = "json", help_heading = "Scenario")]
    csv: bool,
    /// The calibration to price the chains with (`sfclab model calibrate`).
    #[arg(long, default_value = "calibration.json")]
    calibration: PathBuf,
    /// Cores the chains may use (default: the cores this process may run on).
    #[arg(long)]
    cores: Option<usize>,
    /// Layouts allowed: `compound`, `pipeline`, or both.
    #[arg(long, value_delimiter = ',', default_value = "compound,pipeline")]
    layouts: Vec<String>,
    /// The largest share of a core to count on (0.9 keeps a tenth in reserve).
    #[arg(long, default_value_t = 1.0)]
    max_utilisation: f64,
    /// Frame size of chains given as shorthand (as `sfclab run --size`).
    #[arg(long)]
    size: Option<String>,
    /// Print JSON (schema `sfclab.plan/1`).
    #[arg(long)]
    json: bool,
}

pub fn cmd_model(cmd: ModelCmd) -> ExitCode {
    match cmd {
        ModelCmd::Calibrate(a) => cmd_calibrate(a),
        ModelCmd::Predict(a) => cmd_predict(*a),
        ModelCmd::Rc(a) => cmd_rc(a),
        ModelCmd::Hardware { json } => {
            let presets = sfclab_model::hardware::presets();
            let text = if json {
                serde_json::to_string_pretty(&presets).expect("serialisable") + "\n"
            } else {
                let mut s = String::new();
                for p in &presets {
                    let _ = writeln!(s, "{}: {}", p.name, p.about);
                    for src in &p.sources {
                        let _ = writeln!(s, "  {src}");
                    }
                    let _ = writeln!(s);
                }
                s + "A profile file is the JSON of one preset's `profile` (`sfclab model hardware --json`).\n"
            };
            outcome::emit_then(&text, 0)
        }
    }
}

/// How `--chain` names the embedded default chain (examples/chains/default.yaml).
const DEFAULT_CHAIN_NAME: &str = "default";

/// A chain named on the command line: `default` (the embedded chain), a chain file, or
/// shorthand.
fn experiment_of(chain: &str, flags: &Settings) -> Result<Experiment, ChainFileError> {
    let source = if chain == DEFAULT_CHAIN_NAME {
        ChainSource::Default
    } else if Path::new(chain).is_file() {
        ChainSource::File(chain.into())
    } else {
        ChainSource::Shorthand(chain.into())
    };
    Experiment::load(&source, flags)
}

/// The NFs (with their traffic) of a chain given as shorthand or a chain file.
fn workloads_of(chain: &str) -> Result<Vec<NfWorkload>, String> {
    let experiment = experiment_of(chain, &Settings::default()).map_err(|e| format!("--chain {chain}: {e}"))?;
    Ok(workloads_in(&experiment))
}

/// The NFs of `experiment`, each with its traffic.
fn workloads_in(experiment: &Experiment) -> Vec<NfWorkload> {
    experiment
        .nfs()
        .iter()
        .map(|(_, nf)| NfWorkload {
            nf: nf.clone(),
            flows: experiment.traffic.flows,
            destinations: experiment.traffic.destinations.clone(),
            before: Vec::new(),
        })
        .collect()
}

fn calibrate_args(a: &CalibrateCli) -> Result<CalibrateArgs, String> {
    let (duration, warmup) =
        sfclab_bench::registry::repeated_window(a.repeat, &a.duration, &a.warmup).map_err(|e| e.to_string())?;
    if a.sizes.iter().any(|&s| !(64..=9018).contains(&s)) {
        return Err(format!("--sizes {:?}: each must be 64..=9018 bytes", a.sizes));
    }
    let mut nfs = if a.only_chains {
        Vec::new()
    } else {
        sfclab_bench::calibrate::default_nfs()?
    };
    // Without chains named, also the embedded default chain's NFs, so that
    // `model predict` with no chain (the chain `sfclab run` runs) is priced.
    let defaults = [DEFAULT_CHAIN_NAME.to_string()];
    let chains = if a.chain.is_empty() {
        &defaults[..]
    } else {
        &a.chain[..]
    };
    for chain in chains {
        sfclab_bench::calibrate::add_new(&mut nfs, workloads_of(chain)?);
    }
    let mut memif = if a.memif || !a.scenario.is_empty() {
        Some(
            sfclab_bench::memif_terms::MemifTermsArgs::new(a.memif_waits.clone(), duration, warmup)
                .with_turn_vnfs(sfclab_bench::memif_terms::MemifTermsArgs::preset_turn_vnfs()?),
        )
    } else {
        None
    };
    if let Some(m) = &mut memif {
        if let Some(w) = a
            .memif_waits
            .iter()
            .find(|w| !["polling", "interrupt"].contains(&w.as_str()))
        {
            return Err(format!("--memif-waits: `{w}` is neither `polling` nor `interrupt`"));
        }
        let mut scenario_nfs = sfclab_bench::vnf_workloads::preset_workloads()?;
        for path in &a.scenario {
            let s = Scenario::load(Some(path), &ScenarioFlags::default(), &Settings::default())
                .map_err(|e| format!("--scenario {e}"))?;
            sfclab_bench::calibrate::add_new(&mut scenario_nfs, sfclab_bench::vnf_workloads::scenario_workloads(&s));
        }
        // Every VNF's NF is priced in a VNF too.
        m.vnf_nfs = scenario_nfs.clone();
        sfclab_bench::calibrate::add_new(&mut nfs, scenario_nfs);
        sfclab_bench::calibrate::add_new(&mut nfs, [sfclab_bench::calibrate::memif_workload()]);
    }
    // The noop chain is the reference every term is measured against: always there.
    Ok(CalibrateArgs {
        sizes: a.sizes.clone(),
        nfs,
        duration,
        warmup,
        repeat: a.repeat,
        batch: a.batch,
        core: a.core,
        pipeline: true,
        wired: a.technologies.clone(),
        core_distance: sfclab_bench::cores::CoreDistance::from_flag(&a.max_core_round_trip)?,
        memif,
    })
}

/// `--max-core-round-trip`: `auto`, TSC cycles, or 0 (two-core runs taken as they come).
fn cmd_calibrate(a: CalibrateCli) -> ExitCode {
    let args = match calibrate_args(&a) {
        Ok(x) => x,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    let cal = match crate::progress::shown("steps", |progress| {
        sfclab_bench::calibrate::calibrate(&args, progress, &crate::ctrl_c())
    }) {
        Ok(c) => c,
        Err(e) => return outcome::fail(outcome::FAILURE, &e),
    };
    let text = serde_json::to_string_pretty(&cal).expect("serialisable") + "\n";
    if let Err(e) = std::fs::write(&a.output, &text) {
        return outcome::fail(outcome::FAILURE, &format!("--output {}: {e}", a.output.display()));
    }
    let interrupted = cal.method.notes.iter().any(|n| n.starts_with("interrupted"));
    let shown = if a.json {
        text
    } else {
        calibration_table(&cal) + &format!("\nwritten to {}\n", a.output.display())
    };
    outcome::emit_then(&shown, outcome::done(interrupted))
}

/// The terms as a table: one row per term, one column per size.
pub fn calibration_table(cal: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab calibration | {} ({} cores, TSC {:.3} GHz, kernel {}) | {} | {} x {:.1} s per run",
        cal.machine.cpu,
        cal.machine.cores,
        cal.machine.tsc_hz / 1e9,
        cal.machine.kernel,
        cal.date,
        cal.method.repeat,
        cal.method.duration_s
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let mut header = vec!["term (TSC cycles per packet)".to_string()];
    header.extend(cal.sizes.iter().map(|s| format!("{s} B [min–max]")));
    t.set_header(header);
    // `range`: the interval is the repetitions' range (shown in the cell), not a 95%
    // interval of a fitted slope.
    let mut row = |name: String, c: &sfclab_model::Curve, range: bool| {
        let mut cells = vec![name];
        cells.extend(c.points.iter().map(|p| {
            let cell = sfclab_bench::with_range(&p.runs, 0);
            match p.interval {
                Some(_) if range && p.indistinct_from_zero() => format!("{cell}: not told from zero"),
                Some(_) if range => cell,
                Some([lo, hi]) if p.indistinct_from_zero() => {
                    format!("{cell}, 95% {lo:.0} to {hi:.0}: not told from zero")
                }
                Some([lo, hi]) => format!("{cell}, 95% {lo:.0} to {hi:.0}"),
                None => cell,
            }
        }));
        t.add_row(cells);
    };
    row(
        "compound base (generator, loop, sink)".into(),
        &cal.compound_base,
        false,
    );
    for nf in &cal.nfs {
        row(format!("nf {}", short(&nf.key)), &nf.cycles, false);
    }
    if let Some(p) = &cal.pipeline {
        row(
            "pipeline: one stage (generator, ingress queue, sink)".into(),
            &p.single_stage,
            false,
        );
        row(
            "pipeline: first of two stages (+ enqueue)".into(),
            &p.first_stage,
            false,
        );
        row("pipeline: last of two stages (dequeue +)".into(), &p.last_stage, false);
        row(
            "pipeline: ring between stages on one core".into(),
            &p.same_core_link,
            false,
        );
    }
    for w in &cal.wired {
        row(format!("{}: chain ends (DUT core)", w.technology), &w.fixed, false);
        row(format!("{}: each hop (DUT core)", w.technology), &w.per_hop, false);
        if let Some(d) = &w.software_drops {
            let [short, long] = d.lengths;
            row(
                format!(
                    "{}: software drops at {short} hop(s), offered all (DUT core)",
                    w.technology
                ),
                &d.short,
                false,
            );
            row(
                format!(
                    "{}: software drops at {long} hops, offered all (DUT core)",
                    w.technology
                ),
                &d.long,
                false,
            );
        }
        let kpps = sfclab_model::Curve::new(
            w.tester_pps
                .points
                .iter()
                .map(|p| sfclab_model::CurvePoint {
                    size: p.size,
                    cycles: p.cycles / 1e3,
                    runs: p.runs.iter().map(|r| r / 1e3).collect(),
                    interval: None,
                })
                .collect(),
        );
        row(
            format!("{}: the tester's ceiling (kpps, not cycles)", w.technology),
            &kpps,
            false,
        );
    }
    if let Some(m) = &cal.memif {
        row("memif tester: per frame generated".into(), &m.tester_generate, true);
        row("memif tester: per frame a ring took".into(), &m.tester_send, true);
        row("memif tester: per frame received".into(), &m.tester_receive, true);
        for w in &m.waits {
            row(format!("memif {}: a VNF's hop (its NFs aside)", w.wait), &w.hop, true);
            if let Some(h) = &w.hop_one_way {
                row(format!("memif {}: a VNF's hop, frames one way", w.wait), h, true);
            }
            if let Some(l) = &w.same_core_link {
                row(
                    format!("memif {}: a link between two VNFs on one core", w.wait),
                    l,
                    true,
                );
            }
        }
    }
    let _ = writeln!(s, "{t}");
    if let Some(m) = &cal.memif {
        for w in &m.waits {
            // A term measured at a few k per core, its repetitions in the unit shown.
            let mut per_k = |what: &str, points: Vec<(f64, Vec<f64>)>, decimals: usize| {
                if points.is_empty() {
                    return;
                }
                let shown: Vec<String> = points
                    .iter()
                    .map(|(k, runs)| format!("{k} per core {}", sfclab_bench::with_range(runs, decimals)))
                    .collect();
                let _ = writeln!(
                    s,
                    "memif {}: {what} (at {} B): {}",
                    w.wait,
                    cal.sizes[0],
                    shown.join("; ")
                );
            };
            per_k(
                "sharing a core, cycles per frame beyond the hop",
                w.sharing.iter().map(|p| (p.per_core, p.runs.clone())).collect(),
                0,
            );
            per_k(
                "VNFs (forwarders) taking turns on one core carry in all, Mpps",
                w.taking_turns
                    .iter()
                    .map(|p| (p.per_core, p.runs.iter().map(|r| r / 1e6).collect()))
                    .collect(),
                2,
            );
            per_k(
                "a link one way in a chain of k forwarders on one core, cycles per frame",
                w.same_core_link_one_way
                    .iter()
                    .map(|p| (p.per_core, p.runs.clone()))
                    .collect(),
                0,
            );
            if let Some(t) = &w.taking_turns_working {
                per_k(
                    &format!(
                        "VNFs with {:.0} cycles of work taking turns carry in all, Mpps",
                        t.work_cycles
                    ),
                    t.points
                        .iter()
                        .map(|p| (p.per_core, p.runs.iter().map(|r| r / 1e6).collect()))
                        .collect(),
                    2,
                );
            }
            // A measured share or time: its repetitions scaled to the unit shown.
            let mut scaled = |what: &str, runs: &[f64], scale: f64, decimals: usize| {
                let shown: Vec<f64> = runs.iter().map(|r| r * scale).collect();
                let _ = writeln!(
                    s,
                    "memif {}: {what}: {}",
                    w.wait,
                    sfclab_bench::with_range(&shown, decimals)
                );
            };
            if let Some(a) = &w.availability {
                scaled("the share of its core's time a lone VNF gets, %", &a.runs, 100.0, 1);
            }
            for turn in &w.turns {
                scaled(
                    &format!("a process's turn on a core shared by {}, ms", turn.per_core),
                    &turn.runs,
                    1e3,
                    2,
                );
            }
            if let Some(t) = &w.tunnel {
                for (what, term) in [
                    (
                        "a link between hosts into a VNF, cycles per frame on its core",
                        &t.into_vnf,
                    ),
                    (
                        "a link between hosts out of a VNF, cycles per frame on its core",
                        &t.out_of_vnf,
                    ),
                    (
                        "a link between hosts between two VNFs on one core, cycles per frame there",
                        &t.between_vnfs,
                    ),
                    (
                        "the tester sending into a link between hosts, cycles per frame",
                        &t.tester_send,
                    ),
                ] {
                    scaled(what, &term.runs, 1.0, 0);
                }
            }
        }
    }
    for n in &cal.method.notes {
        let _ = writeln!(s, "  {n}");
    }
    s
}

/// A key short enough for a table cell (the router's generated table is long).
fn short(key: &str) -> String {
    sfclab_model::calibration::short_key(key, 60)
}

/// One `--demand CHAIN@RATE` as the model sees it. The rate is what follows the last
/// `@` when it parses as a rate (a chain file's own `rate` otherwise).
fn demand(text: &str, size: Option<&str>) -> Result<sfclab_model::Demand, String> {
    let (chain, rate) = match text.rsplit_once('@') {
        Some((c, r)) if r.trim().parse::<sfclab_traffic::Rate>().is_ok() => (c.trim(), Some(r.trim())),
        _ => (text.trim(), None),
    };
    let mut flags = Settings::default();
    if let Some(s) = size {
        flags = flags.size(
            s.parse::<sfclab_traffic::FrameSizes>()
                .map_err(|e| format!("--size {s}: {e}"))?,
        );
    }
    let experiment = experiment_of(chain, &flags).map_err(|e| format!("--demand {text}: {e}"))?;
    let model = experiment.chain_model().map_err(|e| format!("--demand {text}: {e}"))?;
    let total: f64 = model.frames.iter().map(|f| f.1).sum();
    let mean_frame = model.frames.iter().map(|(s, w)| s * w).sum::<f64>() / total;
    let rate = match rate {
        Some(r) => r.parse::<sfclab_traffic::Rate>()?,
        None => experiment.traffic.rate,
    };
    let target_pps = rate.pps(mean_frame).ok_or_else(|| {
        format!("--demand {text}: no target rate: write `CHAIN@RATE` (`@5Mpps`) or give the chain file a `rate`")
    })?;
    Ok(sfclab_model::Demand {
        name: experiment.name.clone(),
        chain: model,
        target_pps,
    })
}

fn cmd_rc(a: RcCli) -> ExitCode {
    let mut hw = match sfclab_model::hardware::load(&a.hardware) {
        Ok(h) => h,
        Err(e) => return outcome::fail(outcome::USAGE, &format!("--hardware {e}")),
    };
    let cal = match a.calibration.as_deref().map(Calibration::load).transpose() {
        Ok(c) => c,
        Err(e) => return outcome::fail(outcome::USAGE, &format!("--calibration {e}")),
    };
    if let Some(hz) = a.cpu_hz {
        hw.cpu_hz = hz;
    } else if hw.cpu_hz <= 0.0 {
        match &cal {
            Some(c) => hw.cpu_hz = c.machine.tsc_hz,
            None => {
                return outcome::fail(
                    outcome::USAGE,
                    "--cpu-hz: the profile names no clock and no calibration gives one",
                );
            }
        }
    }
    if cal.is_none() {
        let missing: Vec<&str> = [
            ("--rx-cycles", a.rx_cycles),
            ("--tx-cycles", a.tx_cycles),
            ("--nf-cycles", a.nf_cycles),
            ("--link-cycles", a.link_cycles),
        ]
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| *k)
        .collect();
        if !missing.is_empty() {
            return outcome::fail(
                outcome::USAGE,
                &format!(
                    "{}: give the costs, or a --calibration to take them from",
                    missing.join(", ")
                ),
            );
        }
    }
    let costs = |n: usize, size: f64| -> Result<sfclab_model::CpuCosts, String> {
        let from = |given: Option<f64>, calibrated: &dyn Fn(&Calibration) -> Result<f64, String>| match (given, &cal) {
            (Some(v), _) => Ok(v),
            (None, Some(c)) => calibrated(c),
            (None, None) => unreachable!("checked above"),
        };
        let nf = from(a.nf_cycles, &|c| c.nf_cycles(&a.nf, size))?;
        Ok(sfclab_model::CpuCosts {
            rx_cycles: from(a.rx_cycles, &|c| Ok(c.compound_base.at(size)? / 2.0))?,
            tx_cycles: from(a.tx_cycles, &|c| Ok(c.compound_base.at(size)? / 2.0))?,
            nf_cycles: vec![nf; n],
            link_cycles: from(a.link_cycles, &|c| c.nf_cycles("noop", size))?,
        })
    };
    let sizes: Vec<f64> = a.sizes.iter().map(|&s| f64::from(s)).collect();
    let points = match sfclab_model::sweep(&costs, &hw, &a.lengths, &sizes) {
        Ok(p) => p,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    let text = if a.json {
        let doc = RcDocument::new(
            hw.clone(),
            a.calibration.as_ref().map(|p| p.display().to_string()),
            points,
        );
        serde_json::to_string_pretty(&doc).expect("serialisable") + "\n"
    } else {
        rc_table(&points, &a.hardware, hw.cpu_hz, a.csv)
    };
    outcome::emit_then(&text, 0)
}

fn rc_table(points: &[sfclab_model::RcPoint], hardware: &str, hz: f64, csv: bool) -> String {
    let capacity = |p: &sfclab_model::RcPoint, name: &str| {
        p.prediction
            .resources
            .iter()
            .find(|r| r.name == name)
            .map_or("-".to_string(), |r| format!("{:.3}", r.max_pps / 1e6))
    };
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.nfs.to_string(),
                format!("{}", p.frame_bytes),
                match p.chaining {
                    sfclab_model::Chaining::SoftwareLinked => "software-linked".into(),
                    sfclab_model::Chaining::NicSwitched => "nic-switched".into(),
                },
                format!("{:.1}", p.cpu_cycles),
                capacity(p, "cpu"),
                capacity(p, "nic line"),
                capacity(p, "nic engine"),
                capacity(p, "pcie"),
                format!("{:.3}", p.prediction.max_pps / 1e6),
                p.prediction.bottleneck.clone(),
            ]
        })
        .collect();
    let header = [
        "nfs",
        "size_b",
        "chaining",
        "cpu_cycles",
        "cpu_mpps",
        "line_mpps",
        "engine_mpps",
        "pcie_mpps",
        "max_mpps",
        "bottleneck",
    ];
    if csv {
        let mut s = header.join(",") + "\n";
        for r in rows {
            s += &(r.join(",") + "\n");
        }
        return s;
    }
    let mut s = format!(
        "sfclab model rc | hardware {hardware}, CPU at {:.2} GHz | Mpps per resource\n",
        hz / 1e9
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header(header.to_vec());
    for r in rows {
        t.add_row(r);
    }
    let _ = writeln!(s, "{t}");
    s
}

pub fn cmd_plan(a: PlanCli) -> ExitCode {
    let cal = match Calibration::load(&a.calibration) {
        Ok(c) => c,
        Err(e) => return outcome::fail(outcome::USAGE, &format!("--calibration {e}")),
    };
    if a.csv && !a.demands.is_empty() {
        return outcome::fail(
            outcome::USAGE,
            "--csv is the trade-off of a scenario's plan (--scenario): a chain plan prints a table or --json",
        );
    }
    if a.demands.is_empty() {
        return match plan_scenario(&a, &cal) {
            Ok((text, feasible)) => outcome::emit_then(&text, if feasible { 0 } else { 1 }),
            Err(e) => outcome::fail(outcome::USAGE, &e),
        };
    }
    let mut demands = Vec::with_capacity(a.demands.len());
    for d in &a.demands {
        match demand(d, a.size.as_deref()) {
            Ok(x) => demands.push(x),
            Err(e) => return outcome::fail(outcome::USAGE, &e),
        }
    }
    if let Some(bad) = a
        .layouts
        .iter()
        .find(|l| !matches!(l.as_str(), "compound" | "pipeline"))
    {
        return outcome::fail(
            outcome::USAGE,
            &format!(
                "--layouts {bad}: the plan places `compound` and `pipeline` chains (chains in namespaces run all hops on one DUT core: predict them with `model predict`)"
            ),
        );
    }
    let limits = sfclab_model::PlanLimits {
        cores: a
            .cores
            .unwrap_or_else(|| sfclab_runtime::placement::allowed_cores().len().max(1)),
        compound: a.layouts.iter().any(|l| l == "compound"),
        pipeline: a.layouts.iter().any(|l| l == "pipeline"),
        max_utilisation: a.max_utilisation,
    };
    let result = match sfclab_model::plan(&cal, &demands, &limits) {
        Ok(r) => r,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    let feasible = result.feasible;
    let text = if a.json {
        let doc = PlanDocument::new(
            CalibrationRef::of(&a.calibration, &cal),
            a.max_utilisation,
            a.layouts.clone(),
            result,
        );
        serde_json::to_string_pretty(&doc).expect("serialisable") + "\n"
    } else {
        plan_table(&result, &cal, &a.demands)
    };
    // Exit 1 when the targets cannot be met: a script can tell.
    outcome::emit_then(&text, if feasible { 0 } else { 1 })
}

/// `sfclab plan --scenario`: the plan's document as JSON, or its tables; and whether the
/// demand can be met.
fn plan_scenario(a: &PlanCli, cal: &Calibration) -> Result<(String, bool), String> {
    use sfclab_model::scenario_plan::{DeploymentLimits, describe, plan_scenario};
    let mut settings = Settings::default();
    if let Some(size) = &a.size {
        settings = settings.size(
            size.parse::<sfclab_traffic::FrameSizes>()
                .map_err(|e| format!("--size {size}: {e}"))?,
        );
    }
    if let Some(text) = &a.offered {
        // The aggregate, split evenly over the streams as `sfclab scenario --rate` splits it.
        settings = settings.rate(
            text.parse::<sfclab_traffic::Rate>()
                .map_err(|e| format!("--offered {text}: {e}"))?,
        );
    }
    let scenario = Scenario::load(a.scenario.as_deref(), &a.scenario_flags, &settings).map_err(|e| e.to_string())?;
    let loss = sfclab_experiment::search::parse_goal(&a.loss)
        .map_err(|e| format!("--loss {e}"))?
        .loss_ratio;
    let demand = scenario.demand(loss).map_err(|e| format!("{}: {e}", scenario.name))?;
    let waits = match a.waits.is_empty() {
        false => a.waits.clone(),
        true => cal
            .memif
            .as_ref()
            .map(|m| m.waits.iter().map(|w| w.wait.clone()).collect())
            .unwrap_or_default(),
    };
    let limits = DeploymentLimits {
        max_cores: a.cores.unwrap_or(scenario.vnf_cores.len().max(1)),
        waits,
        scale_out: a.scale_out,
        max_chains: a.max_chains,
    };
    let plan = plan_scenario(cal, &demand, &limits)?;
    let chosen = plan.chosen_row();
    // What this machine's tester would need to offer the demand to the chosen deployment.
    let tester_utilisation = match chosen {
        Some(row) => {
            let model = sfclab_model::scenario_plan::deployment_model(&demand, &row.groups, &row.wait, row.cores);
            Some(
                sfclab_model::scenario::PricedScenario::new(cal, &model)?
                    .flow(1.0)
                    .tester_utilisation,
            )
        }
        None => None,
    };
    let scenario_file = match chosen {
        Some(row) => Some(scenario.deployed(&row.groups, &row.wait, row.cores)?),
        None => None,
    };
    if let (Some(path), Some(text)) = (&a.write, &scenario_file) {
        std::fs::write(path, text).map_err(|e| format!("--write {}: {e}", path.display()))?;
    }
    let feasible = plan.feasible;
    let doc = sfclab_model::documents::ScenarioPlanDocument {
        schema: sfclab_model::documents::SCENARIO_PLAN_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        scenario: scenario.name.clone(),
        calibration: CalibrationRef::of(&a.calibration, cal),
        cores_available: limits.max_cores,
        waits: limits.waits.clone(),
        scale_out: a.scale_out,
        loss,
        line_bps: demand.line_bps,
        nic_capacity_bps: demand.nic_capacity_bps,
        plan,
        tester_utilisation,
        scenario_file,
    };
    if a.json {
        return Ok((
            serde_json::to_string_pretty(&doc).expect("serialisable") + "\n",
            feasible,
        ));
    }
    if a.csv {
        return Ok((plan_csv(&doc.plan), feasible));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab plan | scenario `{}` | demand {} Mpps, loss at most {} % | up to {} core(s), memif {} | calibration of {} on {}",
        doc.scenario,
        mpps(doc.plan.demand_pps),
        loss * 100.0,
        doc.cores_available,
        doc.waits.join(" or "),
        cal.date,
        cal.machine.cpu
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "",
        "cores",
        "VNF processes",
        "per core",
        "deployment",
        "memif",
        "demand carried",
        "capacity Mpps",
        "headroom",
        "bottleneck",
    ]);
    for (i, r) in doc.plan.rows.iter().enumerate() {
        t.add_row([
            match (Some(i) == doc.plan.chosen, r.meets) {
                (true, _) => "chosen".to_string(),
                (false, true) => "meets".to_string(),
                (false, false) => String::new(),
            },
            r.cores.to_string(),
            r.processes.to_string(),
            format!("{:.1}", r.vnfs_per_core),
            describe(&r.groups),
            r.wait.clone(),
            format!("{:.1} %", r.worst_delivered * 100.0),
            mpps(r.capacity_pps),
            format!("{:.2}x", r.headroom),
            r.bottleneck.as_ref().map_or("-".into(), |b| b.to_string()),
        ]);
    }
    let _ = writeln!(s, "{t}");
    let _ = writeln!(
        s,
        "(demand carried: the worst stream's share of its demand; capacity: the demand scaled until something drops; the traffic comes from outside, so this machine's tester is not in the price)"
    );
    match doc.plan.chosen_row() {
        Some(row) => {
            let _ = writeln!(
                s,
                "plan: {} on {} core(s) ({} VNF processes, {:.1} per core), memif {}: the demand with {:.0} % to spare, {} next",
                describe(&row.groups),
                row.cores,
                row.processes,
                row.vnfs_per_core,
                row.wait,
                (row.headroom - 1.0) * 100.0,
                row.bottleneck.as_ref().map_or("nothing".into(), |b| b.to_string())
            );
            if let Some(u) = doc.tester_utilisation.filter(|u| *u > 1.0) {
                let _ = writeln!(
                    s,
                    "note: this machine's tester would need {u:.2} of its core to offer the demand: measured here, the plan is held by the tester"
                );
            }
            match &a.write {
                Some(path) => {
                    let _ = writeln!(
                        s,
                        "written to {}: run it with `sudo sfclab scenario {}`",
                        path.display(),
                        path.display()
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        "--write FILE writes it as a scenario file `sfclab scenario FILE` runs"
                    );
                }
            }
        }
        None => {
            let _ = writeln!(s, "NOT feasible:");
            for r in &doc.plan.reasons {
                let _ = writeln!(s, "  {r}");
            }
        }
    }
    Ok((s, feasible))
}

/// The trade-off, one row per deployment tried; the columns are the JSON's rows' (schema
/// `sfclab.scenario-plan/2`), the deployment in words.
fn plan_csv(p: &sfclab_model::scenario_plan::ScenarioPlan) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record([
        "chosen",
        "meets",
        "cores",
        "processes",
        "vnfs_per_core",
        "deployment",
        "wait",
        "worst_delivered",
        "capacity_mpps",
        "headroom",
        "bottleneck",
    ]);
    for (i, r) in p.rows.iter().enumerate() {
        let _ = w.write_record([
            (Some(i) == p.chosen).to_string(),
            r.meets.to_string(),
            r.cores.to_string(),
            r.processes.to_string(),
            format!("{:.3}", r.vnfs_per_core),
            sfclab_model::scenario_plan::describe(&r.groups),
            r.wait.clone(),
            format!("{:.6}", r.worst_delivered),
            format!("{:.6}", r.capacity_pps / 1e6),
            format!("{:.4}", r.headroom),
            r.bottleneck.as_ref().map_or(String::new(), |b| b.to_string()),
        ]);
    }
    String::from_utf8(w.into_inner().expect("a Vec takes every write")).expect("CSV of UTF-8 fields")
}

fn plan_table(p: &sfclab_model::PlanResult, cal: &Calibration, demands: &[String]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab plan | {} chain(s) on up to {} core(s) | calibration of {} on {} | search: {}",
        demands.len(),
        p.cores_available,
        cal.date,
        cal.machine.cpu,
        p.search
    );
    if !p.chains.is_empty() {
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        t.set_header(vec![
            "chain",
            "target Mpps",
            "layout",
            "replicas",
            "cores (per replica)",
            "capacity Mpps",
            "bottleneck of a replica",
        ]);
        for c in &p.chains {
            let cores: Vec<String> = c
                .cores_of_replicas
                .iter()
                .map(|r| r.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(","))
                .collect();
            t.add_row(vec![
                c.chain.clone(),
                format!("{:.3}", c.target_pps / 1e6),
                c.layout.clone(),
                c.replicas.to_string(),
                cores.join(" | "),
                format!("{:.3}", c.capacity_pps / 1e6),
                c.bottleneck.clone(),
            ]);
        }
        let _ = writeln!(s, "{t}");
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        t.set_header(vec!["core", "runs", "loops", "utilisation at target"]);
        for (k, c) in p.cores.iter().enumerate() {
            t.add_row(vec![
                k.to_string(),
                c.runs.join("\n"),
                c.loops.to_string(),
                format!("{:.0} %", c.utilisation * 100.0),
            ]);
        }
        let _ = writeln!(s, "{t}");
    }
    if p.feasible {
        let _ = writeln!(
            s,
            "every target met with {} of {} core(s)",
            p.cores_used, p.cores_available
        );
    } else {
        let _ = writeln!(s, "NOT feasible:");
        for r in &p.reasons {
            let _ = writeln!(s, "  {r}");
        }
    }
    s
}

/// The chain as the model sees it: its NFs' keys, frame sizes and layout.
fn cmd_predict(a: PredictCli) -> ExitCode {
    let f = &a.scenario_flags;
    let is_scenario =
        a.scenario.is_some() || f.chains.is_some() || f.shape.is_some() || f.vnf.is_some() || f.chain_file.is_some();
    if !a.calibration.exists() {
        // Nothing to price with: measure what this chain or scenario needs, and keep it.
        if let Err(e) = calibrate_for(&a, is_scenario) {
            return outcome::fail(outcome::FAILURE, &e);
        }
    }
    let cal = match Calibration::load(&a.calibration) {
        Ok(c) => c,
        Err(e) => return outcome::fail(outcome::USAGE, &format!("--calibration {e}")),
    };
    if is_scenario {
        return match predict_scenario(&a, &cal) {
            Ok(text) => outcome::emit_then(&text, 0),
            Err(e) => outcome::fail(outcome::USAGE, &e),
        };
    }
    let experiment = match crate::load_experiment(&a.run) {
        Ok(s) => s,
        Err(e) => return outcome::fail(outcome::USAGE, &e.to_string()),
    };
    let offered = match &a.offered {
        Some(text) => match text.parse::<sfclab_traffic::Rate>() {
            Ok(r) => r.pps(experiment.mean_frame()),
            Err(e) => return outcome::fail(outcome::USAGE, &format!("--offered {text}: {e}")),
        },
        None => experiment.traffic.rate.pps(experiment.mean_frame()),
    };
    let hardware = match a.hardware.as_deref().map(sfclab_model::hardware::load).transpose() {
        Ok(h) => h,
        Err(e) => return outcome::fail(outcome::USAGE, &format!("--hardware {e}")),
    };
    let document = match experiment.prediction((&a.calibration, &cal), hardware, offered) {
        Ok(d) => d,
        Err(e) => return outcome::fail(outcome::USAGE, &format!("{}: {e}", experiment.name)),
    };
    let text = if a.run.json {
        serde_json::to_string_pretty(&document).expect("serialisable") + "\n"
    } else {
        prediction_table(&experiment, &cal, &document.prediction, offered)
    };
    outcome::emit_then(&text, 0)
}

fn prediction_table(experiment: &Experiment, cal: &Calibration, p: &ChainPrediction, offered: Option<f64>) -> String {
    let mut s = String::new();
    let names: Vec<&str> = experiment.nfs().iter().map(|(n, _)| n.as_str()).collect();
    let _ = writeln!(
        s,
        "sfclab model predict | {} ({}) | calibration of {} on {}",
        experiment.name,
        names.join(" -> "),
        cal.date,
        cal.machine.cpu
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header(["core", "term", "TSC cycles/packet"]);
    for c in &p.cores {
        for term in &c.terms {
            t.add_row([c.core.clone(), term.what.clone(), format!("{:.1}", term.cycles)]);
        }
        t.add_row([c.core.clone(), "total".into(), format!("{:.1}", c.cycles_per_packet)]);
    }
    let _ = writeln!(s, "{t}");
    let mut r = comfy_table::Table::new();
    r.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let mut header = vec!["resource", "cost/packet", "capacity Mpps"];
    if offered.is_some() {
        header.push("utilisation");
    }
    r.set_header(header);
    for res in &p.resources {
        let mut row = vec![
            res.name.clone(),
            format!("{:.1} {}", res.cost_per_packet, res.unit),
            format!("{:.3}", res.max_pps / 1e6),
        ];
        if let Some(o) = offered {
            row.push(format!("{:.0} %", o / res.max_pps * 100.0));
        }
        r.add_row(row);
    }
    let _ = writeln!(s, "{r}");
    let _ = writeln!(
        s,
        "maximum {:.3} Mpps, bottleneck: {}\nunder overload: {} ({})",
        p.max_pps / 1e6,
        p.bottleneck,
        p.overload.shape,
        p.overload.why
    );
    if let (Some(pps), Some(drops)) = (p.overload.saturated_pps, p.overload.software_drops_cycles) {
        let _ = writeln!(
            s,
            "offered all the tester sends: {:.3} Mpps (software drops: {drops:.0} cycles per frame delivered)",
            pps / 1e6
        );
    }
    s
}

/// A calibration of what `a` prices (a chain's NFs and runtime; a scenario's memif terms
/// and its VNFs' NFs, which needs root), measured with the usual settings, with progress,
/// and written to `--calibration`.
fn calibrate_for(a: &PredictCli, is_scenario: bool) -> Result<(), String> {
    let (duration, warmup) = (
        std::time::Duration::from_millis(500),
        std::time::Duration::from_millis(200),
    );
    let file = a.calibration.display();
    let dir = match a.calibration.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        // Said before measuring for minutes, not after.
        return Err(format!(
            "--calibration {file}: no calibration there, and no directory {} to keep one in",
            dir.display()
        ));
    }
    let mut args = CalibrateArgs {
        sizes: vec![64, 512, 1518],
        nfs: Vec::new(),
        duration,
        warmup,
        repeat: 3,
        batch: 32,
        core: None,
        pipeline: false,
        wired: Vec::new(),
        core_distance: sfclab_bench::cores::CoreDistance::from_flag("auto")?,
        memif: None,
    };
    if is_scenario {
        if !sfclab_topology::running_as_root() {
            return Err(format!(
                "no calibration at {file}, and making one for a scenario needs root (its VNFs in namespaces): `sudo sfclab model calibrate --memif --scenario FILE -o {file}`"
            ));
        }
        let scenario =
            Scenario::load(a.scenario.as_deref(), &a.scenario_flags, &a.run.settings).map_err(|e| e.to_string())?;
        let wait = scenario.model().map_err(|e| format!("{}: {e}", scenario.name))?.wait;
        let vnf_nfs = sfclab_bench::vnf_workloads::scenario_workloads(&scenario);
        args.nfs = vnf_nfs.clone();
        args.nfs.push(sfclab_bench::calibrate::memif_workload());
        args.memif =
            Some(sfclab_bench::memif_terms::MemifTermsArgs::new(vec![wait], duration, warmup).with_vnf_nfs(vnf_nfs));
    } else {
        let experiment = crate::load_experiment(&a.run).map_err(|e| e.to_string())?;
        if experiment.chaining().in_namespaces() {
            return Err(format!(
                "no calibration at {file}: a chain in namespaces is calibrated with `sudo sfclab model calibrate --technologies {} -o {file}`",
                experiment.chaining()
            ));
        }
        args.pipeline = experiment.pipeline().is_some();
        args.nfs = workloads_in(&experiment);
    }
    eprintln!("no calibration at {file}: measuring the terms this needs, then keeping them there");
    let cal = crate::progress::shown("steps", |progress| {
        sfclab_bench::calibrate::calibrate(&args, progress, &crate::ctrl_c())
    })?;
    if cal.method.notes.iter().any(|n| n.starts_with("interrupted")) {
        return Err("interrupted while calibrating: nothing kept, nothing priced".into());
    }
    let text = serde_json::to_string_pretty(&cal).expect("serialisable") + "\n";
    std::fs::write(&a.calibration, text).map_err(|e| format!("--calibration {file}: {e}"))
}

/// `model predict` of a scenario: its document as JSON, or its tables.
fn predict_scenario(a: &PredictCli, cal: &Calibration) -> Result<String, String> {
    if a.hardware.is_some() {
        return Err("--hardware prices a chain's NIC; a scenario's NIC is its --line-rate and --nic-capacity".into());
    }
    let scenario =
        Scenario::load(a.scenario.as_deref(), &a.scenario_flags, &a.run.settings).map_err(|e| e.to_string())?;
    let mut model = scenario.model().map_err(|e| format!("{}: {e}", scenario.name))?;
    if let Some(text) = &a.offered {
        let rate = text
            .parse::<sfclab_traffic::Rate>()
            .map_err(|e| format!("--offered {text}: {e}"))?;
        let streams = model.streams.len() as f64;
        for s in &mut model.streams {
            s.offered_pps = rate.pps(s.mean_frame()).map(|p| p / streams);
        }
    }
    let doc = ScenarioPredictionDocument::new(scenario.name.clone(), (&a.calibration, cal), &model)?;
    Ok(if a.run.json {
        serde_json::to_string_pretty(&doc).expect("serialisable") + "\n"
    } else {
        scenario_prediction_table(&doc, cal)
    })
}

fn mpps(pps: f64) -> String {
    format!("{:.3}", pps / 1e6)
}

fn scenario_prediction_table(d: &ScenarioPredictionDocument, cal: &Calibration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab model predict | scenario `{}` | calibration of {} on {}",
        d.scenario, cal.date, cal.machine.cpu
    );
    let limits = [
        d.line_bps.map(|b| format!("line {:.2} Gbit/s per direction", b / 1e9)),
        d.nic_capacity_bps
            .map(|b| format!("NIC capacity {:.2} Gbit/s", b / 1e9)),
    ];
    let limits: Vec<String> = limits.into_iter().flatten().collect();
    let _ = writeln!(
        s,
        "{} VNF process(es) on {} core(s), memif {}{}",
        d.at_offered.processes.len(),
        d.vnf_cores,
        d.wait,
        if limits.is_empty() {
            String::new()
        } else {
            format!("; {}", limits.join(", "))
        }
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "VNF process",
        "term",
        "TSC cycles/frame",
        "arriving Mpps",
        "worked Mpps",
        "core share",
    ]);
    for p in &d.at_offered.processes {
        for (what, cycles) in &p.terms {
            t.add_row([
                p.name.clone(),
                short(what),
                format!("{cycles:.1}"),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        t.add_row([
            p.name.clone(),
            "total".into(),
            format!("{:.1}", p.cycles_per_frame),
            mpps(p.arriving_pps),
            mpps(p.worked_pps),
            format!("{:.0} %", p.core_share * 100.0),
        ]);
    }
    let _ = writeln!(s, "{t}");
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "chain",
        "direction",
        "offered Mpps",
        "generated Mpps",
        "received Mpps",
        "lost where (Mpps)",
        "limited by",
    ]);
    for st in &d.at_offered.streams {
        t.add_row([
            st.chain.clone(),
            if st.reverse { "reverse" } else { "forward" }.into(),
            st.offered_pps.map_or("max".into(), mpps),
            mpps(st.generated_pps),
            mpps(st.received_pps),
            st.dropped
                .iter()
                .map(|(w, p)| format!("{w} {}", mpps(*p)))
                .collect::<Vec<_>>()
                .join("\n"),
            st.bottleneck.as_ref().map_or("-".into(), ToString::to_string),
        ]);
    }
    let _ = writeln!(s, "{t}");
    let f = &d.at_offered;
    let _ = writeln!(
        s,
        "at the offered load: {} Mpps received of {} generated; the tester's core {:.0} % busy",
        mpps(f.received_pps),
        mpps(f.generated_pps),
        f.tester_utilisation.min(1.0) * 100.0
    );
    let c = &d.capacity;
    let _ = writeln!(
        s,
        "capacity: {} Mpps in all without loss{}, limited by {}",
        mpps(c.aggregate_pps),
        if f.streams.iter().all(|s| s.offered_pps.is_none()) {
            " (offered all the tester sends)".to_string()
        } else {
            format!(" ({:.3} x the offered rates)", c.scale)
        },
        c.bottleneck.as_ref().map_or("nothing".into(), ToString::to_string)
    );
    if let Some(next) = &c.next_limit {
        let _ = writeln!(
            s,
            "next limit, were that one lifted: {} at {} Mpps ({:+.1} %){}",
            next.bottleneck,
            mpps(next.aggregate_pps),
            next.margin_pct,
            if next.at_an_edge() {
                "; an edge: a measurement may meet either first"
            } else {
                ""
            }
        );
    }
    s
}
