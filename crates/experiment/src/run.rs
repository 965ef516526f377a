//! Runs a resolved chain on the runtime it names, and as a trial for the searches.

use sfclab_io::{InterfacePort, PcapSink, PcapSource, ReplayPace, SenderThread, TesterLink};
use sfclab_runtime::{
    ChainGraph, DeviceUnderTest, HopLinks, RunError, RunReport, RunSettings, WiredReport, WiredSettings,
    run_across_veth, run_compound_in, run_compound_on, run_parallel, run_pipeline, run_pool,
};
use sfclab_traffic::{Generator, Sink};

use crate::chain_file::Experiment;

/// Every report one run has: a chain run in this process reports itself; a wired run
/// (`ports: veth`, `linux`, a chaining in namespaces or over memif) reports what its
/// tester measured across the device under test, the device's own reports and the
/// testbed's interfaces.
// One per run, returned and read once: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Reports {
    Chain(RunReport),
    Wired(WiredReport),
}

impl Reports {
    /// What was measured across the chain: the run's own report, or its tester's.
    pub fn measured(&self) -> &RunReport {
        match self {
            Reports::Chain(r) => r,
            Reports::Wired(w) => &w.tester,
        }
    }

    /// [`Reports::measured`], the rest dropped.
    pub fn into_measured(self) -> RunReport {
        match self {
            Reports::Chain(r) => r,
            Reports::Wired(w) => w.tester,
        }
    }
}

impl Experiment {
    /// Runs the experiment on the runtime and ports it names and returns every report it
    /// has (see [`Reports`]).
    pub fn run(&self) -> Result<Reports, RunError> {
        let _turn = self.take_turn()?;
        run(self)
    }

    /// Waits for this run's turn when it takes turns (`take_turns`), else runs at once.
    fn take_turn(&self) -> Result<Option<crate::turns::Turn>, RunError> {
        self.take_turns
            .as_deref()
            .map(crate::turns::Turn::take)
            .transpose()
            .map_err(|reason| RunError::failed("take_turns", reason))
    }
}
use crate::chain_file::tester_core;
use crate::chaining::Chaining;
use crate::ports::{InterfaceIo, Ports, ServedHop};
use crate::settings::Isolation;
use sfclab_topology::MacvlanMode;
use sfclab_topology::ovs::OvsPort;

/// Builds the chain's NFs (once per replica) and runs it, or the testbed a wired run
/// names.
pub(crate) fn run(experiment: &Experiment) -> Result<Reports, RunError> {
    let chain = match &experiment.ports {
        Ports::Veth(_) | Ports::Linux(_) => return run_wired(experiment).map(Reports::Wired),
        Ports::Dut { input, output, io, hop } => run_between_interfaces(experiment, (input, output, io), hop),
        Ports::Tester {
            output,
            input,
            io,
            sender_core,
        } => test_across_interfaces(experiment, (output, input, io), *sender_core),
        Ports::Memory => run_in_memory(experiment),
    };
    chain.map(Reports::Chain)
}

/// A chain in this process between in-memory ports.
fn run_in_memory(experiment: &Experiment) -> Result<RunReport, RunError> {
    let build = || experiment.build_nfs();
    match &experiment.chaining {
        Chaining::Pipeline { settings } if experiment.replicas > 1 => run_parallel(
            experiment.traffic.clone(),
            (0..experiment.replicas).map(|_| build()).collect::<Result<_, _>>()?,
            settings,
        ),
        Chaining::Pipeline { settings, .. } => run_pipeline(experiment.traffic.clone(), experiment.graph()?, settings),
        _ => run_compound_between_ports(experiment),
    }
}

/// Builds the testbed (tester and device-under-test namespaces joined by veth pairs),
/// runs the tester's traffic across the device, and removes the testbed. The device
/// under test runs on the run's core, the tester on another one.
fn run_wired(experiment: &Experiment) -> Result<WiredReport, RunError> {
    if matches!(experiment.chaining, Chaining::Memif { .. }) {
        return crate::memif_chain::run(
            experiment,
            &RunSettings {
                core: tester_core(experiment.settings.core),
                ..experiment.settings.clone()
            },
        );
    }
    let io = experiment.ports.interface_io().copied().unwrap_or_default();
    let dut = match (&experiment.chaining, &experiment.ports) {
        (Chaining::Linux { .. }, _) => DeviceUnderTest::Linux {
            hops: experiment.hops.len(),
        },
        (Chaining::Ovs { .. }, _) => DeviceUnderTest::Ovs {
            hops: experiment.hops.len(),
            ports: match io {
                InterfaceIo::AfXdp { .. } => OvsPort::AfXdp,
                InterfaceIo::AfPacket => OvsPort::System,
            },
        },
        (_, Ports::Linux(_)) => DeviceUnderTest::Linux { hops: 1 },
        // One NF per hop, on its core.
        (
            Chaining::Veth {
                isolation: Isolation::Process,
                ..
            },
            _,
        ) => crate::hop_processes::device(experiment).map_err(|reason| RunError::setting("isolation", reason))?,
        (Chaining::Veth { .. }, _) => DeviceUnderTest::Hops {
            hops: hop_chains(experiment)?,
            links: HopLinks::Veth,
        },
        (Chaining::NicSwitch { vepa, sriov, .. }, _) => DeviceUnderTest::Hops {
            hops: hop_chains(experiment)?,
            links: match sriov {
                Some(nic) => HopLinks::Sriov(nic.clone()),
                None => HopLinks::NicSwitch(if *vepa { MacvlanMode::Vepa } else { MacvlanMode::Bridge }),
            },
        },
        // One replica per queue: each builds its own NFs (their state is the replica's).
        _ => DeviceUnderTest::Chain(
            (0..experiment.replicas())
                .map(|_| experiment.graph())
                .collect::<Result<_, _>>()?,
        ),
    };
    let ports = io.af_xdp_settings();
    let dut_core = experiment.settings.core;
    let tester_core = tester_core(dut_core);
    let wired = WiredSettings {
        io: io.kind(),
        dut_ports: ports.clone(),
        tester_ports: ports,
        dut_core,
        ..WiredSettings::default()
    };
    let run = RunSettings {
        core: tester_core,
        ..experiment.settings.clone()
    };
    run_across_veth(experiment.traffic.clone(), dut, &run, &wired)
}

type NamedNf = (String, Box<dyn sfclab_core::NetworkFunction>);

/// Each hop's NFs (one, or the list a chain file grouped into it) as the chain it runs,
/// on the hop's core.
fn hop_chains(experiment: &Experiment) -> Result<Vec<(ChainGraph, Option<usize>)>, RunError> {
    let mut nfs = experiment.build_nfs()?.into_iter();
    Ok(experiment
        .hops
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let chain: Vec<NamedNf> = nfs.by_ref().take(n).collect();
            (
                ChainGraph::from(chain),
                experiment.chaining.hop_cores().get(i).copied().flatten(),
            )
        })
        .collect())
}

/// How long a tester waits for the memif peers it is to test.
const MEMIF_PEER_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The receiving and sending ports of a run on interfaces or memif endpoints; `role`
/// for memif endpoints that name none. Memif ports are not waited for here: a zero-copy
/// client connects only once its pool is attached.
fn open_pair(
    (input, output, io): (&str, &str, &InterfaceIo),
    role: sfclab_io::memif::Role,
) -> Result<(InterfacePort, InterfacePort), RunError> {
    InterfacePort::open_pair(io.kind(), input, output, &io.af_xdp_settings(), role)
        .map_err(|reason| RunError::failed("ports", reason))
}

/// sfclab as the device under test: the chain forwards what arrives on `input` out of
/// `output` for the window (or until Ctrl-C).
fn run_between_interfaces(
    experiment: &Experiment,
    (input, output, io): (&str, &str, &InterfaceIo),
    hop: &ServedHop,
) -> Result<RunReport, RunError> {
    // The NFs are built before the hop says it forwards: a router's table takes tens of
    // milliseconds to fill, which would otherwise come out of the tester's warm-up (or
    // window) on a shared core.
    let graph = experiment.graph()?;
    if hop.both_ways {
        return run_both_ways(experiment, (input, output), hop, graph);
    }
    let capacity = shared_capacity(hop)?;
    let (mut rx, mut tx) = open_pair((input, output, io), sfclab_io::memif::Role::Server)?;
    let pool = zero_copy_pool(experiment, &mut rx, &mut tx)?;
    if let InterfacePort::Memif(port) = &mut tx {
        say_ready(experiment, hop, port)?;
    } else {
        say_ready_now(hop)?;
    }
    run_compound_in(rx, behind(tx, capacity), graph, &experiment.settings, pool)
}

/// The run's pool, made now and attached where a port is a zero-copy memif client: it
/// connects only once it has it, and a hop waits for its output's peer before it runs.
fn zero_copy_pool<R: sfclab_core::RxPort, T: sfclab_core::TxPort>(
    experiment: &Experiment,
    rx: &mut R,
    tx: &mut T,
) -> Result<Option<sfclab_core::PacketPool>, RunError> {
    if rx.shared_pool_need().is_none() && tx.shared_pool_need().is_none() {
        return Ok(None);
    }
    let pool = run_pool(rx, tx, experiment.settings.pool_size)?;
    rx.attach_pool(&pool);
    tx.attach_pool(&pool);
    Ok(Some(pool))
}

/// The capacity the hop's sending port shares with other processes, opened.
fn shared_capacity(hop: &ServedHop) -> Result<Option<sfclab_io::SharedLine>, RunError> {
    hop.shared_capacity
        .as_deref()
        .map(sfclab_io::SharedLine::open)
        .transpose()
        .map_err(|e| RunError::failed("shared_capacity", e))
}

/// A sending port behind a shared capacity, when there is one.
fn behind<P: sfclab_core::TxPort>(port: P, capacity: Option<sfclab_io::SharedLine>) -> sfclab_io::LinePort<P> {
    match capacity {
        Some(line) => sfclab_io::LinePort::shared(port, line),
        None => sfclab_io::LinePort::new(port, None),
    }
}

/// A device under test between two memif interfaces that forwards both ways at once.
fn run_both_ways(
    experiment: &Experiment,
    (input, output): (&str, &str),
    hop: &ServedHop,
    graph: sfclab_runtime::ChainGraph,
) -> Result<RunReport, RunError> {
    use sfclab_io::memif::{BothWaysIn, BothWaysOut, Interface, MemifSettings, Role};
    let failed = |reason: String| RunError::failed("memif", reason);
    let open = |endpoint: &str| -> Result<(sfclab_io::memif::MemifPort, sfclab_io::memif::MemifPort), RunError> {
        let mut i = MemifSettings::from_spec(endpoint, Role::Server)
            .and_then(|s| Interface::open(&s))
            .map_err(failed)?;
        Ok((
            i.port(0, true, false).map_err(failed)?,
            i.port(0, false, true).map_err(failed)?,
        ))
    };
    let (in_rx, in_tx) = open(input)?;
    let (out_rx, out_tx) = open(output)?;
    // Each side sends as a sender of its own on a shared capacity (a VNF's two virtual
    // functions, two queues its NIC serves in turn).
    let mut tx = BothWaysOut::new(
        behind(in_tx, shared_capacity(hop)?),
        behind(out_tx, shared_capacity(hop)?),
    );
    let mut rx = BothWaysIn::new(in_rx, out_rx);
    let pool = zero_copy_pool(experiment, &mut rx, &mut tx)?;
    say_ready(experiment, hop, tx.output().inner_mut())?;
    run_compound_in(rx, tx, graph, &experiment.settings, pool)
}

/// A hop says it forwards (its ready file) once its output reaches the next hop:
/// frames it sent before would be dropped for want of a peer.
fn say_ready(
    experiment: &Experiment,
    hop: &ServedHop,
    output: &mut sfclab_io::memif::MemifPort,
) -> Result<(), RunError> {
    if hop.ready_file.is_some() && output.role() == sfclab_io::memif::Role::Client {
        let stop = experiment.settings.stop.clone().unwrap_or_default();
        // Stopped while its next hop is gone (every pod deleted at once): not ready, and
        // the run about to start ends as soon as it begins.
        let connected = output
            .wait_connected_unless(MEMIF_PEER_LIMIT, stop.flag())
            .map_err(|reason| RunError::failed("memif", reason))?;
        if !connected {
            return Ok(());
        }
    }
    say_ready_now(hop)
}

fn say_ready_now(hop: &ServedHop) -> Result<(), RunError> {
    match &hop.ready_file {
        Some(ready) => {
            std::fs::write(ready, b"").map_err(|e| RunError::failed("ready_file", format!("{}: {e}", ready.display())))
        }
        None => Ok(()),
    }
}

/// sfclab as the tester: the generator's frames leave on `output`, come back on `input`
/// through whatever joins them, and are measured as in memory (loss, latency, order).
/// With `sender_core`, the sending half runs on a thread of its own there.
fn test_across_interfaces(
    experiment: &Experiment,
    (output, input, io): (&str, &str, &InterfaceIo),
    sender_core: Option<usize>,
) -> Result<RunReport, RunError> {
    // A tester starts its traffic once the device under test is there to take it; a
    // zero-copy client connects only once it has its pool, so the pool comes first.
    let (mut rx, mut tx) = open_pair((input, output, io), sfclab_io::memif::Role::Client)?;
    let pool = zero_copy_pool(experiment, &mut rx, &mut tx)?;
    let stop = experiment.settings.stop.clone().unwrap_or_default();
    for port in [&mut rx, &mut tx] {
        if let InterfacePort::Memif(port) = port {
            // Stopped before the device came: the run about to start ends at once.
            port.wait_connected_unless(MEMIF_PEER_LIMIT, stop.flag())
                .map_err(|reason| RunError::failed("ports", reason))?;
        }
    }
    let generator = Generator::new(experiment.traffic.clone(), experiment.settings.batch)
        .map_err(|(key, reason)| RunError::setting(key, reason))?;
    let (batch, quiet) = (experiment.settings.batch, WiredSettings::default().quiet);
    let sink = Sink::new(experiment.settings.verify);
    let Some(core) = sender_core else {
        let wire = TesterLink::new(generator, tx, rx, batch, quiet);
        return run_compound_in(wire, sink, sfclab_core::NamedNfs::new(), &experiment.settings, pool);
    };
    let place = SenderThread {
        core: Some(core),
        pool_size: experiment.settings.pool_size,
    };
    let wire = TesterLink::with_sender_thread(generator, tx, rx, batch, quiet, place)
        .map_err(|reason| RunError::setting("sender_core", reason))?;
    run_compound_in(wire, sink, sfclab_core::NamedNfs::new(), &experiment.settings, pool)
}

/// A compound chain between its ports: a pcap file at an end that names one (`replay`,
/// `capture`), the generator and the in-memory sink otherwise.
fn run_compound_between_ports(experiment: &Experiment) -> Result<RunReport, RunError> {
    let settings = &experiment.settings;
    let source = |replay: &crate::chain_file::Replay| {
        let pace = if replay.at_file_timestamps {
            ReplayPace::FileTimestamps
        } else {
            ReplayPace::Rate(experiment.traffic.rate)
        };
        PcapSource::open(&replay.file, replay.loops)
            .map(|s| s.paced(pace, sfclab_core::tsc::hz(), settings.batch))
            .map_err(|e| RunError::setting("replay", e))
    };
    let sink = |path: &std::path::PathBuf| {
        PcapSink::create(path, sfclab_core::tsc::hz()).map_err(|e| RunError::setting("capture", e))
    };
    let generator =
        || Generator::new(experiment.traffic.clone(), settings.batch).map_err(|(k, r)| RunError::setting(k, r));
    let graph = experiment.graph()?;
    match (&experiment.io.replay, &experiment.io.capture) {
        (Some(r), Some(c)) => run_compound_on(source(r)?, sink(c)?, graph, settings),
        (Some(r), None) => run_compound_on(source(r)?, Sink::new(settings.verify), graph, settings),
        (None, Some(c)) => run_compound_on(generator()?, sink(c)?, graph, settings),
        (None, None) => run_compound_on(generator()?, Sink::new(settings.verify), graph, settings),
    }
}
