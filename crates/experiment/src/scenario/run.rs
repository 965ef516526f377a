//! Runs a scenario: every chain's VNFs started as processes in namespaces of their own
//! (on the cores they share), joined by memif; one tester thread drives every chain's
//! stream in turn; each chain measured on its own (its window's loss exact, its hops'
//! drops explaining it), then the whole; the OS's account of each VNF process beside.

use std::collections::BTreeMap;
use std::time::Instant;

use sfclab_core::LatencySummary;
use sfclab_io::{Line, LinePort, TesterLink};
use sfclab_runtime::{
    ChainGraph, ExternalOutcome, RunError, RunReport, RunSettings, WindowEdge, WindowLoss, run_hops_observed,
};
use sfclab_topology::{HostLink, LinkEndCounters, Topology};
use sfclab_traffic::{Generator, Rate, Sink};

use super::Scenario;
use super::document::{
    Aggregate, CableDirection, CableReport, ChainResult, DirectionResult, GroupAggregate, HopDirection, HopFlow,
    LinkFlow, ProcessSched, ScenarioRun,
};
use super::sched::SchedCounters;
use crate::memif_chain::{KernelLinks, MemifChain, TESTER_QUIET, wire_loss};

/// How long hops on kernel links are given after they say they are ready (see
/// `ChainsUp::up`).
const TUNNEL_SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// The emulated NIC's queue per VNF, in time at its capacity: VNFs that share cores send
/// in bursts after each wake-up, some milliseconds apart, and the NIC serves a queue
/// while its VNF sleeps. (2 ms refused 0.5-2 % of what licence-limited VNFs sent, in
/// bursts, where the capacity was not the limit.)
const NIC_BUFFER: std::time::Duration = std::time::Duration::from_millis(10);

/// How long the VNFs of one place in the chains may take to stop.
const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Buffers for what comes back to the tester after it ended (read a batch at a time).
const LATE_POOL: usize = 1024;

type Link = TesterLink<Generator, LinePort<sfclab_io::InterfacePort>, sfclab_io::InterfacePort>;

pub(super) fn run_once(scenario: &Scenario, repetition: usize) -> Result<ScenarioRun, RunError> {
    let mut bed = ChainsUp::up(scenario)?;
    let measured = bed.measure(&bed.run_settings(scenario));
    bed.down(scenario, measured, repetition)
}

/// Every chain of a scenario up: namespaces, VNF processes and the tester's links, for
/// one measurement or a search's many trials.
pub(super) struct ChainsUp {
    /// The namespaces, when the VNFs run here (none when attached to VNFs elsewhere).
    topo: Option<Topology>,
    /// The hosts' underlay, when the chains span several.
    cable: Option<HostLink>,
    /// The machine's input-queue drops when the chains were up (`softnet_stat`).
    softnet_before: u64,
    started: Vec<MemifChain>,
    links: Vec<Link>,
    /// A standby instance's links: connected, never used.
    idle: Vec<(sfclab_io::InterfacePort, sfclab_io::InterfacePort)>,
    /// Every VNF process: (chain or standby instance, hop, pid), both from 0.
    pids: Vec<(usize, usize, u32)>,
    /// Each chain's links among `links` (one entry per chain given traffic): forward, and reverse when both ways.
    chain_links: Vec<std::ops::Range<usize>>,
    setup_s: f64,
}

/// One measurement over every chain: each link's report, and what the OS did with each
/// VNF over its window.
pub(super) struct Measured {
    reports: Result<Vec<RunReport>, RunError>,
    /// The VNFs' counters as the window opened and as it closed, and the time between.
    window: Option<WindowSched>,
}

/// Every VNF's scheduling counters at the window's edges (in `pids`' order).
struct WindowSched {
    opened: Vec<Option<SchedCounters>>,
    closed: Vec<Option<SchedCounters>>,
    seconds: f64,
}

impl Measured {
    /// The links' reports, or why the measurement failed.
    pub(super) fn into_reports(self) -> Result<Vec<RunReport>, RunError> {
        self.reports
    }
}

impl ChainsUp {
    /// Streams the tester drives: every chain's directions.
    pub(super) fn streams(&self) -> usize {
        self.links.len()
    }

    /// Chain c's links (its directions) among every link's, in order.
    pub(super) fn links_of(&self, c: usize) -> std::ops::Range<usize> {
        self.chain_links[c].clone()
    }

    /// Builds the namespaces, starts every VNF (chains and standby instances) on the
    /// shared cores, waits until all forward and connects the tester's links.
    pub(super) fn up(scenario: &Scenario) -> Result<ChainsUp, RunError> {
        if let Some(attachment) = scenario.attached() {
            return ChainsUp::attach(scenario, attachment);
        }
        let began = Instant::now();
        let mut topo = Topology::new().map_err(|e| RunError::failed("namespaces", e))?;
        let tester_ns = topo
            .namespace("tester")
            .map_err(|e| RunError::failed("namespaces", e))?;
        let dir = tester_ns.state_dir().map_err(|e| RunError::failed("namespaces", e))?;
        let mut cable = match &scenario.hosts {
            Some(h) => {
                let hosts: Vec<_> = (1..=h.count)
                    .map(|i| topo.namespace(&format!("host{i}")))
                    .collect::<Result<_, _>>()
                    .map_err(|e| RunError::failed("hosts", e))?;
                let hosts: Vec<&_> = hosts.iter().collect();
                let link = topo
                    .host_link(&hosts, h.link)
                    .map_err(|e| RunError::failed("hosts", e))?;
                // Each host's NIC interrupts on the VNFs' cores, not the tester's.
                link.receive_on(&scenario.vnf_cores)
                    .map_err(|e| RunError::failed("hosts", e))?;
                Some(link)
            }
            None => None,
        };
        // The NIC's capacity: one bucket every VNF process maps.
        let nic = match scenario.nic_capacity {
            Some(bps) => {
                let file = dir.join("nic-capacity");
                sfclab_io::SharedLine::create(&file, bps, NIC_BUFFER)
                    .map_err(|e| RunError::failed("nic_capacity", e))?;
                Some(file)
            }
            None => None,
        };
        let mut started = Vec::new();
        for (c, exp) in scenario.instances().enumerate() {
            let plan = scenario
                .hop_plan(c, nic.as_deref())
                .map_err(|e| RunError::setting("chaining", e))?;
            let kernel_links = match (&scenario.hosts, cable.as_mut()) {
                (Some(h), Some(link)) => KernelLinks::Hosts {
                    link,
                    places: h.places(),
                },
                _ if scenario.veth => KernelLinks::Veth,
                _ => KernelLinks::None,
            };
            // Namespaces `c<k>hop<i>` for chains, `s<k>hop<i>` for standby instances.
            started.push(MemifChain::start(
                exp,
                &plan,
                &mut topo,
                (&tester_ns, &dir),
                &scenario.instance_label(c),
                scenario.tester_core,
                kernel_links,
            )?);
        }
        for chain in &mut started {
            chain.wait_ready()?;
        }
        if scenario.hosts.is_some() || scenario.veth {
            // A hop on a kernel link says it is ready once its AF_XDP socket is bound, but in
            // the first milliseconds after, frames reaching the tunnel are lost where no
            // counter sees them (measured: 2,500 to 7,400 of the first frames of every
            // repetition after the first at 1 Mpps; none after 20 ms). Not the data
            // path: once, before the tester starts.
            std::thread::sleep(TUNNEL_SETTLE);
        }
        let mut bed = ChainsUp::connect(scenario, started, began)?;
        bed.topo = Some(topo);
        bed.cable = cable;
        Ok(bed)
    }

    /// The tester's ends of every chain whose VNFs run elsewhere with their sockets and
    /// control files in `dir` ([`Scenario::attach`]), once every VNF says it forwards.
    fn attach(scenario: &Scenario, attachment: &super::Attachment) -> Result<ChainsUp, RunError> {
        let began = Instant::now();
        let places = scenario.hosts.as_ref().map(super::Hosts::places);
        let mut started = Vec::new();
        for (c, exp) in scenario.instances().enumerate() {
            started.push(MemifChain::attach(
                exp,
                attachment,
                &scenario.instance_label(c),
                places.as_deref(),
            )?);
        }
        for chain in &mut started {
            chain.wait_ready()?;
        }
        if places.is_some() {
            // As for hops here: the first frames after the sockets bind (see `up`).
            std::thread::sleep(TUNNEL_SETTLE);
        }
        ChainsUp::connect(scenario, started, began)
    }

    /// The tester's links through every started chain (a standby instance's connected,
    /// given no traffic).
    fn connect(scenario: &Scenario, mut started: Vec<MemifChain>, began: Instant) -> Result<ChainsUp, RunError> {
        let n = scenario.chains().len();
        let setup_s = began.elapsed().as_secs_f64();
        // Per chain its directions' links in turn: forward, then reverse.
        let mut links: Vec<Link> = Vec::new();
        let mut chain_links = Vec::with_capacity(n);
        let mut idle = Vec::new();
        // The NIC's two ports: each direction of every chain crosses one.
        let lines: Vec<Option<std::sync::Arc<Line>>> = (0..2).map(|_| scenario.line_rate.map(Line::new)).collect();
        let batch = scenario.chains()[0].settings.batch;
        for (c, chain) in started.iter_mut().enumerate() {
            let first = links.len();
            let directions = if scenario.instance_both_ways(c) { 2 } else { 1 };
            for reverse in [false, true].into_iter().take(directions) {
                let (mut out, back) = if reverse {
                    chain.reverse_tester_ports()?
                } else {
                    chain.tester_ports()?
                };
                if let sfclab_io::InterfacePort::Memif(port) = &mut out {
                    // One thread sends for every chain: a chain whose ring is full
                    // refuses what does not fit at once (its tester's `ring-full`),
                    // never stalls the others.
                    port.set_full_wait(std::time::Duration::ZERO);
                }
                if c < n {
                    let generator = stream(scenario, c, reverse, None)?;
                    let out = LinePort::new(out, lines[usize::from(reverse)].clone());
                    links.push(TesterLink::new(generator, out, back, batch, TESTER_QUIET));
                } else {
                    idle.push((out, back));
                }
            }
            if c < n {
                chain_links.push(first..links.len());
            }
        }
        let pids = started
            .iter()
            .enumerate()
            .flat_map(|(c, chain)| chain.pids().into_iter().map(move |(hop, pid)| (c, hop, pid)))
            .collect();
        Ok(ChainsUp {
            topo: None,
            cable: None,
            softnet_before: sfclab_runtime::softnet_dropped(),
            started,
            links,
            idle,
            pids,
            chain_links,
            setup_s,
        })
    }

    /// The tester's settings for a measurement: the scenario's, on the tester's core.
    pub(super) fn run_settings(&self, scenario: &Scenario) -> RunSettings {
        RunSettings {
            core: scenario.tester_core,
            ..scenario.chains()[0].settings.clone()
        }
    }

    /// Every stream afresh at `per_stream` (the next trial's rate), or at the
    /// scenario's own rate.
    pub(super) fn set_rate(&mut self, scenario: &Scenario, per_stream: Option<Rate>) -> Result<(), RunError> {
        self.set_rates(scenario, |_| per_stream)
    }

    /// Every stream afresh, chain c's at `rate_of(c)` (its scenario rate for `None`).
    pub(super) fn set_rates(
        &mut self,
        scenario: &Scenario,
        rate_of: impl Fn(usize) -> Option<Rate>,
    ) -> Result<(), RunError> {
        for (c, range) in self.chain_links.iter().enumerate() {
            for (reverse, link) in [false, true].into_iter().zip(&mut self.links[range.clone()]) {
                link.begin_run(stream(scenario, c, reverse, rate_of(c))?);
            }
        }
        Ok(())
    }

    /// One measurement: the tester drives every link for `run`'s warm-up and window.
    /// The VNFs' scheduling counters are read as the window opens and closes by a
    /// thread of their own, told by the tester's: the tester keeps draining meanwhile
    /// (reading /proc for every VNF takes some hundred microseconds, in which the
    /// frames coming back would fill its rings).
    pub(super) fn measure(&mut self, run: &RunSettings) -> Measured {
        let pids: Vec<u32> = self.pids.iter().map(|&(_, _, pid)| pid).collect();
        let (tell, edges) = std::sync::mpsc::channel::<WindowEdge>();
        let links = &mut self.links;
        std::thread::scope(|scope| {
            let reader = scope.spawn(move || {
                let mut read: Vec<(Instant, Vec<Option<SchedCounters>>)> = Vec::with_capacity(2);
                for _edge in edges.iter() {
                    let at = Instant::now();
                    read.push((at, pids.iter().map(|&pid| SchedCounters::of(pid)).collect()));
                }
                read
            });
            let reports = run_hops_observed(
                links
                    .iter_mut()
                    .map(|l| (l, Sink::new(run.verify), ChainGraph::from(sfclab_core::NamedNfs::new())))
                    .collect(),
                run,
                // Sending fails only once the reader is gone, which it is not before
                // `tell` is dropped below.
                &|edge: WindowEdge| {
                    let _ = tell.send(edge);
                },
            );
            drop(tell);
            // None when stopped before the window opened.
            let window = <[_; 2]>::try_from(reader.join().unwrap_or_default()).ok().map(
                |[(opened_at, opened), (closed_at, closed)]| WindowSched {
                    opened,
                    closed,
                    seconds: closed_at.duration_since(opened_at).as_secs_f64(),
                },
            );
            Measured { reports, window }
        })
    }

    /// Stops every VNF and takes everything down; the run's result from the last
    /// measurement (`m`), each chain's drops and conservation over everything the VNFs
    /// and links did.
    pub(super) fn down(self, scenario: &Scenario, m: Measured, repetition: usize) -> Result<ScenarioRun, RunError> {
        let ChainsUp {
            topo,
            cable,
            softnet_before,
            mut started,
            mut links,
            idle,
            pids,
            chain_links,
            setup_s,
        } = self;
        let n = chain_links.len();
        let stopping = Instant::now();
        // Hop by hop, every chain's at once: a hop stops (counting what is left unread
        // on its input ring) only once the hop before it has stopped adding to that ring.
        let deepest = started.iter().map(MemifChain::len).max().unwrap_or(0);
        for hop in 0..deepest {
            started.iter_mut().for_each(|c| c.interrupt_hop(hop));
            let deadline = Instant::now() + STOP_LIMIT;
            started.iter_mut().for_each(|c| c.wait_hop_exited(hop, deadline));
        }
        // What came back after the tester had ended (a slow VNF still draining its queue
        // then) is late: taken from the tester's ports, counted.
        let mut pool = sfclab_core::PacketPool::new(LATE_POOL);
        links.iter_mut().for_each(|l| l.take_late(&mut pool));
        // The kernel links' and the cable's counters, read once nothing moves on them.
        let kernel_links: Vec<Vec<LinkFlow>> = started
            .iter()
            .take(n)
            .map(|c| link_flows(c, if cable.is_some() { "tunnel" } else { "veth" }))
            .collect();
        let cable_counters = cable.as_ref().map(HostLink::counters).transpose();
        let softnet = sfclab_runtime::softnet_dropped().saturating_sub(softnet_before);
        let outcomes: Vec<ExternalOutcome> = started.into_iter().map(MemifChain::stop).collect();
        drop(idle);
        drop(topo);
        let teardown_s = stopping.elapsed().as_secs_f64();
        let reports = m.reports?;
        let cable_counters = cable_counters.map_err(|e| RunError::failed("hosts", e))?;

        let processes = m
            .window
            .iter()
            .flat_map(|w| {
                pids.iter()
                    .zip(w.opened.iter().zip(&w.closed))
                    .map(move |(pid, edges)| (pid, edges, w.seconds))
            })
            .filter_map(|(&(c, hop, pid), (b, a), seconds)| {
                let d = a.as_ref()?.since(b.as_ref()?);
                Some(ProcessSched {
                    chain: c + 1,
                    hop: hop + 1,
                    standby: c >= n,
                    pid,
                    cpu_s: d.cpu_ns as f64 / 1e9,
                    cpu_share: d.cpu_ns as f64 / 1e9 / seconds.max(f64::MIN_POSITIVE),
                    run_queue_delay_s: d.run_queue_ns as f64 / 1e9,
                    timeslices: d.timeslices,
                    voluntary_switches: d.voluntary_switches,
                    involuntary_switches: d.involuntary_switches,
                })
            })
            .collect();
        let mut chains: Vec<ChainResult> = chain_links
            .iter()
            .zip(&outcomes)
            .zip(kernel_links)
            .enumerate()
            .map(|(c, ((range, outcome), kernel))| {
                let group = scenario.group_of(c).name.clone();
                chain_result(
                    c,
                    group,
                    &reports[range.clone()],
                    &links[range.clone()],
                    outcome,
                    kernel,
                )
            })
            .collect();
        let cable =
            cable_counters.map(|ends| attribute_cable_drops(&ends, softnet, &mut chains, &reports, &chain_links));
        // Each group's chains and their links, when there are several groups.
        let mut groups = Vec::new();
        if scenario.single_group().is_none() {
            for (g, ours) in scenario.group_chains() {
                let links = chain_links[ours.start].start..chain_links[ours.end - 1].end;
                groups.push(GroupAggregate {
                    group: g.name.clone(),
                    aggregate: aggregate(&chains[ours], &reports[links]),
                });
            }
        }
        Ok(ScenarioRun {
            repetition,
            setup_s,
            teardown_s,
            interrupted: reports.iter().any(|r| r.interrupted),
            aggregate: aggregate(&chains, &reports),
            groups,
            chains,
            processes,
            search: None,
            chain_searches: Vec::new(),
            cable,
        })
    }
}

/// Chain `c`'s stream one way: its traffic (the way back with every flow swapped), at
/// `rate` when given.
fn stream(scenario: &Scenario, c: usize, reverse: bool, rate: Option<Rate>) -> Result<Generator, RunError> {
    let exp = &scenario.chains()[c];
    let traffic = sfclab_traffic::GeneratorConfig {
        reverse,
        rate: rate.unwrap_or(exp.traffic.rate),
        ..exp.traffic.clone()
    };
    Generator::new(traffic, exp.settings.batch).map_err(|(k, r)| RunError::setting(k, r))
}

fn ratio(lost: u64, sent: u64) -> f64 {
    if sent == 0 { 0.0 } else { lost as f64 / sent as f64 }
}

fn chain_result(
    c: usize,
    group: String,
    reports: &[RunReport],
    links: &[Link],
    outcome: &ExternalOutcome,
    kernel_links: Vec<LinkFlow>,
) -> ChainResult {
    let lost = wire_loss(links, outcome);
    let explained = explained_by_the_kernel(lost.explained.clone(), links, outcome, &kernel_links);
    let lost = sfclab_runtime::WireLoss::balance(lost.tester, explained);
    let mut drops: BTreeMap<String, u64> = lost
        .tester
        .iter()
        .filter(|(cause, n)| cause.as_str() != "unaccounted" && **n > 0)
        .chain(lost.explained.iter().filter(|(cause, _)| cause.as_str() != "dut"))
        .map(|(cause, n)| {
            // The kernel's and the tunnels' drops name their place themselves.
            let place = if ["kernel", "tunnel", "veth"].iter().any(|p| cause.starts_with(p)) {
                ""
            } else {
                "tester "
            };
            (format!("{place}{cause}"), *n)
        })
        .collect();
    let names: Vec<&str> = DIRECTIONS.iter().copied().take(reports.len()).collect();
    let hops = outcome
        .documents
        .iter()
        .enumerate()
        .map(|(i, doc)| hop_flow(i, doc, &names, &mut drops))
        .collect();
    let directions: Vec<DirectionResult> = reports
        .iter()
        .zip(&names)
        .map(|(r, d)| DirectionResult {
            direction: d.to_string(),
            requested_mpps: r.requested_mpps,
            generated_mpps: r.generated_mpps,
            throughput_mpps: r.mpps,
            gbps_l1: r.gbps_l1,
            window: r.window_loss,
            loss_ratio: ratio(r.window_loss.lost, r.window_loss.sent),
            latency: r.latency,
        })
        .collect();
    let window = summed_window(directions.iter().map(|d| d.window));
    ChainResult {
        chain: c + 1,
        group,
        requested_mpps: directions.iter().map(|d| d.requested_mpps).sum(),
        generated_mpps: directions.iter().map(|d| d.generated_mpps).sum(),
        throughput_mpps: directions.iter().map(|d| d.throughput_mpps).sum(),
        gbps_l1: directions.iter().map(|d| d.gbps_l1).sum(),
        loss_ratio: ratio(window.lost, window.sent),
        window,
        directions,
        drops,
        unaccounted: lost.unaccounted,
        conserved: reports.iter().all(|r| r.conservation.holds) && lost.unaccounted == 0 && lost.counted_beyond == 0,
        hops,
        kernel_links,
    }
}

/// What the wire lost, explained also by the kernel where it carries frames (here, or a
/// cluster's links between attached VNFs): its sockets' and the links' interfaces'
/// drops explain loss as the hops' drops do (over memif alone there is none of either).
fn explained_by_the_kernel(
    mut explained: BTreeMap<String, u64>,
    links: &[Link],
    outcome: &ExternalOutcome,
    kernel_links: &[LinkFlow],
) -> BTreeMap<String, u64> {
    let socket = |hop: usize| {
        outcome
            .socket_drops
            .iter()
            .filter(|(h, _)| *h == hop)
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    for &(hop, n) in outcome.socket_drops.iter().filter(|(_, n)| *n > 0) {
        explained.insert(format!("kernel receive (hop {})", hop + 1), n);
    }
    let tester_kernel: u64 = links
        .iter()
        .flat_map(sfclab_core::RxPort::counters)
        .filter(|c| sfclab_runtime::KERNEL_RECEIVE_DROPS.contains(&c.name))
        .map(|c| c.value)
        .sum();
    if tester_kernel > 0 {
        explained.insert("kernel receive (tester)".into(), tester_kernel);
    }
    for l in kernel_links {
        let full = if l.kind == "tunnel" { "cable full" } else { "peer full" };
        // A veth's XDP hands frames to the receiver's socket: what the socket had no
        // room for the veth counts too; only the rest is the veth's own.
        let rx_own = match (l.kind.as_str(), l.receiver) {
            ("veth", Some(hop)) => l.rx_dropped.saturating_sub(socket(hop)),
            ("veth", None) => l.rx_dropped.saturating_sub(tester_kernel),
            _ => l.rx_dropped,
        };
        for (n, what) in [(l.tx_dropped, full), (rx_own, "receive")] {
            if n > 0 {
                explained.insert(format!("{} {} ({what})", l.kind, l.link), n);
            }
        }
    }
    explained
}

/// Hop `i`'s flow from its own document, each of its drops added to `drops`.
fn hop_flow(i: usize, doc: &serde_json::Value, names: &[&str], drops: &mut BTreeMap<String, u64>) -> HopFlow {
    for d in doc["drops"].as_array().into_iter().flatten() {
        let (place, reason) = (d["place"].as_str().unwrap_or("?"), d["reason"].as_str().unwrap_or("?"));
        *drops.entry(format!("hop {} {place} {reason}", i + 1)).or_default() += d["packets"].as_u64().unwrap_or(0);
    }
    let count = |key: &str| doc["conservation"][key].as_u64().unwrap_or(0);
    let (rx, tx) = (count("generated"), count("received"));
    // A hop that forwards both ways counts each side's frames at its ports.
    let counter = |name: &str| {
        doc["places"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|p| p["counters"][name].as_u64())
    };
    let directions = names
        .iter()
        .map(|&d| {
            let (rx, tx) = match names.len() {
                1 => (rx, tx),
                _ => (
                    counter(&format!("{d}_in")).unwrap_or(0),
                    counter(&format!("{d}_out")).unwrap_or(0),
                ),
            };
            HopDirection {
                direction: d.to_string(),
                rx,
                tx,
                dropped: rx.saturating_sub(tx),
            }
        })
        .collect();
    HopFlow {
        hop: i + 1,
        nfs: doc["chain"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect(),
        rx,
        tx,
        dropped: count("dropped"),
        busy_cycles_per_frame: doc["busy_cycles_per_packet"].as_f64(),
        directions,
        error: doc["error"].as_str().map(str::to_string),
    }
}

/// A chain's kernel links (of `kind`) as their interfaces counted them over the run.
fn link_flows(chain: &MemifChain, kind: &str) -> Vec<LinkFlow> {
    let n = chain.len();
    let place = |k: usize| {
        if k == 0 || k == n + 1 {
            "tester".to_string()
        } else {
            format!("hop {k}")
        }
    };
    chain
        .kernel_links()
        .iter()
        .map(|(k, out, into)| {
            let (o, i) = (out.counters().unwrap_or_default(), into.counters().unwrap_or_default());
            LinkFlow {
                receiver: (*k < n).then_some(*k),
                kind: kind.to_string(),
                link: format!("{} -> {}", place(*k), place(k + 1)),
                tx: o.tx_packets,
                rx: i.rx_packets,
                tx_dropped: o.tx_dropped,
                rx_dropped: i.rx_dropped,
            }
        })
        .collect()
}

/// The cable's shaper refuses a frame at the chain's own tunnel, which counts it; the
/// far end's drops (its input queue full) and the machine's input-queue drops
/// (`softnet_stat`, where receive steering queued the frames) no chain sees: when one of
/// them equals the loss no other counter explained, summed over the chains, each
/// chain's rest is put down to it and the chain is conserved; otherwise it stays
/// unaccounted.
fn attribute_cable_drops(
    ends: &[(String, LinkEndCounters)],
    softnet: u64,
    chains: &mut [ChainResult],
    reports: &[RunReport],
    chain_links: &[std::ops::Range<usize>],
) -> CableReport {
    let far_end: u64 = ends.iter().map(|(_, e)| e.cable_dropped).sum();
    let unexplained: u64 = chains.iter().map(|c| c.unaccounted).sum();
    let place = if unexplained == 0 {
        None
    } else if far_end == unexplained {
        Some("cable far end (shared by the chains)")
    } else if softnet == unexplained {
        Some("input queues (machine-wide)")
    } else {
        None
    };
    if let Some(place) = place {
        for (c, range) in chains.iter_mut().zip(chain_links) {
            let reports = &reports[range.clone()];
            if c.unaccounted > 0 {
                c.drops.insert(place.into(), c.unaccounted);
                c.unaccounted = 0;
                c.conserved = reports.iter().all(|r| r.conservation.holds);
            }
        }
    }
    let refused_at_tunnels: u64 = chains.iter().flat_map(|c| &c.kernel_links).map(|t| t.tx_dropped).sum();
    CableReport {
        directions: ends
            .iter()
            .map(|(d, e)| CableDirection {
                direction: d.clone(),
                sent: e.sent,
                shaper_dropped: e.shaper_dropped,
                cable_dropped: e.cable_dropped,
            })
            .collect(),
        shaper_drops_seen_at_tunnels: ends.iter().map(|(_, e)| e.shaper_dropped).sum::<u64>() == refused_at_tunnels,
        input_queue_drops: softnet,
        attributed_to: place.map(str::to_string),
    }
}

/// A chain's directions, in the order of its tester links.
const DIRECTIONS: [&str; 2] = ["forward", "reverse"];

/// Windows together: sent, received and lost each summed.
fn summed_window(windows: impl Iterator<Item = WindowLoss>) -> WindowLoss {
    windows.fold(
        WindowLoss {
            sent: 0,
            received: 0,
            lost: 0,
        },
        |a, w| WindowLoss {
            sent: a.sent + w.sent,
            received: a.received + w.received,
            lost: a.lost + w.lost,
        },
    )
}

fn aggregate(chains: &[ChainResult], reports: &[RunReport]) -> Aggregate {
    let window = summed_window(chains.iter().map(|c| c.window));
    let probes: Vec<&LatencySummary> = reports.iter().filter_map(|r| r.latency.as_ref()).collect();
    let samples: u64 = probes.iter().map(|l| l.samples).sum();
    let us = |ns: f64| ns / 1e3;
    Aggregate {
        offered_mpps: chains.iter().map(|c| c.requested_mpps).sum(),
        generated_mpps: chains.iter().map(|c| c.generated_mpps).sum(),
        throughput_mpps: chains.iter().map(|c| c.throughput_mpps).sum(),
        gbps_l1: chains.iter().map(|c| c.gbps_l1).sum(),
        not_offered: reports.iter().map(|r| r.not_offered).sum(),
        loss_ratio: ratio(window.lost, window.sent),
        window,
        latency_mean_us: (samples > 0)
            .then(|| us(probes.iter().map(|l| l.mean_ns * l.samples as f64).sum::<f64>() / samples as f64)),
        latency_worst_p99_us: probes.iter().map(|l| us(l.p99_ns)).reduce(f64::max),
        latency_max_us: probes.iter().map(|l| us(l.max_ns)).reduce(f64::max),
        conserved: chains.iter().all(|c| c.conserved),
    }
}
