//! `chaining: memif`: every hop an sfclab process of its own in its own network
//! namespace (`sfclab run --ports memif:IN,memif:OUT,role=client`, the chain file of its
//! NF), neighbours joined by memif, and the tester in this process joined by memif too,
//! so that isolated NFs talk through shared memory instead of the kernel.
//!
//! Each link is served by the side that receives on it and owned (its memory made) by
//! the side that sends: hop i serves its input on a socket file in its namespace's state
//! directory (removed with the namespace, by the run or by `sfclab cleanup` after a
//! `kill -9`), and connects its output to the next hop's; the tester serves the last
//! link and connects to the first. A hop that restarts serves its input again and its
//! neighbours reconnect.

use std::collections::BTreeMap;
use std::time::Duration;

use sfclab_io::memif::{Interface, MemifSettings, Role, Wait};
use sfclab_io::{InterfacePort, TesterLink};
use sfclab_runtime::{RunError, RunSettings, TestbedReport, WireLoss, WiredReport, run_compound_on};
use sfclab_topology::{Namespace, Topology};
use sfclab_traffic::{Generator, Sink};

use crate::chain_file::Experiment;
use crate::hop_processes::Plan;

/// How long the tester waits for the chain to connect.
const CONNECT_LIMIT: Duration = Duration::from_secs(30);

fn setting(key: &'static str, reason: impl std::fmt::Display) -> RunError {
    RunError::Setting {
        key,
        reason: reason.to_string(),
    }
}

/// Builds the namespaces, starts the hops, runs the tester across them and takes
/// everything down again (also on error: the topology's drop kills what runs inside).
pub(crate) fn run(spec: &Experiment, run: &RunSettings) -> Result<WiredReport, RunError> {
    let n = spec.nfs.len();
    if n == 0 {
        return Err(setting("chain", "a chain of hops needs at least one"));
    }
    let plan = Plan::of(spec).map_err(|e| setting("chaining", e))?;
    let mut topo = Topology::new().map_err(|e| setting("chaining", e))?;
    let tester_ns = topo.namespace("tester").map_err(|e| setting("chaining", e))?;
    let hops: Vec<Namespace> = (1..=n)
        .map(|i| topo.namespace(&format!("hop{i}")))
        .collect::<Result<_, _>>()
        .map_err(|e| setting("chaining", e))?;
    let dir = |ns: &Namespace| ns.state_dir().map_err(|e| setting("chaining", e));
    // Link k's socket: served by its receiver, hop k+1 (k < n) or the tester (k == n).
    let mut sockets = Vec::with_capacity(n + 1);
    for ns in hops.iter().chain([&tester_ns]) {
        sockets.push(dir(ns)?.join("in.sock"));
    }
    let wait_mode = spec.memif_wait.unwrap_or(Wait::Poll);
    let wait = match wait_mode {
        Wait::Interrupt { spin } => format!(",wait=interrupt,spin={}", spin.as_micros()),
        Wait::Poll => String::new(),
    };
    let endpoint = |k: usize, role: &str| format!("memif:{},role={role}{wait}", sockets[k].display());

    // The tester's receiving end listens first: the last hop connects to it.
    let tester_in = Interface::open(
        &MemifSettings::from_spec(&endpoint(n, "server"), Role::Server).map_err(|e| setting("ports", e))?,
    )
    .map_err(|e| setting("ports", e))?;
    let ends: Vec<(Namespace, String)> = hops
        .iter()
        .enumerate()
        .map(|(i, ns)| {
            (
                ns.clone(),
                format!("{},{}", endpoint(i, "server"), endpoint(i + 1, "client")),
            )
        })
        .collect();
    let mut processes = plan.start(&ends).map_err(|e| setting("chaining", e))?;
    let tester_out = Interface::open(
        &MemifSettings::from_spec(&endpoint(0, "client"), Role::Client).map_err(|e| setting("ports", e))?,
    )
    .map_err(|e| setting("ports", e))?;
    let mut tester_in = tester_in;
    let mut tester_out = tester_out;
    tester_out
        .wait_connected(CONNECT_LIMIT)
        .map_err(|e| setting("ports", e))?;
    tester_in
        .wait_connected(CONNECT_LIMIT)
        .map_err(|e| setting("ports", e))?;
    let t_out = InterfacePort::Memif(tester_out.port(0, false, true).map_err(|e| setting("ports", e))?);
    let t_in = InterfacePort::Memif(tester_in.port(0, true, false).map_err(|e| setting("ports", e))?);
    let generator = Generator::new(spec.traffic.clone(), run.batch).map_err(|(k, r)| setting(k, r))?;
    let mut wire = TesterLink::new(generator, t_out, t_in, run.batch, Duration::from_millis(300));
    let tester = run_compound_on(&mut wire, Sink::new(run.verify), sfclab_core::NamedNfs::new(), run);
    let external = processes.stop_all();
    let tester = tester?;
    let testbed = TestbedReport {
        run_name: topo.run_name().to_string(),
        device_under_test: format!(
            "sfclab chain of {n} hops, each an sfclab process in its own namespace, joined by memif ({})",
            wait_mode
        ),
        hops: n,
        namespaces: std::iter::once(&tester_ns)
            .chain(&hops)
            .map(|ns| ns.name().to_string())
            .collect(),
        queues: 1,
        interfaces: Vec::new(),
        processes: Vec::new(),
        switch: BTreeMap::new(),
    };
    drop(topo);
    let lost_tester: BTreeMap<String, u64> = sfclab_core::RxPort::drops(&wire)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let mut explained = BTreeMap::new();
    if external.dropped > 0 {
        explained.insert("dut".to_string(), external.dropped);
    }
    let unseen = lost_tester.get("unaccounted").copied().unwrap_or(0);
    let seen: u64 = explained.values().sum();
    Ok(WiredReport {
        tester,
        dut: Vec::new(),
        dut_processes: external.documents,
        testbed,
        lost: WireLoss {
            tester: lost_tester,
            explained,
            unaccounted: unseen.saturating_sub(seen),
            counted_beyond: seen.saturating_sub(unseen),
        },
    })
}
