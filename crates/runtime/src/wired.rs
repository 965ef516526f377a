//! Runs across real interfaces: sfclab as the tester of a device under test that sits
//! in namespaces of its own, joined to the tester by veth pairs sfclab builds (and
//! always removes).
//!
//! The tester is a compound run whose source is a [`TesterLink`]: the generator's frames go
//! out on `t-out`, cross the device under test, and come back on `t-in` into the sink
//! (every port AF_XDP, or AF_PACKET with `io`), which measures throughput, loss and
//! latency across the device as it does in memory. The device under test is
//! - an sfclab chain: a compound run on its own core (one per replica, each on its own
//!   queue), forwarding from `d-in` to `d-out`, with its per-NF cycles and drops;
//! - a chain of hops, one namespace each (`chaining: veth | nic-switch`): each hop an
//!   sfclab run of its NF, hops on one core taking turns on its thread;
//! - the Linux kernel forwarding IPv4 through one or more namespaces (seed 002's
//!   baseline), or Open vSwitch bridges sfclab starts (`chaining: ovs`);
//! - anything else started on the testbed (`External`: testpmd, hop processes).
//!
//! Conservation holds in each run on its own; across the wire, what the tester sent
//! and never saw again is its `unaccounted` drop, beside the DUT's own drops, every
//! interface's kernel counters, the receiving sockets' and the switch's, which say
//! where it went when anything can.

use crate::chain::ChainGraph;
use crate::compound::{run_compound_on, run_hops_on};
use crate::report::RunReport;
use crate::settings::{RunError, RunSettings};
use serde::Serialize;
use sfclab_core::{NamedNfs, RxPort};
use sfclab_io::tester_link::IN_FLIGHT_AT_DISCONNECT;
use sfclab_io::{AfXdpSettings, InterfacePort, IoKind, QueueSet, TesterLink};
use sfclab_topology::ovs::{OvsPort, OvsSwitch};
use sfclab_topology::{Interface, LinkCounters, MacvlanMode, SriovNic, Testbed};
use sfclab_traffic::{Generator, GeneratorConfig, Sink};
use std::collections::BTreeMap;
use std::time::Duration;

/// What the tester measures.
pub enum DeviceUnderTest {
    /// An sfclab chain forwarding between `d-in` and `d-out`, one replica per graph:
    /// replica k is a compound run on its own core that receives on queue k of `d-in`
    /// (AF_XDP) or as member k of a flow-hash fanout group (AF_PACKET) and sends on
    /// `d-out`'s queue k; the tester spreads its flows over the queues by hash, as RSS.
    Chain(Vec<ChainGraph>),
    /// A chain of hops (`chaining: veth`): hop i runs its graph in a namespace of its
    /// own between its `d-in` and `d-out`, joined to the next hop by a veth pair; hops
    /// with the same core run in turn on that core's thread (hops without a core share
    /// one unpinned thread).
    Hops {
        hops: Vec<(ChainGraph, Option<usize>)>,
        links: HopLinks,
    },
    /// The Linux kernel forwarding IPv4 through `hops` namespaces in a row (seed 002's
    /// baseline; `chaining: linux`).
    Linux { hops: usize },
    /// Open vSwitch (`chaining: ovs`): `hops` bridges on the userspace datapath in one
    /// namespace, each forwarding from its `s<i>-in` to its `s<i>-out` port, joined by
    /// veth pairs; the PMD threads on the DUT's core.
    Ovs { hops: usize, ports: OvsPort },
    /// Something else forwarding between them (a peer such as testpmd, or sfclab hops
    /// as processes of their own): `start` starts it in the built testbed (`hops`
    /// namespaces joined by veth; 1: the one DUT namespace) before the tester sends,
    /// and what it returns is stopped once the tester has finished.
    External {
        /// What it is, for the report (`dpdk-testpmd io forwarding (net_af_xdp)`).
        label: String,
        hops: usize,
        start: ExternalStart,
    },
}

/// A running external device under test.
pub trait RunningDut: Send {
    /// Stops it (after the tester finished); what it counted, if it can say.
    fn stop(self: Box<Self>) -> ExternalOutcome;
}

/// What an external device under test reports when stopped.
#[derive(Debug, Default)]
pub struct ExternalOutcome {
    /// Frames it dropped itself (its NFs, its ports), whole run: they explain the
    /// tester's loss as an sfclab DUT's drops do.
    pub dropped: u64,
    /// Per hop, frames the kernel dropped before its receiving sockets saw them.
    pub socket_drops: Vec<(usize, u64)>,
    /// Its own result documents, hop by hop (`sfclab run --json` of each hop process).
    pub documents: Vec<serde_json::Value>,
}

/// What joins the hops of an sfclab chain in namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HopLinks {
    /// A veth pair from each hop to the next (`chaining: veth`).
    Veth,
    /// Every hop's two ends are "virtual functions" (macvlans) of one emulated NIC whose
    /// switch carries every frame from hop to hop (`chaining: nic-switch`): each hop
    /// must address the next one's receiving function (`vf_in_mac`), the last one the
    /// tester's `t-in` (`TESTER_IN_MAC`).
    NicSwitch(MacvlanMode),
    /// The same over a real NIC's embedded switch: every hop's ends are SR-IOV virtual
    /// functions, the tester's ports the machine's interfaces cabled to the NIC.
    Sriov(SriovNic),
}

/// Starts an external device under test in a testbed; its guard stops it when dropped.
pub type ExternalStart = Box<dyn FnOnce(&Testbed) -> Result<Box<dyn RunningDut>, String> + Send>;

/// How the testbed's ports are opened and how long frames in flight are waited for.
#[derive(Debug, Clone)]
pub struct WiredSettings {
    /// AF_XDP (the default) or AF_PACKET, for every port of the testbed.
    pub io: IoKind,
    /// The tester's ports' kind when it differs from `io` (to test DUTs of either kind
    /// with the same tester).
    pub tester_io: Option<IoKind>,
    /// The sfclab DUT's AF_XDP ports (`d-in` receives, `d-out` sends).
    pub dut_ports: AfXdpSettings,
    /// The tester's ports (`t-out` sends, `t-in` receives).
    pub tester_ports: AfXdpSettings,
    /// Core of the DUT's thread (the tester's is the run settings' `core`).
    pub dut_core: Option<usize>,
    /// How long the end of a phase waits after the last frame came back.
    pub quiet: Duration,
}

impl Default for WiredSettings {
    fn default() -> WiredSettings {
        WiredSettings {
            io: IoKind::AfXdp,
            tester_io: None,
            dut_ports: AfXdpSettings::default(),
            tester_ports: AfXdpSettings::default(),
            dut_core: None,
            // A loaded machine can deschedule the DUT's thread for tens of milliseconds.
            quiet: Duration::from_millis(300),
        }
    }
}

/// One interface of the testbed, what the kernel counted on it during the run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InterfaceReport {
    pub namespace: String,
    /// `t-out` (the tester sends), `d-in` (the DUT receives), `d-out` and `t-in` (the way back).
    pub interface: String,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
    pub tx_errors: u64,
}

/// What was built for the run, so a reader knows exactly what was measured.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TestbedReport {
    /// `sfclab-<pid>-<n>`: the namespaces' names start with it.
    pub run_name: String,
    /// What forwarded: `sfclab chain (af_xdp)`, `sfclab chain of 3 hops, each in its own
    /// namespace ...`, `Linux IPv4 forwarding` (through N namespaces), or a peer.
    pub device_under_test: String,
    /// Hops in a row the traffic crosses (1 but for `chaining: veth | linux | ovs`).
    pub hops: usize,
    /// The namespaces built, the tester's first.
    pub namespaces: Vec<String>,
    /// Queues on every interface: one per replica of an sfclab DUT, else 1.
    pub queues: u32,
    pub interfaces: Vec<InterfaceReport>,
    /// Processes the run started for the device under test (`ovs-vswitchd (pid N)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<String>,
    /// A software switch's counters over the run (`chaining: ovs`): datapath lookups
    /// (`datapath hit`, `missed`, `lost`) and each port's drop and error counters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub switch: BTreeMap<String, u64>,
}

/// The tester's run (across the device), the DUT's own runs when it is an sfclab chain,
/// and the testbed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct WiredReport {
    pub tester: RunReport,
    /// An sfclab DUT's runs: replica k's at k, or hop i's at i (empty for any other device).
    pub dut: Vec<RunReport>,
    /// An external DUT's own result documents, hop by hop (sfclab hops run as processes
    /// of their own: each one's `sfclab run --json`, schema sfclab.run/4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dut_processes: Vec<serde_json::Value>,
    pub testbed: TestbedReport,
    /// Where what the tester lost went, over the whole run.
    pub lost: WireLoss,
}

/// From an sfclab process's run report (`sfclab run --json`: a hop of a chain, a device
/// under test): its busy cycles per frame less its sends' waits for room on a full ring,
/// and those waits per frame. A send that finds the next ring full yields the core and
/// looks again (backpressure): on a core the hops share, that time is the other hops'
/// work; on a core of its own, the next side's slowness. Neither is this process's cost.
pub fn work_and_waits(doc: &serde_json::Value) -> Option<(f64, f64)> {
    let busy = doc["busy_cycles_per_packet"].as_f64()?;
    let frames = doc["generated"].as_u64().filter(|&n| n > 0)? as f64;
    let waited: f64 = doc["places"]
        .as_array()?
        .iter()
        .filter_map(|p| p["counters"]["tx_full_wait_ticks"].as_f64())
        .sum();
    let waits = waited / frames;
    Some((busy - waits, waits))
}

/// Builds the testbed, runs the tester's traffic across the device under test with
/// `run`'s window, and takes everything down again (also on error). `run.core` is the
/// tester's core.
pub fn run_across_veth(
    traffic: GeneratorConfig,
    dut: DeviceUnderTest,
    run: &RunSettings,
    wired: &WiredSettings,
) -> Result<WiredReport, RunError> {
    let (hop_count, queues) = shape_of(&dut)?;
    let bed = build_testbed(&dut, hop_count, queues)?;
    let Device {
        what: device_under_test,
        threads,
        switch,
        external,
    } = start_device(dut, &bed, wired, queues)?;
    let switch_before = switch_counters(switch.as_ref())?;
    let before = counters(&bed)?;
    let backlog_before = softnet_dropped();
    let dut_stop = crate::Stop::new();
    let dut_settings = |core: Option<usize>| RunSettings {
        duration: Some(Duration::from_secs(86_400)),
        count: None,
        warmup: Duration::ZERO,
        core,
        verify: false,
        reply: false,
        stop: Some(dut_stop.clone()),
        ..run.clone()
    };
    // An external DUT starts before the tester opens its ports and sends; it stops when
    // its guard is dropped, after the tester finished.
    let external_guard = match external {
        Some(start) => Some(start(&bed).map_err(|e| RunError::failed("device_under_test", e))?),
        None => None,
    };
    let tester_io = wired.tester_io.unwrap_or(wired.io);
    let open = |end: &Interface, receive: bool| {
        open_queues_in_namespace(tester_io, end, &wired.tester_ports, receive, queues)
            .map_err(|e| RunError::failed("ports", e))
    };
    let t_out = QueueSet::new(open(&bed.tester_out, false)?, run.batch);
    let t_in = QueueSet::new(open(&bed.tester_in, true)?, run.batch);
    let generator = Generator::new(traffic, run.batch).map_err(|(k, r)| RunError::setting(k, r))?;
    let mut wire = TesterLink::new(generator, t_out, t_in, run.batch, wired.quiet);

    let (tester, dut_reports) = std::thread::scope(|s| {
        // The DUT first, so it is forwarding before the first frame leaves the tester.
        let dut_threads: Vec<_> = threads
            .into_iter()
            .map(|t| {
                let settings = dut_settings(t.core);
                s.spawn(move || t.run(&settings))
            })
            .collect();
        let tester = run_compound_on(&mut wire, Sink::new(run.verify), NamedNfs::new(), run);
        // The tester drained what it could: the DUT stops after it.
        std::thread::sleep(Duration::from_millis(10));
        dut_stop.request();
        let dut: Vec<_> = dut_threads
            .into_iter()
            .map(|t| t.join().expect("a DUT thread panicked"))
            .collect();
        (tester, dut)
    });
    let external = external_guard.map(|g| g.stop()).unwrap_or_default();
    let switch_after = switch_counters(switch.as_ref())?;
    let processes = switch.as_ref().map(OvsSwitch::processes).unwrap_or_default();
    drop(switch);
    let after = counters(&bed)?;
    let backlog_dropped = softnet_dropped().saturating_sub(backlog_before);
    let testbed = TestbedReport {
        run_name: bed.run_name().to_string(),
        device_under_test,
        hops: hop_count,
        namespaces: bed.namespaces().iter().map(|n| n.name().to_string()).collect(),
        queues,
        interfaces: bed
            .interfaces()
            .iter()
            .zip(before.iter().zip(&after))
            .map(|(end, (b, a))| interface_report(end, &a.since(b)))
            .collect(),
        processes,
        switch: switch_after
            .iter()
            .map(|(k, v)| (k.clone(), v - switch_before.get(k).copied().unwrap_or(0).min(*v)))
            .collect(),
    };
    drop(bed);
    let tester = tester?;
    let mut dut: Vec<(usize, RunReport)> = Vec::new();
    for thread in dut_reports {
        dut.extend(thread?);
    }
    dut.sort_by_key(|(i, _)| *i);
    let mut dut: Vec<RunReport> = dut.into_iter().map(|(_, r)| r).collect();
    for d in &mut dut {
        // The DUT was stopped by the tester finishing, not by the user.
        d.interrupted = tester.interrupted;
    }
    let lost = wire_loss(&wire.drops(), &testbed, (&tester, &dut, &external), backlog_dropped);
    Ok(WiredReport {
        tester,
        dut,
        dut_processes: external.documents,
        testbed,
        lost,
    })
}

/// The device's hops and the queues of each interface (a replica per queue); a device
/// of none is refused.
fn shape_of(dut: &DeviceUnderTest) -> Result<(usize, u32), RunError> {
    Ok(match dut {
        DeviceUnderTest::Chain(replicas) if replicas.is_empty() => {
            return Err(RunError::setting(
                "replicas",
                "the device under test needs at least one replica",
            ));
        }
        DeviceUnderTest::Hops { hops, .. } if hops.is_empty() => {
            return Err(RunError::setting("chain", "a chain of hops needs at least one"));
        }
        DeviceUnderTest::Linux { hops: 0 } | DeviceUnderTest::Ovs { hops: 0, .. } => {
            return Err(RunError::setting("chain", "a chain needs at least one hop"));
        }
        DeviceUnderTest::Chain(replicas) => (1, replicas.len() as u32),
        DeviceUnderTest::Hops { hops, .. } => (hops.len(), 1),
        DeviceUnderTest::Linux { hops } | DeviceUnderTest::Ovs { hops, .. } => (*hops, 1),
        DeviceUnderTest::External { hops, .. } => (*hops.max(&1), 1),
    })
}

/// The namespaces and links `dut` runs in: a chain of veth pairs, a switch's ports,
/// an emulated NIC switch's or a real NIC's virtual functions.
fn build_testbed(dut: &DeviceUnderTest, hop_count: usize, queues: u32) -> Result<Testbed, RunError> {
    match dut {
        DeviceUnderTest::Ovs { .. } => Testbed::build_switched(hop_count),
        DeviceUnderTest::Hops {
            links: HopLinks::NicSwitch(mode),
            ..
        } => Testbed::build_nic_switched(hop_count, *mode, sfclab_traffic::flows::DST_MAC.0),
        DeviceUnderTest::Hops {
            links: HopLinks::Sriov(nic),
            ..
        } => Testbed::build_sriov(hop_count, nic, sfclab_traffic::flows::DST_MAC.0),
        _ => Testbed::build_chain(hop_count, queues),
    }
    .map_err(|e| RunError::failed("testbed", e))
}

/// The device under test, ready on the testbed: what it is (for the report), its
/// sfclab threads, the software switch of the run (stopped, before the testbed goes,
/// when it drops) and an external device's start.
struct Device {
    what: String,
    /// Every sfclab thread of the DUT: its core and its rigs (ports and graph), with
    /// the index of each rig's report in `dut` (replica k's or hop i's).
    threads: Vec<DutThread>,
    switch: Option<OvsSwitch>,
    external: Option<ExternalStart>,
}

fn start_device(dut: DeviceUnderTest, bed: &Testbed, wired: &WiredSettings, queues: u32) -> Result<Device, RunError> {
    let device = |what: String, threads: Vec<DutThread>| Device {
        what,
        threads,
        switch: None,
        external: None,
    };
    Ok(match dut {
        DeviceUnderTest::Chain(replicas) => {
            let threads = replica_threads(replicas, bed, wired, queues)?;
            let what = if queues > 1 {
                format!("sfclab chain ({}, {queues} replicas, one per queue)", wired.io)
            } else {
                format!("sfclab chain ({})", wired.io)
            };
            device(what, threads)
        }
        DeviceUnderTest::Hops { hops, links } => {
            let n = hops.len();
            let threads = hop_threads(hops, &links, bed, wired)?;
            let joined = match links {
                HopLinks::Veth => "joined by veth".to_string(),
                HopLinks::NicSwitch(mode) => format!(
                    "each with two virtual functions (macvlan, {} mode) of one emulated NIC switch",
                    mode.name()
                ),
                HopLinks::Sriov(nic) => format!(
                    "each with two SR-IOV virtual functions of {} (the last sending on {}), tester on {} and {}",
                    nic.pf, nic.pf_out, nic.tester_out, nic.tester_in
                ),
            };
            let what = format!(
                "sfclab chain of {n} hops, each in its own namespace {joined} ({}), on {} thread(s)",
                wired.io,
                threads.len()
            );
            device(what, threads)
        }
        DeviceUnderTest::Linux { hops } => {
            bed.linux_forwarding(sfclab_traffic::flows::DST_MAC.0, wired.dut_core)
                .map_err(|e| RunError::failed("testbed", e))?;
            let what = if hops > 1 {
                format!("Linux IPv4 forwarding through {hops} namespaces joined by veth")
            } else {
                "Linux IPv4 forwarding".to_string()
            };
            device(what, Vec::new())
        }
        DeviceUnderTest::Ovs { hops, ports } => {
            let ovs = ovs_chain(bed, ports, wired.dut_core).map_err(|e| RunError::failed("ovs", e))?;
            let modes = ovs.port_modes().map_err(|e| RunError::failed("ovs", e))?;
            let what = format!(
                "{}: {hops} bridge(s) on the netdev datapath joined by veth, ports {}",
                ovs.version(),
                modes.join("; ")
            );
            Device {
                switch: Some(ovs),
                ..device(what, Vec::new())
            }
        }
        DeviceUnderTest::External { label, start, .. } => Device {
            external: Some(start),
            ..device(label, Vec::new())
        },
    })
}

/// The device's queue `k` of each end of the one hop, opened for replica k's thread.
fn open_device_end(
    wired: &WiredSettings,
    end: &Interface,
    receive: bool,
    queues: u32,
) -> Result<Vec<InterfacePort>, RunError> {
    open_queues_in_namespace(wired.io, end, &wired.dut_ports, receive, queues).map_err(|e| RunError::failed("ports", e))
}

/// One thread per replica, on its core, forwarding queue k of the one hop.
fn replica_threads(
    replicas: Vec<ChainGraph>,
    bed: &Testbed,
    wired: &WiredSettings,
    queues: u32,
) -> Result<Vec<DutThread>, RunError> {
    let hop = &bed.hops[0];
    let d_in = open_device_end(wired, &hop.input, true, queues)?;
    let d_out = open_device_end(wired, &hop.output, false, queues)?;
    let cores = replica_cores(wired.dut_core, replicas.len());
    Ok(d_in
        .into_iter()
        .zip(d_out)
        .zip(replicas)
        .zip(cores)
        .enumerate()
        .map(|(k, (((d_in, d_out), graph), core))| DutThread {
            core,
            rigs: vec![(k, d_in, d_out, graph)],
        })
        .collect())
}

/// One rig per hop; hops on one core share its thread.
fn hop_threads(
    hops: Vec<(ChainGraph, Option<usize>)>,
    links: &HopLinks,
    bed: &Testbed,
    wired: &WiredSettings,
) -> Result<Vec<DutThread>, RunError> {
    let n = hops.len();
    let mut threads: Vec<DutThread> = Vec::new();
    for (i, ((graph, core), hop)) in hops.into_iter().zip(&bed.hops).enumerate() {
        let graph = match links {
            HopLinks::Veth => graph,
            HopLinks::NicSwitch(_) | HopLinks::Sriov(_) => addressed_to_next_vf(graph, i, i + 1 == n),
        };
        let mut d_in = open_device_end(wired, &hop.input, true, 1)?;
        let mut d_out = open_device_end(wired, &hop.output, false, 1)?;
        let rig = (i, d_in.remove(0), d_out.remove(0), graph);
        match threads.iter_mut().find(|t| t.core == core) {
            Some(t) => t.rigs.push(rig),
            None => threads.push(DutThread { core, rigs: vec![rig] }),
        }
    }
    Ok(threads)
}

/// Where what the tester lost went, over the whole run: the interfaces' kernel
/// counters, the backlog, each sfclab device's and socket's drops, the switch's own.
fn wire_loss(
    wire_drops: &[(&'static str, u64)],
    testbed: &TestbedReport,
    (tester, dut, external): (&RunReport, &[RunReport], &ExternalOutcome),
    backlog_dropped: u64,
) -> WireLoss {
    let switch_drops: BTreeMap<String, u64> = testbed
        .switch
        .iter()
        // OVS's own drops: its ports' rx/tx_dropped mirror the kernel counters of the
        // same interfaces (already counted), its `ovs_*` counters and lost upcalls do not.
        .filter(|(k, v)| **v > 0 && (k.contains(" ovs_") || *k == "datapath lost"))
        .map(|(k, v)| (format!("ovs {k}"), *v))
        .collect();
    let hop_count = testbed.hops;
    // Each run's input interface in the report's list: t-out, then each hop's d-in and
    // d-out; replicas share the one d-in.
    // The tester's receiving sockets are on t-in, the last.
    let socket_drops: Vec<(usize, u64)> = dut
        .iter()
        .enumerate()
        .map(|(k, d)| (if hop_count > 1 { 1 + 2 * k } else { 1 }, d))
        .chain([(testbed.interfaces.len() - 1, tester)])
        .map(|(input, r)| (input, kernel_receive_drops(r)))
        .chain(external.socket_drops.iter().map(|&(hop, n)| (1 + 2 * hop, n)))
        .collect();
    WireLoss::account(
        wire_drops,
        &testbed.interfaces,
        backlog_dropped,
        dut,
        external.dropped,
        &socket_drops,
        switch_drops,
    )
}

/// Hop `i` of a NIC-switched chain: the switch delivers by destination MAC, so what
/// leaves the hop must be addressed to the next hop's receiving virtual function (the
/// last hop's to the tester's `t-in`), from the hop's own sending one, as seed 000's
/// SR-IOV chains configure each SF to. A hop that is one forwarder is set to do exactly
/// that; any other gets a forwarder after its NFs that does (`to-next`, a few cycles per
/// packet, in the hop's report).
fn addressed_to_next_vf(mut graph: ChainGraph, i: usize, last: bool) -> ChainGraph {
    use sfclab_nf::forwarder::Forwarder;
    use sfclab_wire::MacAddr;
    let next = if last {
        sfclab_topology::TESTER_IN_MAC
    } else {
        sfclab_topology::vf_in_mac(i + 1)
    };
    let address = Box::new(Forwarder::with_macs(
        MacAddr(next),
        MacAddr(sfclab_topology::vf_out_mac(i)),
    ));
    match graph.nfs.as_mut_slice() {
        [(_, nf)] if nf.kind() == "forwarder" => *nf = address,
        _ => graph.nfs.push(("to-next".to_string(), address)),
    }
    graph
}

/// Starts Open vSwitch in the switched testbed's namespace and makes hop i a bridge
/// that forwards from `s<i>-in` to `s<i>-out`, addressed to the next hop (or `t-in`).
fn ovs_chain(bed: &Testbed, ports: OvsPort, core: Option<usize>) -> Result<OvsSwitch, sfclab_topology::TopologyError> {
    let ovs = OvsSwitch::start(&bed.hops[0].namespace, core)?;
    for (i, hop) in bed.hops.iter().enumerate() {
        let next = bed.hops.get(i + 1).map_or(&bed.tester_in, |h| &h.input);
        let next_mac = next.counters()?.address;
        ovs.forwarding_bridge(
            &format!("br{}", i + 1),
            hop.input.name(),
            hop.output.name(),
            ports,
            &next_mac,
        )?;
    }
    Ok(ovs)
}

fn switch_counters(switch: Option<&OvsSwitch>) -> Result<BTreeMap<String, u64>, RunError> {
    switch.map_or(Ok(BTreeMap::new()), |s| {
        s.counters().map_err(|e| RunError::failed("ovs", e))
    })
}

/// One thread of an sfclab DUT: its core and its rigs (the index of the rig's report,
/// its ports, its graph); several rigs take turns (hops sharing a core).
struct DutThread {
    core: Option<usize>,
    rigs: Vec<(usize, InterfacePort, InterfacePort, ChainGraph)>,
}

impl DutThread {
    fn run(self, settings: &RunSettings) -> Result<Vec<(usize, RunReport)>, RunError> {
        let (index, rigs): (Vec<usize>, Vec<_>) = self.rigs.into_iter().map(|(i, rx, tx, g)| (i, (rx, tx, g))).unzip();
        let reports = if rigs.len() == 1 {
            let (rx, tx, graph) = rigs.into_iter().next().expect("one rig");
            vec![run_compound_on(rx, tx, graph, settings)?]
        } else {
            run_hops_on(rigs, settings)?
        };
        Ok(index.into_iter().zip(reports).collect())
    }
}

/// The cores of a DUT's replicas: the allowed cores in order from `first` (replica 0's),
/// wrapping around; unpinned when `first` is `None`.
fn replica_cores(first: Option<usize>, replicas: usize) -> Vec<Option<usize>> {
    let allowed = crate::placement::allowed_cores();
    match first {
        None => vec![None; replicas],
        Some(c) => {
            let at = allowed.iter().position(|&a| a == c).unwrap_or(0);
            (0..replicas)
                .map(|k| Some(allowed.get((at + k) % allowed.len().max(1)).copied().unwrap_or(c)))
                .collect()
        }
    }
}

/// Opens a port of `kind` on `end`, from a thread inside its namespace (the socket is
/// then used from any thread).
pub fn open_in_namespace(
    kind: IoKind,
    end: &Interface,
    settings: &AfXdpSettings,
    receive: bool,
) -> Result<InterfacePort, String> {
    let (name, settings) = (end.name().to_string(), settings.clone());
    end.namespace()
        .run(move || InterfacePort::open(kind, &name, &settings, receive))
        .map_err(|e| e.to_string())?
}

/// Opens one port per queue of `end` (see [`InterfacePort::open_queues`]) from inside
/// its namespace.
pub fn open_queues_in_namespace(
    kind: IoKind,
    end: &Interface,
    settings: &AfXdpSettings,
    receive: bool,
    queues: u32,
) -> Result<Vec<InterfacePort>, String> {
    let (name, settings) = (end.name().to_string(), settings.clone());
    end.namespace()
        .run(move || InterfacePort::open_queues(kind, &name, &settings, receive, queues))
        .map_err(|e| e.to_string())?
}

/// Where the frames the tester sent and never saw again went, over the whole run
/// (warm-up, window and drain), from the tester's own counts, the kernel's interface
/// counters and the DUT's report: what none of them explains is `unaccounted`.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct WireLoss {
    /// Frames the tester produced that did not come back, by cause on its side:
    /// what its port refused by the cause the port names (`line-rate`, `ring-full`,
    /// `no-peer`; `tx-refused` unnamed), `unsignable`, `in-flight-at-disconnect` (on its memif ring when the
    /// peer went away), `unaccounted` (sent, never seen again).
    pub tester: BTreeMap<String, u64>,
    /// The kernel's drops on the testbed's interfaces (`d-in rx_dropped`: XDP could
    /// not hand the frame to the DUT's socket, its ring full), its full input queues
    /// (`softnet backlog (machine-wide)`) and the DUT chain's own drops (`dut`), which
    /// explain the tester's `unaccounted`.
    pub explained: BTreeMap<String, u64>,
    /// The tester's `unaccounted` that no counter explains (0 when every loss was seen).
    pub unaccounted: u64,
    /// Drops counted beyond the tester's `unaccounted` (frames that were never the
    /// tester's, e.g. the kernel's own, dropped on the same interfaces).
    pub counted_beyond: u64,
}

impl WireLoss {
    /// The tester's losses by cause against the counters that `explained` them: what
    /// none explains is `unaccounted`, what they count beyond it `counted_beyond`.
    ///
    /// What the tester's memif peer left on its ring when it went away
    /// (`in-flight-at-disconnect`) is part of the tester's loss; the peer's own counters
    /// may count the same frames (left on its receive ring), so it explains only what
    /// no other counter does (`tester in-flight-at-disconnect`), never twice.
    pub fn balance(tester: BTreeMap<String, u64>, mut explained: BTreeMap<String, u64>) -> WireLoss {
        let count = |cause: &str| tester.get(cause).copied().unwrap_or(0);
        let in_flight = count(IN_FLIGHT_AT_DISCONNECT);
        let unseen = count("unaccounted") + in_flight;
        let seen: u64 = explained.values().sum();
        let unexplained = unseen.saturating_sub(seen);
        let left_on_ring = in_flight.min(unexplained);
        if left_on_ring > 0 {
            explained.insert(format!("tester {IN_FLIGHT_AT_DISCONNECT}"), left_on_ring);
        }
        WireLoss {
            tester,
            explained,
            unaccounted: unexplained - left_on_ring,
            counted_beyond: seen.saturating_sub(unseen),
        }
    }
}

/// One step of the traffic's path through a testbed, over the whole run: what reached
/// it, what it passed on, and where the difference went. The first thing a wired run
/// reports (as NFVbench's chain analysis does), before each part's own details.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PathStep {
    /// `tester sends`, `hop 2: nat44`, `tester receives`.
    pub place: String,
    pub packets_in: u64,
    pub packets_out: u64,
    /// `packets_in - packets_out` where the step lost packets (0 where it added some,
    /// such as an NF's replies).
    pub dropped: u64,
    /// The drops a counter names: an sfclab hop's by place and reason, the kernel's
    /// interface counters (`d-in rx_dropped`), the tester's refused sends, a veth link.
    pub why: BTreeMap<String, u64>,
    /// Of `dropped`, what no counter names.
    pub unaccounted: u64,
}

impl PathStep {
    fn new(place: String, packets_in: u64, packets_out: u64, why: BTreeMap<String, u64>) -> PathStep {
        let dropped = packets_in.saturating_sub(packets_out);
        let named: u64 = why.values().sum();
        PathStep {
            place,
            packets_in,
            packets_out,
            dropped,
            why: why.into_iter().filter(|e| e.1 > 0).collect(),
            unaccounted: dropped.saturating_sub(named),
        }
    }
}

impl WiredReport {
    /// The path from the tester through each hop's namespace (its `d-in` to its `d-out`)
    /// back to the tester, whole run. Empty where the testbed has no such interfaces.
    pub fn path(&self) -> Vec<PathStep> {
        let bed = &self.testbed;
        if bed.interfaces.is_empty() && bed.hops > 0 && self.dut_processes.len() == bed.hops {
            return self.path_through_documents();
        }
        let interface = |ns: &str, name: &str| bed.interfaces.iter().find(|i| i.namespace == ns && i.interface == name);
        let (Some(tester_ns), hops) = (bed.namespaces.first(), bed.namespaces.get(1..).unwrap_or(&[])) else {
            return Vec::new();
        };
        let (Some(t_out), Some(t_in)) = (interface(tester_ns, "t-out"), interface(tester_ns, "t-in")) else {
            return Vec::new();
        };
        let c = &self.tester.conservation;
        let refused = self.tester_refusals();
        let mut steps = vec![PathStep::new(
            "tester sends".into(),
            c.generated,
            t_out.tx_packets,
            refused,
        )];
        let mut arriving = t_out.tx_packets;
        for (k, ns) in hops.iter().enumerate() {
            let (Some(d_in), Some(d_out)) = (interface(ns, "d-in"), interface(ns, "d-out")) else {
                return Vec::new();
            };
            let mut why = BTreeMap::new();
            why.insert("veth link".to_string(), arriving.saturating_sub(d_in.rx_packets));
            for (what, n) in [
                ("d-in rx_dropped", d_in.rx_dropped),
                ("d-in rx_errors", d_in.rx_errors),
                ("d-out tx_dropped", d_out.tx_dropped),
                ("d-out tx_errors", d_out.tx_errors),
            ] {
                why.insert(what.to_string(), n);
            }
            let mut name = format!("hop {}", k + 1);
            for (place, reason, n) in self.hop_drops(k, hops.len()) {
                *why.entry(format!("{place} {reason}")).or_default() += n;
            }
            if let Some(chain) = self.hop_chain(k, hops.len()) {
                name += &format!(": {chain}");
            }
            steps.push(PathStep::new(name, arriving, d_out.tx_packets, why));
            arriving = d_out.tx_packets;
        }
        let mut why = BTreeMap::new();
        why.insert("veth link".to_string(), arriving.saturating_sub(t_in.rx_packets));
        why.insert("t-in rx_dropped".to_string(), t_in.rx_dropped);
        steps.push(PathStep::new("tester receives".into(), arriving, c.received, why));
        steps
    }

    /// What the tester's own sending refused, by cause (`tester ring-full`, ...): frames it
    /// made that never went on the path.
    fn tester_refusals(&self) -> BTreeMap<String, u64> {
        self.lost
            .tester
            .iter()
            .filter(|(k, _)| !["unaccounted", IN_FLIGHT_AT_DISCONNECT].contains(&k.as_str()))
            .map(|(k, v)| (format!("tester {k}"), *v))
            .collect()
    }

    /// The path through hops joined by shared memory (`chaining: memif`): no kernel
    /// interface on it, so each step's figures are the hops' own (what their receiving
    /// port took in, what their sending port placed on the next ring), and what a link
    /// lost is what one side placed and the other never took (frames on a ring when its
    /// peer stopped).
    fn path_through_documents(&self) -> Vec<PathStep> {
        let c = &self.tester.conservation;
        let refused = self.tester_refusals();
        let placed = c.generated.saturating_sub(refused.values().sum());
        let mut steps = vec![PathStep::new("tester sends".into(), c.generated, placed, refused)];
        let mut arriving = placed;
        let hops = self.dut_processes.len();
        // What each hop took in and passed on, by its own document; None for a hop that
        // left none (killed): its step then ends where the next one's begins, and what
        // it lost is unaccounted, not put on a link.
        let counts: Vec<Option<(u64, u64)>> = self
            .dut_processes
            .iter()
            .map(|doc| {
                let places = doc["places"].as_array()?;
                Some((
                    places.first()?["packets_in"].as_u64()?,
                    places.last()?["packets_out"].as_u64()?,
                ))
            })
            .collect();
        let mut link_to_next = true;
        for (k, count) in counts.iter().enumerate() {
            let mut why = BTreeMap::new();
            let mut name = format!("hop {}", k + 1);
            if let Some(chain) = self.hop_chain(k, hops) {
                name += &format!(": {chain}");
            }
            let passed = match count {
                Some((took, passed)) => {
                    if link_to_next {
                        why.insert("memif link".to_string(), arriving.saturating_sub(*took));
                    }
                    for (place, reason, n) in self.hop_drops(k, hops) {
                        *why.entry(format!("{place} {reason}")).or_default() += n;
                    }
                    link_to_next = true;
                    *passed
                }
                None => {
                    name += match self.dut_processes[k]["peer"].as_str() {
                        // A peer's own counters are not read: its neighbours count for it.
                        Some(_) => " (counted by its neighbours)",
                        None => " (left no report)",
                    };
                    link_to_next = false;
                    counts[k + 1..]
                        .iter()
                        .find_map(|c| c.map(|(took, _)| took))
                        .unwrap_or(c.received)
                }
            };
            steps.push(PathStep::new(name, arriving, passed, why));
            arriving = passed;
        }
        let mut why = BTreeMap::new();
        let link = if link_to_next {
            arriving.saturating_sub(c.received)
        } else {
            0
        };
        why.insert("memif link".to_string(), link);
        steps.push(PathStep::new("tester receives".into(), arriving, c.received, why));
        steps
    }

    /// Hop `k` of `hops` as the device under test reported it: sfclab runs (every
    /// replica's when the DUT is one hop), or a hop process's own document.
    fn hop_side(&self, k: usize, hops: usize) -> HopSide<'_> {
        if self.dut.len() == hops {
            HopSide::Runs(&self.dut[k..=k])
        } else if hops == 1 && !self.dut.is_empty() {
            HopSide::Runs(&self.dut)
        } else if self.dut_processes.len() == hops {
            HopSide::Document(&self.dut_processes[k])
        } else {
            HopSide::Unknown
        }
    }

    /// The NFs of hop `k` of `hops`.
    fn hop_chain(&self, k: usize, hops: usize) -> Option<String> {
        match self.hop_side(k, hops) {
            HopSide::Runs(runs) => Some(runs[0].chain.join(" -> ")),
            HopSide::Document(doc) => doc["chain"]
                .as_array()
                .map(|c| c.iter().filter_map(|n| n.as_str()).collect::<Vec<_>>().join(" -> ")),
            HopSide::Unknown => None,
        }
    }

    /// What the sfclab chain of hop `k` of `hops` dropped, by place and reason.
    fn hop_drops(&self, k: usize, hops: usize) -> Vec<(String, String, u64)> {
        match self.hop_side(k, hops) {
            HopSide::Runs(runs) => runs
                .iter()
                .flat_map(|r| &r.drops)
                .map(|d| (d.place.clone(), d.reason.clone(), d.packets))
                .collect(),
            HopSide::Document(doc) => doc["drops"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| {
                    Some((
                        d["place"].as_str()?.to_string(),
                        d["reason"].as_str()?.to_string(),
                        d["packets"].as_u64()?,
                    ))
                })
                .collect(),
            HopSide::Unknown => Vec::new(),
        }
    }
}

/// Where a hop's own figures come from (`WiredReport::hop_side`).
enum HopSide<'a> {
    Runs(&'a [RunReport]),
    Document(&'a serde_json::Value),
    Unknown,
}

impl WireLoss {
    fn account(
        tester: &[(&'static str, u64)],
        interfaces: &[InterfaceReport],
        backlog_dropped: u64,
        dut: &[RunReport],
        external_dropped: u64,
        socket_drops: &[(usize, u64)],
        switch_drops: BTreeMap<String, u64>,
    ) -> WireLoss {
        let tester: BTreeMap<String, u64> = tester.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        let mut explained = switch_drops;
        let place_of = |i: &InterfaceReport| {
            // A chain of namespaces has a `d-in` in each: name the hop's namespace too.
            if interfaces.iter().filter(|o| o.interface == i.interface).count() > 1 {
                let role = i.namespace.rsplit('-').next().unwrap_or(&i.namespace);
                format!("{role} {}", i.interface)
            } else {
                i.interface.clone()
            }
        };
        // What the receiving sockets (the DUT's, the tester's) say the kernel dropped
        // before they saw it, per input interface. Where XDP runs in the driver the
        // interface counts the same frames as its rx_dropped: only the excess is new.
        let mut by_input = vec![0u64; interfaces.len()];
        for &(input, n) in socket_drops {
            if let Some(slot) = by_input.get_mut(input) {
                *slot += n;
            }
        }
        for (i, n) in interfaces.iter().zip(&by_input) {
            if *n > i.rx_dropped {
                explained.insert(
                    format!("{} sockets (beyond its rx_dropped)", place_of(i)),
                    n - i.rx_dropped,
                );
            }
        }
        for i in interfaces {
            let place = place_of(i);
            for (what, n) in [
                ("rx_dropped", i.rx_dropped),
                ("rx_errors", i.rx_errors),
                ("tx_dropped", i.tx_dropped),
                ("tx_errors", i.tx_errors),
            ] {
                if n > 0 {
                    explained.insert(format!("{place} {what}"), n);
                }
            }
        }
        if backlog_dropped > 0 {
            // The per-CPU input queues are the machine's, not the testbed's alone.
            explained.insert("softnet backlog (machine-wide)".to_string(), backlog_dropped);
        }
        let dut_dropped: u64 = dut.iter().map(|d| d.conservation.dropped).sum::<u64>() + external_dropped;
        if dut_dropped > 0 {
            explained.insert("dut".to_string(), dut_dropped);
        }
        WireLoss::balance(tester, explained)
    }
}

/// The source counters that count frames the kernel dropped before a receiving socket
/// saw them: `XDP_STATISTICS` rx_dropped (an empty fill ring too) and rx_ring_full;
/// AF_PACKET's tp_drops is its `kernel_rx_dropped`.
pub const KERNEL_RECEIVE_DROPS: [&str; 2] = ["kernel_rx_dropped", "kernel_rx_ring_full"];

/// Frames the kernel dropped before a run's receiving sockets saw them (`XDP_STATISTICS`
/// rx_dropped, which counts an empty fill ring too, and rx_ring_full; AF_PACKET's
/// tp_drops), from the counters of the run's source.
fn kernel_receive_drops(r: &RunReport) -> u64 {
    let counters = r.places.first().map(|p| &p.counters);
    KERNEL_RECEIVE_DROPS
        .iter()
        .filter_map(|c| counters.and_then(|m| m.get(*c)))
        .sum()
}

/// Frames the kernel dropped because a CPU's input queue (the backlog that RPS and
/// veth's receive path feed) was full: `/proc/net/softnet_stat`'s second column, summed
/// over CPUs (0 when unreadable).
pub fn softnet_dropped() -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|h| u64::from_str_radix(h, 16).ok())
        })
        .sum()
}

fn counters(bed: &Testbed) -> Result<Vec<LinkCounters>, RunError> {
    bed.interfaces()
        .iter()
        .map(|i| i.counters().map_err(|e| RunError::failed("testbed", e)))
        .collect()
}

fn interface_report(end: &Interface, c: &LinkCounters) -> InterfaceReport {
    InterfaceReport {
        namespace: end.namespace().name().to_string(),
        interface: end.name().to_string(),
        rx_packets: c.rx_packets,
        rx_dropped: c.rx_dropped,
        rx_errors: c.rx_errors,
        tx_packets: c.tx_packets,
        tx_dropped: c.tx_dropped,
        tx_errors: c.tx_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_is_charged_its_work_not_its_waits_for_the_tester() {
        // 1,000 frames in 300,000 busy cycles (300 a frame), of which the sink waited
        // 120,000 for room: its work is 180 a frame.
        let doc = serde_json::json!({
            "busy_cycles_per_packet": 300.0,
            "generated": 1000,
            "places": [
                { "name": "memif", "counters": { "sleeps": 0 } },
                { "name": "forwarder" },
                { "name": "sink", "counters": { "tx_full_wait_ticks": 120000 } },
            ],
        });
        assert_eq!(work_and_waits(&doc), Some((180.0, 120.0)));
        // Nothing forwarded: no cost per frame.
        let idle = serde_json::json!({ "busy_cycles_per_packet": 0.0, "generated": 0, "places": [] });
        assert_eq!(work_and_waits(&idle), None);
    }

    fn iface(name: &str, rx_dropped: u64) -> InterfaceReport {
        InterfaceReport {
            namespace: "ns".into(),
            interface: name.into(),
            rx_packets: 0,
            rx_dropped,
            rx_errors: 0,
            tx_packets: 0,
            tx_dropped: 0,
            tx_errors: 0,
        }
    }

    #[test]
    fn lost_frames_are_explained_by_the_counters_that_saw_them_and_the_rest_is_unaccounted() {
        let tester = [("tx-refused", 5), ("unsignable", 0), ("unaccounted", 100)];
        let l = WireLoss::account(
            &tester,
            &[iface("d-in", 60), iface("t-in", 0)],
            25,
            &[],
            0,
            &[],
            BTreeMap::new(),
        );
        assert_eq!(l.explained.get("d-in rx_dropped"), Some(&60));
        assert!(!l.explained.contains_key("t-in rx_dropped"), "zeros are not listed");
        assert_eq!(l.explained.get("softnet backlog (machine-wide)"), Some(&25));
        assert_eq!((l.unaccounted, l.counted_beyond), (15, 0));
        assert_eq!(l.tester.get("tx-refused"), Some(&5));
        // Counters that saw more than the tester lost (the kernel's own frames) say so.
        let l = WireLoss::account(&tester, &[iface("d-in", 130)], 0, &[], 0, &[], BTreeMap::new());
        assert_eq!((l.unaccounted, l.counted_beyond), (0, 30));
    }

    #[test]
    fn frames_left_on_the_testers_ring_explain_only_what_no_other_counter_does() {
        let tester = BTreeMap::from([
            ("unaccounted".to_string(), 10),
            (IN_FLIGHT_AT_DISCONNECT.to_string(), 40),
        ]);
        // Nothing else saw them: the ring explains its 40, 10 stay unaccounted.
        let l = WireLoss::balance(tester.clone(), BTreeMap::new());
        assert_eq!(l.explained.get("tester in-flight-at-disconnect"), Some(&40));
        assert_eq!((l.unaccounted, l.counted_beyond), (10, 0));
        // The peer counted 45 of them left on its side: the ring explains the other 5.
        let l = WireLoss::balance(tester, BTreeMap::from([("hop 1 rx left".to_string(), 45)]));
        assert_eq!(l.explained.get("tester in-flight-at-disconnect"), Some(&5));
        assert_eq!((l.unaccounted, l.counted_beyond), (0, 0));
    }

    #[test]
    fn socket_drops_add_only_what_their_interface_did_not_count_and_hops_are_named() {
        let tester = [("unaccounted", 100)];
        let mut a = iface("d-in", 30);
        a.namespace = "sfclab-1-0-dut1".into();
        let mut b = iface("d-in", 0);
        b.namespace = "sfclab-1-0-dut2".into();
        // Hop 1's socket saw the interface's 30 (native XDP counts both); hop 2's 50
        // were seen by its socket alone (generic XDP on a macvlan).
        let switch = BTreeMap::from([("ovs s1-in rx_dropped".to_string(), 5)]);
        let l = WireLoss::account(&tester, &[a, b], 0, &[], 0, &[(0, 30), (1, 50)], switch);
        assert_eq!(l.explained.get("dut1 d-in rx_dropped"), Some(&30));
        assert_eq!(l.explained.get("dut2 d-in sockets (beyond its rx_dropped)"), Some(&50));
        assert!(!l.explained.contains_key("dut1 d-in sockets (beyond its rx_dropped)"));
        assert_eq!(l.explained.get("ovs s1-in rx_dropped"), Some(&5));
        assert_eq!((l.unaccounted, l.counted_beyond), (15, 0));
    }
}
