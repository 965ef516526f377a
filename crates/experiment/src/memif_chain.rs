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
//!
//! Memif is shared memory: it joins places on one host. A scenario's chain may cross
//! between two emulated hosts, each link that crosses a tunnel of its own over the hosts'
//! shaped cable, or have every link a veth pair ([`KernelLinks`]); the two ends of such
//! a link open it as a kernel interface.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use sfclab_io::IoKind;
use sfclab_io::memif::{Interface, MemifSettings, Role, Wait};
use sfclab_io::{InterfacePort, TesterLink};
use sfclab_runtime::{ExternalOutcome, RunError, RunSettings, TestbedReport, WireLoss, WiredReport, run_compound_on};
use sfclab_topology::{HostLink, Namespace, Topology};
use sfclab_traffic::{Generator, Sink};

use crate::chain_file::Experiment;
use crate::hop_processes::{HopPlan, HopProcesses};
use crate::remote_hops::RemoteHops;

/// How long the tester waits for the chain to connect.
const CONNECT_LIMIT: Duration = Duration::from_secs(30);

/// Builds the namespaces, starts the hops, runs the tester across them and takes
/// everything down again (also on error: the topology's drop kills what runs inside).
pub(crate) fn run(experiment: &Experiment, run: &RunSettings) -> Result<WiredReport, RunError> {
    let plan = HopPlan::of(experiment).map_err(|e| RunError::setting("chaining", e))?;
    let mut topo = Topology::new().map_err(|e| RunError::failed("namespaces", e))?;
    let tester_ns = topo
        .namespace("tester")
        .map_err(|e| RunError::failed("namespaces", e))?;
    let tester_dir = tester_ns.state_dir().map_err(|e| RunError::failed("namespaces", e))?;
    let mut chain = MemifChain::start(
        experiment,
        &plan,
        &mut topo,
        (&tester_ns, &tester_dir),
        "",
        run.core,
        KernelLinks::None,
    )?;
    chain.wait_ready()?;
    let (t_out, t_in) = chain.tester_ports()?;
    let generator = Generator::new(experiment.traffic.clone(), run.batch).map_err(|(k, r)| RunError::setting(k, r))?;
    let mut wire = TesterLink::new(generator, t_out, t_in, run.batch, TESTER_QUIET);
    let tester = run_compound_on(&mut wire, Sink::new(run.verify), sfclab_core::NamedNfs::new(), run);
    let n = experiment.hops.len();
    let namespaces = std::iter::once(tester_ns.name().to_string())
        .chain(chain.namespaces.iter().map(|ns| ns.name().to_string()))
        .collect();
    let external = chain.stop();
    let tester = tester?;
    let wait_mode = experiment.chaining.memif_wait().unwrap_or(Wait::Poll);
    let testbed = TestbedReport {
        run_name: topo.run_name().to_string(),
        device_under_test: match experiment.chaining.dpdk_hops().len() {
            0 => format!(
                "sfclab chain of {n} hops, each an sfclab process in its own namespace, joined by memif ({wait_mode})"
            ),
            k => format!(
                "chain of {n} hops, each a process in its own namespace ({k} dpdk-testpmd, the rest sfclab), joined by memif ({wait_mode})"
            ),
        },
        hops: n,
        namespaces,
        queues: 1,
        interfaces: Vec::new(),
        processes: Vec::new(),
        switch: BTreeMap::new(),
    };
    drop(topo);
    let lost = wire_loss(std::slice::from_ref(&wire), &external);
    Ok(WiredReport {
        tester,
        dut: Vec::new(),
        dut_processes: external.documents,
        testbed,
        lost,
    })
}

/// How long the end of a tester's phase waits for frames in flight after the last one.
pub(crate) const TESTER_QUIET: Duration = Duration::from_millis(300);

/// Where what the tester's `links` through one chain (one per direction) lost went:
/// the hops' own drops explain it (memif loses nothing on its own: a full ring is a
/// drop its sender counts), and frames that came back after the tester had given up on
/// them.
pub(crate) fn wire_loss<L: sfclab_core::RxPort>(links: &[L], hops: &ExternalOutcome) -> WireLoss {
    let mut tester: BTreeMap<String, u64> = BTreeMap::new();
    for (cause, n) in links.iter().flat_map(|l| l.drops()) {
        *tester.entry(cause.to_string()).or_default() += n;
    }
    let mut explained = BTreeMap::new();
    if hops.dropped > 0 {
        explained.insert("dut".to_string(), hops.dropped);
    }
    // Frames the tester wrote off (nothing for `quiet`) that came back after all.
    let late: u64 = links
        .iter()
        .flat_map(|l| l.counters())
        .filter(|c| c.name == "late")
        .map(|c| c.value)
        .sum();
    if late > 0 {
        explained.insert("late (back after the tester gave up on them)".to_string(), late);
    }
    WireLoss::balance(tester, explained)
}

/// Which of a chain's links are kernel interfaces instead of memif.
pub(crate) enum KernelLinks<'a> {
    /// None: every place on one host, joined by shared memory.
    None,
    /// The chain spans hosts: the host (from 0) of each place (the tester's sender,
    /// hops 1..n, the tester's receiver) and the cable between them; a link between
    /// places on different hosts is a tunnel over it.
    Hosts { link: &'a mut HostLink, places: Vec<usize> },
    /// Every link a veth pair (`chaining: veth`), as containers joined by the kernel.
    Veth,
}

/// The tester's end of a link: a memif interface, or a kernel interface (a tunnel's or
/// a veth pair's end) in the tester's namespace, opened there, used from the tester's
/// thread.
enum TesterEnd {
    Memif(Interface),
    /// In `namespace`, or this process's own (`None`).
    Kernel {
        namespace: Option<Namespace>,
        interface: String,
    },
}

impl TesterEnd {
    /// The memif interface on `socket` in `role`.
    fn memif(socket: &std::path::Path, role: Role) -> Result<TesterEnd, RunError> {
        let spec = format!("memif:{},role={role}", socket.display());
        let settings = MemifSettings::from_spec(&spec, role).map_err(|e| RunError::failed("memif", e))?;
        Interface::open(&settings)
            .map(TesterEnd::Memif)
            .map_err(|e| RunError::failed("memif", e))
    }

    fn wait_connected(&self) -> Result<(), RunError> {
        match self {
            TesterEnd::Memif(i) => i
                .wait_connected(CONNECT_LIMIT)
                .map_err(|e| RunError::failed("memif", e)),
            TesterEnd::Kernel { .. } => Ok(()),
        }
    }

    fn port(&mut self, receive: bool) -> Result<InterfacePort, RunError> {
        match self {
            TesterEnd::Memif(i) => i
                .port(0, receive, !receive)
                .map(InterfacePort::Memif)
                .map_err(|e| RunError::failed("memif", e)),
            TesterEnd::Kernel { namespace, interface } => {
                let name = interface.clone();
                let open =
                    move || InterfacePort::open(IoKind::AfXdp, &name, &sfclab_io::AfXdpSettings::default(), receive);
                match namespace {
                    // A socket belongs to the namespace it was made in, wherever it is used.
                    Some(ns) => ns.run(open).map_err(|e| RunError::failed("namespaces", e))?,
                    None => open(),
                }
                .map_err(|e| RunError::failed("ports", e))
            }
        }
    }
}

/// One chain's hops, each a process in a namespace of its own joined by memif (or by
/// kernel links: tunnels between hosts, veth pairs), and the tester's two ends of it: it
/// sends into the first hop and receives from the last.
pub(crate) struct MemifChain {
    pub(crate) namespaces: Vec<Namespace>,
    tester_out: TesterEnd,
    tester_in: TesterEnd,
    hops: usize,
    processes: Hops,
    peers: Vec<Option<DpdkHop>>,
    /// The ends of its links over kernel interfaces (tunnels or veth pairs): (link,
    /// sender's, receiver's), link k from place k to place k+1.
    kernel_links: Vec<(usize, sfclab_topology::Interface, sfclab_topology::Interface)>,
}

/// Where a chain's links end: link k runs from its sender (the tester for k = 0, else
/// hop k) to its receiver (hop k + 1, or the tester for k = n).
struct LinkEnds<'a> {
    tester_ns: &'a Namespace,
    namespaces: &'a [Namespace],
    label: &'a str,
}

impl LinkEnds<'_> {
    fn sender(&self, k: usize) -> &Namespace {
        if k == 0 {
            self.tester_ns
        } else {
            &self.namespaces[k - 1]
        }
    }

    fn receiver(&self, k: usize) -> &Namespace {
        if k == self.namespaces.len() {
            self.tester_ns
        } else {
            &self.namespaces[k]
        }
    }

    /// A kernel link's ends: `out` at the sender and `in` at the receiver (`<label>o`,
    /// `<label>i` in the tester's namespace).
    fn out_name(&self, k: usize) -> String {
        if k == 0 {
            format!("{}o", self.label)
        } else {
            "out".to_string()
        }
    }

    fn in_name(&self, k: usize) -> String {
        if k == self.namespaces.len() {
            format!("{}i", self.label)
        } else {
            "in".to_string()
        }
    }

    /// The links that are kernel interfaces (tunnels between hosts, or veth), built.
    fn kernel_links(
        &self,
        experiment: &Experiment,
        topo: &mut Topology,
        kernel_links: KernelLinks<'_>,
    ) -> Result<Vec<(usize, sfclab_topology::Interface, sfclab_topology::Interface)>, RunError> {
        let n = self.namespaces.len();
        let mut links = Vec::new();
        match kernel_links {
            KernelLinks::None => {}
            KernelLinks::Hosts { link, places } => {
                if places.len() != n + 2
                    || experiment
                        .chaining
                        .dpdk_hops()
                        .iter()
                        .any(|&i| places[i + 1] != places[0])
                {
                    return Err(RunError::setting(
                        "hosts",
                        "one host per place: the tester's sender, each hop, its receiver",
                    ));
                }
                for k in (0..=n).filter(|&k| places[k] != places[k + 1]) {
                    let (o, i) = link
                        .tunnel(
                            (places[k], self.sender(k), &self.out_name(k)),
                            (places[k + 1], self.receiver(k), &self.in_name(k)),
                        )
                        .map_err(|e| RunError::failed("hosts", e))?;
                    links.push((k, o, i));
                }
            }
            KernelLinks::Veth => {
                if !experiment.chaining.dpdk_hops().is_empty() {
                    return Err(RunError::setting("dpdk_hops", "DPDK hops join by memif"));
                }
                for k in 0..=n {
                    let (o, i) = topo
                        .veth(
                            (self.sender(k), &self.out_name(k)),
                            (self.receiver(k), &self.in_name(k)),
                        )
                        .map_err(|e| RunError::failed("veth", e))?;
                    links.push((k, o, i));
                }
            }
        }
        Ok(links)
    }
}

impl MemifChain {
    /// Builds a namespace per hop (`<label>hop<i>`), listens for the last hop at
    /// `<tester_dir>/<label>in.sock` and starts every hop, last to first; returns
    /// before they are ready ([`MemifChain::wait_ready`]), so that many chains start
    /// at once. `kernel_links` says which links are kernel interfaces instead of memif.
    pub(crate) fn start(
        experiment: &Experiment,
        plan: &HopPlan,
        topo: &mut Topology,
        (tester_ns, tester_dir): (&Namespace, &std::path::Path),
        label: &str,
        tester_core: Option<usize>,
        kernel_links: KernelLinks<'_>,
    ) -> Result<MemifChain, RunError> {
        let n = experiment.hops.len();
        if n == 0 {
            return Err(RunError::setting("chain", "a chain of hops needs at least one"));
        }
        let namespaces: Vec<Namespace> = (1..=n)
            .map(|i| topo.namespace(&format!("{label}hop{i}")))
            .collect::<Result<_, _>>()
            .map_err(|e| RunError::failed("namespaces", e))?;
        // Link k's socket: served by its receiver, hop k+1 (k < n) or the tester (k == n).
        let mut sockets = Vec::with_capacity(n + 1);
        for ns in &namespaces {
            sockets.push(
                ns.state_dir()
                    .map_err(|e| RunError::failed("namespaces", e))?
                    .join("in.sock"),
            );
        }
        sockets.push(tester_dir.join(format!("{label}in.sock")));
        let ends = LinkEnds {
            tester_ns,
            namespaces: &namespaces,
            label,
        };
        let links = ends.kernel_links(experiment, topo, kernel_links)?;
        let crossing = |k: usize| links.iter().find(|(link, _, _)| *link == k);
        let wait = experiment.chaining.memif_wait().unwrap_or(Wait::Poll).endpoint_keys();
        // Hop i's end of link k: the tunnel's interface, or the memif socket.
        let endpoint = |k: usize, role: &str| match crossing(k) {
            Some((_, o, i)) => if role == "server" { i } else { o }.name().to_string(),
            None => format!("memif:{},role={role}{wait}", sockets[k].display()),
        };
        // The tester polls whatever the hops do: it has its own core, and a generator
        // that slept in its receive would fall behind its rate.
        let tester_end = |k: usize, role: Role| -> Result<TesterEnd, RunError> {
            if let Some((_, o, i)) = crossing(k) {
                let end = if role == Role::Server { i } else { o };
                return Ok(TesterEnd::Kernel {
                    namespace: Some(tester_ns.clone()),
                    interface: end.name().to_string(),
                });
            }
            TesterEnd::memif(&sockets[k], role)
        };
        // The tester's receiving end listens first: the last hop connects to it.
        let tester_in = tester_end(n, Role::Server)?;
        let mut processes = HopProcesses::new();
        let mut peers: Vec<Option<DpdkHop>> = (0..n).map(|_| None).collect();
        for i in (0..n).rev() {
            if experiment.chaining.dpdk_hops().contains(&i) {
                let hop = DpdkHop::start(
                    &namespaces[i],
                    (&sockets[i], &sockets[i + 1]),
                    experiment.chaining.hop_cores().get(i).copied().flatten(),
                    tester_core,
                    i,
                )
                .map_err(|e| RunError::failed("dpdk_hops", e))?;
                peers[i] = Some(hop);
            } else {
                let (input, output) = (endpoint(i, "server"), endpoint(i + 1, "client"));
                // Two memif ends name themselves; a kernel interface among them needs `dut:`.
                let ports = if crossing(i).is_none() && crossing(i + 1).is_none() {
                    format!("{input},{output}")
                } else {
                    format!("dut:{input},{output}")
                };
                let hop = plan
                    .spawn(i, &namespaces[i], &ports)
                    .map_err(|e| RunError::failed("hops", e))?;
                processes.add(hop);
            }
        }
        let tester_out = tester_end(0, Role::Client)?;
        Ok(MemifChain {
            namespaces,
            tester_out,
            tester_in,
            hops: n,
            processes: Hops::Local(processes),
            peers,
            kernel_links: links,
        })
    }

    /// The tester's ends of chain `label` whose hops run elsewhere (a cluster's pods on
    /// this node, [`RemoteHops`]), its memif sockets and the hops' control files in
    /// `dir`: the tester connects to both links once the hops say they forward
    /// ([`MemifChain::wait_ready`]), the last hop serving its output (a hop must be able
    /// to say it forwards before the tester is there).
    pub(crate) fn attach(
        experiment: &Experiment,
        attachment: &crate::remote_hops::Attachment,
        label: &str,
        places: Option<&[usize]>,
    ) -> Result<MemifChain, RunError> {
        let n = experiment.hops.len();
        if places.is_some_and(|p| p.len() != n + 2) {
            return Err(RunError::setting(
                "hosts",
                "one host per place: the tester's sender, each hop, its receiver",
            ));
        }
        let crossing = |k: usize| places.is_some_and(|p| p[k] != p[k + 1]);
        // A crossing link's end is the tester's own interface (`c1o`, `c1i`), as here.
        let end = |k: usize, interface: String| -> Result<TesterEnd, RunError> {
            if crossing(k) {
                return Ok(TesterEnd::Kernel {
                    namespace: None,
                    interface,
                });
            }
            TesterEnd::memif(
                &attachment.memif.join(crate::remote_hops::link_socket(label, k)),
                Role::Client,
            )
        };
        Ok(MemifChain {
            namespaces: Vec::new(),
            tester_in: end(n, format!("{label}i"))?,
            tester_out: end(0, format!("{label}o"))?,
            hops: n,
            processes: Hops::Remote(RemoteHops::new(&attachment.control, label, n)),
            peers: (0..n).map(|_| None).collect(),
            kernel_links: Vec::new(),
        })
    }

    /// Waits until every hop forwards and the tester's ends are connected.
    pub(crate) fn wait_ready(&mut self) -> Result<(), RunError> {
        let deadline = Instant::now() + READY_LIMIT;
        match &mut self.processes {
            Hops::Local(p) => p.wait_ready(deadline),
            Hops::Remote(r) => r.wait_ready(deadline),
        }
        .map_err(|e| RunError::failed("hops", e))?;
        self.tester_out.wait_connected()?;
        self.tester_in.wait_connected()
    }

    /// The tester's sending and receiving ports of the forward direction (into the
    /// first hop, back from the last).
    pub(crate) fn tester_ports(&mut self) -> Result<(InterfacePort, InterfacePort), RunError> {
        Ok((self.tester_out.port(false)?, self.tester_in.port(true)?))
    }

    /// The reverse direction's (into the last hop's output, back from the first hop's
    /// input): the same two links, each carrying both ways, for hops that forward both
    /// ways (memif links only).
    pub(crate) fn reverse_tester_ports(&mut self) -> Result<(InterfacePort, InterfacePort), RunError> {
        Ok((self.tester_in.port(false)?, self.tester_out.port(true)?))
    }

    /// The chain's links over kernel interfaces (tunnels between hosts, or veth pairs):
    /// (link k from place k to place k+1, the sender's end, the receiver's end).
    pub(crate) fn kernel_links(&self) -> &[(usize, sfclab_topology::Interface, sfclab_topology::Interface)] {
        &self.kernel_links
    }

    /// The hops' process ids, sfclab's (a DPDK hop's are not followed).
    pub(crate) fn pids(&self) -> Vec<(usize, u32)> {
        match &self.processes {
            Hops::Local(p) => p.pids(),
            Hops::Remote(_) => Vec::new(),
        }
    }

    /// The chain's hops.
    pub(crate) fn len(&self) -> usize {
        self.hops
    }

    /// Asks hop `index` (from 0) to stop (a remote hop: to end its run), without waiting.
    pub(crate) fn interrupt_hop(&mut self, index: usize) {
        match &mut self.processes {
            Hops::Local(p) => p.interrupt_hop(index),
            Hops::Remote(r) => r.interrupt_hop(index),
        }
    }

    /// Waits until hop `index` has exited or ended its run (at most until `deadline`):
    /// what it forwarded is on the next hop's ring before that one is told to stop, and
    /// counted there.
    pub(crate) fn wait_hop_exited(&mut self, index: usize, deadline: Instant) {
        match &mut self.processes {
            Hops::Local(p) => p.wait_exited(index, deadline),
            Hops::Remote(r) => r.wait_exited(index, deadline),
        }
    }

    /// Stops every hop (a remote hop ends its run and goes on to the next); their
    /// documents in chain order: sfclab's own, and for a DPDK hop what it is (its frames
    /// are counted by its neighbours).
    pub(crate) fn stop(mut self) -> ExternalOutcome {
        let mut external = match &mut self.processes {
            Hops::Local(p) => p.stop_all(),
            Hops::Remote(r) => r.stop_all(READY_LIMIT),
        };
        let mut sfclab_docs = std::mem::take(&mut external.documents).into_iter();
        for peer in self.peers.iter_mut() {
            external.documents.push(match peer.take() {
                Some(p) => p.stop(),
                None => sfclab_docs.next().unwrap_or_default(),
            });
        }
        external
    }
}

/// How long hops may take to start.
const READY_LIMIT: Duration = Duration::from_secs(30);

/// Where a chain's hops run: processes this run started, or elsewhere.
enum Hops {
    Local(HopProcesses),
    Remote(RemoteHops),
}

/// A hop run by DPDK's testpmd (mac forwarding) in its namespace: a memif server on
/// its input's socket, a client on its output's.
struct DpdkHop {
    /// Its place in the chain, from 0.
    index: usize,
    process: sfclab_peers::testpmd::Testpmd,
    command: String,
}

impl DpdkHop {
    fn start(
        namespace: &Namespace,
        (input, output): (&std::path::Path, &std::path::Path),
        core: Option<usize>,
        main_core: Option<usize>,
        i: usize,
    ) -> Result<DpdkHop, String> {
        use sfclab_peers::testpmd::{Testpmd, TestpmdSpec, wait_until};
        let bin = sfclab_peers::which("dpdk-testpmd").ok_or("dpdk-testpmd not found (Debian: apt-get install dpdk)")?;
        let forward_core = core.unwrap_or(1);
        let spec = TestpmdSpec {
            forward_core,
            main_core: main_core.filter(|&c| c != forward_core).unwrap_or(0),
            vdevs: vec![
                format!(
                    "net_memif0,role=server,id=0,socket={},socket-abstract=no",
                    input.display()
                ),
                format!(
                    "net_memif1,role=client,id=0,socket={},socket-abstract=no",
                    output.display()
                ),
            ],
            mode: "mac",
            tx_first: false,
            record_core_cycles: false,
            single_file_segments: false,
            netns: Some(namespace.name().to_string()),
        };
        let prefix = format!("{}-dpdk{}", namespace.name(), i + 1);
        let p = Testpmd::start(&bin, &spec, &prefix)?;
        let command = p.command.clone();
        let mut procs = vec![p];
        // Forwarding has started once it prints its first statistics.
        wait_until(
            &mut procs,
            Duration::from_secs(60),
            "dpdk-testpmd forwarding",
            &|| false,
            |p| p[0].is_some(),
        )?;
        let started = std::time::Instant::now();
        while !input.exists() {
            if started.elapsed() > CONNECT_LIMIT {
                return Err(format!("dpdk-testpmd did not listen on {}", input.display()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(DpdkHop {
            index: i,
            process: procs.pop().expect("one"),
            command,
        })
    }

    /// Stops it; its document says what it was.
    fn stop(self) -> serde_json::Value {
        self.process.stop();
        serde_json::json!({
            "hop": self.index + 1,
            "peer": "dpdk-testpmd",
            "chain": ["dpdk-testpmd (mac)"],
            "command": self.command,
        })
    }
}
