//! A scenario's repetitions: each one every chain up, measured (or searched), down;
//! the document of them all.

use sfclab_runtime::{Progress, RunError};

use super::Scenario;
use super::document::{HostsReport, ScenarioDocument, summarize};
use super::run::run_once;
use crate::document::Machine;

/// Runs every repetition of `scenario`; each is a step of `progress`, and what runs
/// inside one (a search's top, a trial) is told as work.
pub fn run(scenario: &Scenario, progress: &mut Progress) -> Result<ScenarioDocument, RunError> {
    let template = scenario
        .chains()
        .first()
        .ok_or_else(|| RunError::setting("chains", "at least one chain"))?;
    let settings = &template.settings;
    let stopped = || settings.stop.as_ref().is_some_and(sfclab_runtime::Stop::requested);
    let mut runs = Vec::new();
    progress.plan(scenario.repeat);
    for k in 1..=scenario.repeat {
        if stopped() {
            break;
        }
        progress.working(&format!(
            "repetition {k}/{}: {}, {} standby, on cores {:?}",
            scenario.repeat,
            scenario
                .groups()
                .iter()
                .map(|g| format!("{} chain(s) of {}", g.chains, g.name))
                .collect::<Vec<_>>()
                .join(" + "),
            scenario.standby().len(),
            scenario.vnf_cores
        ));
        let r = match &scenario.search {
            Some(cfg) if scenario.search_per_chain => super::search::search_each_chain(scenario, cfg, k, progress)?,
            Some(cfg) => super::search::search_once(scenario, cfg, k, progress)?,
            None => run_once(scenario, k)?,
        };
        progress.finished(&format!(
            "repetition {k}: {:.3} Mpps in all, loss {:.4}%, set up in {:.1} s, torn down in {:.1} s",
            r.aggregate.throughput_mpps,
            r.aggregate.loss_ratio * 100.0,
            r.setup_s,
            r.teardown_s
        ));
        runs.push(r);
    }
    let interrupted = runs.len() < scenario.repeat || runs.iter().any(|r| r.interrupted);
    let summary = summarize(&runs, scenario.chains().len(), scenario.groups());
    let one = scenario.single_group();
    Ok(ScenarioDocument {
        schema: "sfclab.scenario/4",
        version: env!("CARGO_PKG_VERSION"),
        machine: Machine::read(),
        name: scenario.name.clone(),
        description: scenario.description.clone(),
        groups: scenario.groups().to_vec(),
        shape: one.map(|g| g.shape.clone()),
        vnf: one.map(|g| g.vnf.clone()),
        vnfs_per_chain: one.map(|g| g.vnfs_per_chain),
        bidirectional: one.map(|g| g.bidirectional),
        frame_sizes: one.map(|g| g.frame_sizes.clone()),
        chains: scenario.chains().len(),
        standby: scenario.standby().len(),
        offered: scenario.offered.clone(),
        line_rate_gbps: scenario.line_rate.map(|b| b / 1e9),
        nic_capacity_gbps: scenario.nic_capacity.map(|b| b / 1e9),
        vnf_rate_cap: one.and_then(|g| g.vnf_rate_cap.clone()),
        hosts: scenario.hosts.as_ref().map(|h| HostsReport {
            count: h.count,
            underlay: if h.count == 2 {
                "one cable between the hosts".into()
            } else {
                "each host cabled to a top-of-rack bridge".into()
            },
            vnf_hosts: h.vnfs.clone(),
            sink_host: h.sink,
            link_gbps: h.link.rate_bps / 1e9,
            charge_tunnel: h.link.charge_tunnel,
            crossings_per_chain: h.crossings(),
        }),
        chaining: if let Some(a) = scenario.attached() {
            format!(
                "attached: every VNF started elsewhere (a pod), memif within a host (sockets in {}){}",
                a.memif.display(),
                if scenario.hosts.is_some() {
                    ", the cluster's links between hosts"
                } else {
                    ""
                }
            )
        } else if scenario.veth {
            "veth (AF_XDP, sleeping when idle)".into()
        } else if scenario.hosts.is_some() {
            "memif within a host, a VXLAN tunnel between hosts (AF_XDP, sleeping when idle)".into()
        } else {
            "memif".into()
        },
        memif_wait: match (scenario.veth, template.chaining.memif_wait()) {
            (true, _) => "none".into(),
            (false, w) => w.unwrap_or(sfclab_io::memif::Wait::Poll).to_string(),
        },
        vnf_cores: match scenario.attached() {
            Some(_) => Vec::new(),
            None => scenario.vnf_cores.clone(),
        },
        tester_core: scenario.tester_core,
        oversubscription: scenario.attached().is_none().then(|| scenario.oversubscription()),
        duration_s: settings.duration.map_or(0.0, |d| d.as_secs_f64()),
        warmup_s: settings.warmup.as_secs_f64(),
        interrupted,
        runs,
        summary,
    })
}
