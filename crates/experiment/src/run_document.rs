//! The document of one run (`sfclab run --json`, schema `sfclab.run/4`): a run's
//! reports with the chain that ran and the machine it ran on.

use sfclab_runtime::RunReport;
use sfclab_runtime::wired::{PathStep, TestbedReport, WireLoss, WiredReport};

use crate::diagnosis::nearly_all_dropped;
use crate::{Experiment, Machine, Reports};

/// Version of the run document's layout; bumped on any incompatible change.
pub const RUN_SCHEMA: &str = "sfclab.run/4";

/// The JSON document of a run: the report with its schema tag, the chain's name and full
/// NF settings, and the machine it ran on. Its JSON Schema is `sfclab schema run`
/// (docs/schema/run-4.json).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct RunDocument<'a> {
    /// Always `sfclab.run/4` for this layout.
    pub schema: &'static str,
    pub name: &'a str,
    pub machine: Machine,
    /// Every NF of the chain with its full settings, as a chain file writes them.
    pub chain_config: Vec<NfEntry<'a>>,
    #[serde(flatten)]
    pub report: &'a RunReport,
    /// A wired run (`ports: veth`, `chaining: veth`): the device under test's own runs
    /// when it is sfclab forwarding between its interfaces: replica k's (queue k's) at
    /// k, or hop i's at i; the document's report is then the tester's.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub dut: &'a [RunReport],
    /// `chaining: veth` with `isolation: process`: each hop process's own document
    /// (`sfclab run --json` of that hop, this schema), hop i's at i.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub dut_processes: &'a [serde_json::Value],
    /// A wired run: what was built (namespaces, interfaces and their kernel counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub testbed: Option<&'a TestbedReport>,
    /// A wired run: where the frames the tester did not get back went, whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire_loss: Option<&'a WireLoss>,
    /// A wired run through namespaces: the path from the tester through each hop and
    /// back, whole run: in, out, dropped and why at each step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<PathStep>,
    /// When an NF dropped nearly every packet it was given: which, why, and the key that
    /// changes it (a firewall's default deny, a router with no routes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nearly_all_dropped: Option<String>,
}

/// One NF of the chain: its name and settings.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct NfEntry<'a> {
    pub name: &'a str,
    pub config: &'a sfclab_nf::NfSpec,
}

impl<'a> RunDocument<'a> {
    /// The document of `reports`, a run of `experiment` on this machine.
    pub fn new(experiment: &'a Experiment, reports: &'a Reports) -> RunDocument<'a> {
        match reports {
            Reports::Chain(r) => RunDocument::of_chain(experiment, r),
            Reports::Wired(w) => RunDocument {
                path: w.path(),
                nearly_all_dropped: device_nearly_all_dropped(w),
                dut: &w.dut,
                dut_processes: &w.dut_processes,
                testbed: Some(&w.testbed),
                wire_loss: Some(&w.lost),
                ..RunDocument::of_chain(experiment, &w.tester)
            },
        }
    }

    /// The document of one report of a run of `experiment` in this process.
    pub fn of_chain(experiment: &'a Experiment, report: &'a RunReport) -> RunDocument<'a> {
        RunDocument {
            schema: RUN_SCHEMA,
            name: &experiment.name,
            machine: Machine::read(),
            chain_config: experiment
                .nfs
                .iter()
                .map(|(name, config)| NfEntry { name, config })
                .collect(),
            report,
            dut: &[],
            dut_processes: &[],
            testbed: None,
            wire_loss: None,
            path: Vec::new(),
            nearly_all_dropped: nearly_all_dropped(report),
        }
    }

    /// The document as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a run document serialises")
    }
}

/// The first NF of a wired run's device under test that dropped nearly everything.
pub fn device_nearly_all_dropped(w: &WiredReport) -> Option<String> {
    let hops = w.testbed.hops;
    w.dut.iter().enumerate().find_map(|(k, d)| {
        let line = nearly_all_dropped(d)?;
        Some(if hops > 1 {
            format!("hop {}: {line}", k + 1)
        } else {
            line
        })
    })
}
