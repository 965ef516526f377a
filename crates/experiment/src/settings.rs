//! Every setting of a run, declared once.
//!
//! The same three structs are the command line's flags (clap) and a chain file's keys
//! (serde): `traffic:` is [`TrafficSection`], `run:` is [`RunSection`] and
//! [`PipelineSection`] together. [`MergedSettings::merge`] is the one place where the file and the
//! flags meet (flags win), and it remembers which keys the flags gave, so that an error
//! names the flag or the file the value came from. `sweep --param` sets one of these keys
//! through the same clap parser a flag goes through.

use clap::{Args, FromArgMatches};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sfclab_runtime::{LinkMode, Placement};
use sfclab_traffic::{Destinations, DscpMix, FrameSizes, IpVersion, L4, Rate};
use std::collections::BTreeSet;
use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

/// The generated traffic: a chain file's `traffic:` section.
#[derive(Args, Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TrafficSection {
    /// Frame size with FCS: 64..1518, `imix` (64/594/1518 at 7:4:1), `rfc2544-mix` (the seven RFC 2544 sizes in one stream), or `64:7,594:4,1518:1`.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub size: Option<FrameSizes>,
    /// Number of flows (distinct 5-tuples).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// IP version of the generated traffic: v4 or v6.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub ip: Option<IpVersion>,
    /// Offered rate: `max`, `10Mpps`, `500kpps`, `10Gbit/s` (L1, counts preamble and gap).
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Latency probes per second (0 turns latency measurement off).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_probe_pps: Option<f64>,
    /// Where flows go: `one` address (RFC 2544's benchmarking range, the default),
    /// `spread`: each flow its own random unicast address, as a router's tables see,
    /// `router`: inside the chain's router's IPv4 table (flow i to its i-th prefix), or
    /// IPv4 prefixes `10.0.0.0/8,192.0.2.0/24`: flows spread over them.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub destinations: Option<Destinations>,
    /// Transport of the generated flows: `udp` datagrams, or `tcp` sessions (SYN, data,
    /// FIN; IPv4).
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub proto: Option<L4>,
    /// Packets per session: after this many, a flow starts its next session on a new
    /// source port (flow churn: new flows per second = packet rate / this). TCP default 10.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_packets: Option<u32>,
    /// DSCPs of the flows, in turn (`ef,af11,be`: a third of the flows each; names or
    /// 0..=63): traffic for QoS classes. Default: best effort (0).
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub dscp: Option<DscpMix>,
    /// A responder at the chain's far end answers every packet (an echo server; TCP as a
    /// server does) and the replies run back through the chain: NAT and firewall return
    /// paths. Linear chains, compound runtime.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responder: Option<bool>,
    /// Replay this capture (pcap or pcapng, Ethernet) instead of generating traffic: as
    /// fast as the chain takes it, at `rate`, or at the file's own timestamps
    /// (`replay_timestamps`), looped until the window ends (`replay_loops` caps it).
    /// Compound runtime.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
    /// Passes over the `replay` file (default: until the run's window ends).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_loops: Option<u64>,
    /// Replay at the gaps between the capture's timestamps (as tcpreplay does) instead of
    /// as fast as the chain takes it; `rate` paces a replay instead.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_timestamps: Option<bool>,
    /// Named traffic: a built-in profile (`sfclab profiles` lists them: rfc2544, imix,
    /// internet, web, churn) or one of the chain file's `profiles:`. Its settings are
    /// defaults; any other traffic key or flag given beside it wins.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// How long and how the chain runs: a chain file's `run:` section (with the pipeline's keys).
#[derive(Args, Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Measured window, e.g. `5s`, `500ms`.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub duration: Option<Span>,
    /// Warm-up before the window (counted for conservation, not reported); default 500ms,
    /// none for a finite replay (`replay_loops`), which is measured whole.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Span>,
    /// Packets to generate in the window (instead of a duration).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Packets per batch (1..=256).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// Core to pin the chain to (default: the last core this process may use).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<usize>,
    /// With `ports: tester:OUT,IN`: the tester's sending half (generator, signing, the
    /// OUT port) runs on a thread of its own pinned to this core, its receiving half on
    /// `core`; for where one core's work per frame is what limits the tester and the
    /// machine has a core to spare. OUT must copy frames (not a zero-copy memif client).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_core: Option<usize>,
    /// Turn per-NF cycle accounting off (the fastest path; per-NF cycles are not reported).
    #[arg(long = "no-accounting", num_args = 0, default_missing_value = "false")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<bool>,
    /// Verify every frame's IPv4/UDP checksums at the sink.
    #[arg(long, num_args = 0, default_missing_value = "true")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<bool>,
    /// Packet buffers in the pool.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_size: Option<usize>,
    /// Write every frame leaving the chain to this pcap file (nanosecond timestamps)
    /// instead of the in-memory sink. Compound runtime.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<String>,
    /// Write what leaves an NF to a pcap file: `router=after-router.pcap` (the NF's name
    /// in the chain, then the file); repeat for more NFs. Every output of the NF, packets
    /// it creates included; its cycles include the writing. Any runtime, one replica.
    #[arg(long, value_name = "NF=FILE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tap: Option<Vec<String>>,
    /// Where the traffic flows: `memory` (generator and sink in this process, the
    /// default); `veth` (the chain runs in a namespace of its own, between two veth pairs,
    /// over AF_XDP; sfclab's generator and sink sit in a tester namespace: real kernel
    /// I/O, no NIC needed); `linux` (no chain: the tester measures a namespace where the
    /// Linux kernel forwards IPv4); sfclab builds and removes those namespaces. On
    /// interfaces that exist: `dut:IN,OUT` (the chain forwards from IN to OUT until the
    /// window ends or Ctrl-C) and `tester:OUT,IN` (no chain: the generator sends on OUT
    /// and measures what comes back on IN, across whatever joins them). Needs root.
    /// IN and OUT may also be memif endpoints, `memif:PATH[,role=server|client][,id=N]
    /// [,secret=S][,ring=N][,buffer=N][,wait=polling|interrupt][,spin=US]
    /// [,zero-copy=yes]` (shared memory with DPDK, VPP or another sfclab; no root
    /// needed): a device under test serves them by default (`--ports memif:A,memif:B`,
    /// or `memif:A` in and out of one), a tester connects to them; a client with
    /// `zero-copy=yes` passes frames by reference through its pool, which it shares.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub ports: Option<PortsSetting>,
    /// How the ports of a wired run (`ports: veth`, `linux`) do their I/O: `af_xdp` (the
    /// default: XDP redirect into AF_XDP sockets) or `af_packet` (TPACKET rings: works
    /// on every interface and kernel).
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub io: Option<sfclab_io::IoKind>,
    /// XDP mode of the AF_XDP ports (`ports: veth`, `linux`): `native` (in the driver) or
    /// `generic` (after the kernel built an skb); default native where the driver has it.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<sfclab_io::XdpMode>,
    /// Busy polling on the AF_XDP sockets of interface ports, microseconds: an empty
    /// ring enters the kernel to run the interface's NAPI on the polling core (default off).
    #[arg(long, value_name = "USECS")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_poll: Option<u32>,
    /// How the AF_XDP sockets of interface ports wait for frames: `polling` (the
    /// default) or `interrupt[:SPIN]` (after SPIN, 5us by default, with nothing
    /// received, sleep in poll(2) on the socket until a frame arrives: processes can
    /// share a core).
    #[arg(long, value_name = "polling|interrupt[:SPIN]")]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub xdp_wait: Option<ReceiveWait>,
    /// How the NFs are chained: `compound` (function calls on one core, the default),
    /// `pipeline` (stages on cores joined by rings; as `runtime`), `veth` (every NF in a
    /// namespace of its own, neighbours joined by veth pairs, each NF's I/O over `io`;
    /// `placement` puts NFs on cores, NFs on one core take turns on its thread) or
    /// `linux` (every hop a namespace whose kernel forwards IPv4) or `ovs` (every hop an
    /// Open vSwitch bridge on the userspace datapath, ports afxdp, or system with `io:
    /// af_packet`); for those two the chain must be forwarders. `veth`, `linux` and `ovs`
    /// build the namespaces (and start OVS) and test the chain from a tester namespace,
    /// as `ports: veth`; `nic-switch` (every NF in a namespace with two "virtual
    /// functions" of one emulated NIC, macvlans in bridge mode standing for its VEB:
    /// frames cross the switch after every NF) or `nic-switch:vepa` (VEPA: the adjacent
    /// switch hairpins every frame back). Needs root for those.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub chaining: Option<ChainingSetting>,
    /// With `chaining: veth`: `thread` (the default: each hop a thread of this process
    /// that entered its namespace) or `process` (each hop an sfclab process of its own,
    /// started inside its namespace, as NFs in containers are; each reports its own run).
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// With `chaining: memif`: how each receiving end waits for frames: `polling` (the
    /// default: a core per hop at full speed) or `interrupt[:SPIN]` (polls for SPIN,
    /// 5us by default, then sleeps on the ring's eventfd until the sender signals: hops
    /// can share a core).
    #[arg(long, value_name = "polling|interrupt[:SPIN]")]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub memif_wait: Option<ReceiveWait>,
    /// With `ports: dut:` between two memif interfaces (`--ports memif:A,memif:B`):
    /// forward both ways at once, A to B and B to A, through the same NFs (one instance
    /// of each sees both directions, as a VNF between two networks does; a packet leaves
    /// by the side it did not come in on).
    #[arg(long, num_args = 0, default_missing_value = "true")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub both_ways: Option<bool>,
    /// With `chaining: memif`: hops (1-based, comma-separated) that run as DPDK's
    /// `dpdk-testpmd` (mac forwarding, its forwarding lcore on the hop's core) in their
    /// namespace instead of an sfclab process: a chain mixing sfclab NFs and a DPDK
    /// application. The NF written at each such hop must be a forwarder.
    #[arg(long, value_name = "HOP,...")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpdk_hops: Option<String>,
    /// With `chaining: nic-switch`: a real SR-IOV NIC instead of the emulated one,
    /// `pf=IF,tester-out=IF,tester-in=IF[,pf-out=IF]`: the hops get virtual functions of
    /// `pf` (the last hop sends on one of `pf-out`, default `pf`), the tester sends on
    /// `tester-out` (cabled to `pf`) and receives on `tester-in` (on `pf-out`'s wire).
    /// sfclab makes the VFs and removes them after.
    #[arg(long, value_name = "pf=IF,tester-out=IF,tester-in=IF")]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub sriov: Option<sfclab_topology::SriovNic>,
    /// A file to create once the ports of a `ports: dut:` run are open: how a parent
    /// that started this run (a hop process) knows it forwards.
    #[arg(long, hide = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_file: Option<String>,
    /// A `ports: dut:` run that runs again and again, as a hop a tester elsewhere
    /// measures repeatedly (a cluster's pod): each run ends when `<prefix>.stop`
    /// appears and writes its JSON document to `<prefix>.json`; the next starts at
    /// once, on fresh ports, as a restarted process would. SIGINT or SIGTERM ends the last.
    #[arg(long, hide = true, value_name = "PREFIX")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_files: Option<String>,
    /// As `control_files`, told over TCP on this port (every address of the host): a
    /// hop a tester on another machine measures (a pod of another node). A `ready` line
    /// is answered `yes` once the run forwards; a `stop` line ends the run, its JSON
    /// document the answer.
    #[arg(long, hide = true, value_name = "PORT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_port: Option<u16>,
    /// A capacity a `ports: dut:` run's sending port shares with other processes (a
    /// file a scenario made: its emulated NIC, which every VNF sends through).
    #[arg(long, hide = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_capacity: Option<String>,
    /// Runs and trials that name the same file take turns: one at a time, alternating
    /// (an exclusive flock on it, which other programs can take too). Two searches on
    /// one machine then measure in the same state of it, trial by trial, instead of
    /// measuring each other or minutes apart.
    #[arg(long, value_name = "FILE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub take_turns: Option<String>,
    /// `compound` (one core, the default) or `pipeline` (stages on cores joined by rings).
    #[arg(long, help_heading = "Pipeline")]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// Parallel chains: this many copies of the chain, each placed like one chain on the
    /// cores rotated by its index, flows spread over them by hash (as RSS does). With
    /// `ports: veth`: one compound run per queue of the testbed's interfaces.
    #[arg(long, help_heading = "Pipeline")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<usize>,
}

/// Settings that only the pipeline runtime uses (in a chain file, keys of `run:`): given
/// to a chain that runs compound, they are refused rather than ignored.
#[derive(Args, Serialize, Deserialize, Default, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PipelineSection {
    /// Where NFs run: `s_core`, `bi:K` (K contiguous blocks), `pbp:K` (a new core after
    /// every NF, round robin) or one core per NF (`0,0,1,1`). Implies `--runtime pipeline`.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// Cores the placement may use, in order (default: all).
    #[arg(long, value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<Vec<usize>>,
    /// Core of the generator (default: the first stage's).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_core: Option<usize>,
    /// What a full link between stages does: `drop` (counted, the default) or `backpressure`.
    #[arg(long)]
    #[serde(default, with = "text", skip_serializing_if = "Option::is_none")]
    pub links: Option<LinkMode>,
    /// Packets a link between stages holds.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_size: Option<usize>,
    /// Packets the chain's ingress queue (the NIC's RX ring) holds.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_queue: Option<usize>,
    /// Batches a stage may process per turn on its core (1: equal turns).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_budget: Option<usize>,
    /// The generator waits while the rx-queue is full (Ethernet flow control): no ingress drops.
    #[arg(long, num_args = 0, default_missing_value = "true")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_control: Option<bool>,
}

/// Every setting, as flags.
#[derive(Args, Default, Clone, Debug, PartialEq)]
pub struct Settings {
    #[command(flatten)]
    pub traffic: TrafficSection,
    #[command(flatten)]
    pub run: RunSection,
    #[command(flatten, next_help_heading = "Pipeline")]
    pub pipeline: PipelineSection,
}

impl Settings {
    /// Whether these flags set `key`.
    pub fn gives(&self, key: &str) -> bool {
        section_map(&self.traffic).contains_key(key)
            || section_map(&self.run).contains_key(key)
            || section_map(&self.pipeline).contains_key(key)
    }
}

/// A typed setter per setting: `Settings::default().duration(Duration::from_millis(50))
/// .chaining(ChainingSetting::Memif)` sets what `--duration 50ms --chaining memif` sets,
/// each value of its own type (no text to parse, no error to handle).
macro_rules! setters {
    ($($section:ident: $($field:ident: $ty:ty),+;)+) => {
        impl Settings {
            $($(
                #[doc = concat!("These settings with `", stringify!($field), "` set.")]
                #[must_use]
                pub fn $field(mut self, value: impl Into<$ty>) -> Settings {
                    self.$section.$field = Some(value.into());
                    self
                }
            )+)+
        }

        /// Every setting that has a setter (every setting: a test checks).
        #[cfg(test)]
        const SETTERS: &[&str] = &[$($(stringify!($field)),+),+];
    };
}

setters! {
    traffic: size: FrameSizes, flows: u32, ip: IpVersion, rate: Rate, latency_probe_pps: f64,
        destinations: Destinations, proto: L4, session_packets: u32, dscp: DscpMix,
        responder: bool, replay: String, replay_loops: u64, replay_timestamps: bool,
        profile: String;
    run: duration: Span, warmup: Span, count: u64, batch: usize, core: usize, sender_core: usize,
        accounting: bool,
        verify: bool, pool_size: usize, capture: String, tap: Vec<String>, ports: PortsSetting,
        io: sfclab_io::IoKind, xdp_mode: sfclab_io::XdpMode, busy_poll: u32,
        xdp_wait: ReceiveWait, chaining: ChainingSetting, isolation: Isolation,
        memif_wait: ReceiveWait, both_ways: bool, dpdk_hops: String,
        sriov: sfclab_topology::SriovNic, ready_file: String, control_files: String,
        control_port: u16, shared_capacity: String, take_turns: String, runtime: Runtime,
        replicas: usize;
    pipeline: placement: Placement, cores: Vec<usize>,
        generator_core: usize, links: LinkMode, ring_size: usize, rx_queue: usize,
        stage_budget: usize, flow_control: bool;
}

/// What a hop of a chain in namespaces runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Isolation {
    #[default]
    Thread,
    Process,
}

impl FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "thread" => Ok(Isolation::Thread),
            "process" => Ok(Isolation::Process),
            _ => Err(format!("`{s}` is not an isolation: write thread or process")),
        }
    }
}

impl Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolation::Thread => "thread",
            Isolation::Process => "process",
        })
    }
}

/// How the NFs of a chain are joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChainingSetting {
    /// Function calls in one thread.
    #[default]
    Compound,
    /// Rings between cores.
    Pipeline,
    /// Namespaces joined by veth pairs, an sfclab NF in each.
    Veth,
    /// Namespaces joined by veth pairs, the kernel forwarding in each.
    Linux,
    /// Open vSwitch bridges (userspace datapath) joined by veth pairs.
    Ovs,
    /// Namespaces whose ends are virtual functions of one emulated NIC switch (macvlans
    /// of one parent: `bridge` mode is VEB, `vepa` sends every frame to the adjacent
    /// switch and back).
    NicSwitch { vepa: bool },
    /// Every hop an sfclab process in its own namespace, neighbours (and the tester)
    /// joined by memif: shared memory, no kernel on the path.
    Memif,
}

impl ChainingSetting {
    /// Whether the chain's hops are namespaces sfclab builds.
    pub fn in_namespaces(self) -> bool {
        matches!(
            self,
            ChainingSetting::Veth
                | ChainingSetting::Linux
                | ChainingSetting::Ovs
                | ChainingSetting::NicSwitch { .. }
                | ChainingSetting::Memif
        )
    }

    /// Whether sfclab NFs run in the hops (not the kernel's or OVS's forwarding).
    pub fn runs_sfclab_hops(self) -> bool {
        matches!(
            self,
            ChainingSetting::Veth | ChainingSetting::NicSwitch { .. } | ChainingSetting::Memif
        )
    }
}

impl FromStr for ChainingSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "compound" => Ok(ChainingSetting::Compound),
            "pipeline" => Ok(ChainingSetting::Pipeline),
            "veth" => Ok(ChainingSetting::Veth),
            "linux" => Ok(ChainingSetting::Linux),
            "ovs" => Ok(ChainingSetting::Ovs),
            "nic-switch" | "nic_switch" | "nic-switch:veb" => Ok(ChainingSetting::NicSwitch { vepa: false }),
            "nic-switch:vepa" => Ok(ChainingSetting::NicSwitch { vepa: true }),
            "memif" => Ok(ChainingSetting::Memif),
            _ => Err(format!(
                "`{s}` is not a chaining: write compound, pipeline, veth, linux, ovs, nic-switch (VEB), nic-switch:vepa or memif"
            )),
        }
    }
}

impl Display for ChainingSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChainingSetting::Compound => "compound",
            ChainingSetting::Pipeline => "pipeline",
            ChainingSetting::Veth => "veth",
            ChainingSetting::Linux => "linux",
            ChainingSetting::Ovs => "ovs",
            ChainingSetting::NicSwitch { vepa: false } => "nic-switch",
            ChainingSetting::NicSwitch { vepa: true } => "nic-switch:vepa",
            ChainingSetting::Memif => "memif",
        })
    }
}

/// How receiving ports wait (`memif_wait`, `xdp_wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiveWait(pub sfclab_io::memif::Wait);

impl ReceiveWait {
    /// Interrupt mode with the default spin (`interrupt`).
    pub const INTERRUPT: ReceiveWait = ReceiveWait(sfclab_io::memif::Wait::Interrupt {
        spin: sfclab_io::memif::DEFAULT_SPIN,
    });
}

impl FromStr for ReceiveWait {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use sfclab_io::memif::Wait;
        let t = s.trim().to_ascii_lowercase();
        match t.split_once(':') {
            None if t == "polling" || t == "poll" => Ok(ReceiveWait(Wait::Poll)),
            None if t == "interrupt" => Ok(ReceiveWait::INTERRUPT),
            Some(("interrupt", spin)) => {
                let spin: Span = spin.parse()?;
                Ok(ReceiveWait(Wait::Interrupt { spin: spin.0 }))
            }
            _ => Err(format!(
                "`{s}` is not a way to wait: write polling, interrupt or interrupt:SPIN (e.g. interrupt:5us)"
            )),
        }
    }
}

impl Display for ReceiveWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            sfclab_io::memif::Wait::Poll => f.write_str("polling"),
            sfclab_io::memif::Wait::Interrupt { spin } => write!(f, "interrupt:{}us", spin.as_micros()),
        }
    }
}

/// The runtime a chain runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// All NFs and the generator on one core, one function call after another.
    Compound,
    /// Stages on cores joined by rings.
    Pipeline,
}

impl FromStr for Runtime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "compound" => Ok(Runtime::Compound),
            "pipeline" => Ok(Runtime::Pipeline),
            _ => Err(format!("`{s}` is not a runtime: write compound or pipeline")),
        }
    }
}

impl Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Runtime::Compound => "compound",
            Runtime::Pipeline => "pipeline",
        })
    }
}

/// Where a run's traffic flows (`--ports`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum PortsSetting {
    /// The generator and the sink in this process, joined to the chain by function calls.
    #[default]
    Memory,
    /// The chain in a namespace between veth pairs over AF_XDP; the tester in another.
    Veth,
    /// No chain: the Linux kernel forwards in the device-under-test namespace.
    Linux,
    /// The chain forwards from one existing interface of this namespace to another (or
    /// the same): sfclab as the device under test.
    Dut { input: String, output: String },
    /// No chain: sfclab's generator sends on one existing interface and its sink takes
    /// the frames back on another (or the same), whatever joins them: sfclab as the tester.
    Tester { output: String, input: String },
}

impl PortsSetting {
    /// A testbed sfclab builds (namespaces and veth pairs) for the run.
    pub fn builds_testbed(&self) -> bool {
        matches!(self, PortsSetting::Veth | PortsSetting::Linux)
    }

    /// Whether the chain runs: not when the device under test is outside sfclab.
    pub fn runs_chain(&self) -> bool {
        !matches!(self, PortsSetting::Linux | PortsSetting::Tester { .. })
    }
}

impl FromStr for PortsSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let interfaces = |list: &str| -> Result<(String, String), String> {
            // A memif endpoint's `key=value` settings belong to the endpoint before them.
            let mut endpoints: Vec<String> = Vec::new();
            for item in list.split(',').map(str::trim) {
                match endpoints.last_mut() {
                    Some(last) if item.contains('=') && sfclab_io::is_memif(last) => {
                        last.push(',');
                        last.push_str(item);
                    }
                    _ => endpoints.push(item.to_string()),
                }
            }
            for e in endpoints.iter().filter(|e| sfclab_io::is_memif(e)) {
                sfclab_io::memif::MemifSettings::from_spec(e, sfclab_io::memif::Role::Server)?;
            }
            let names: Vec<&str> = endpoints.iter().map(String::as_str).collect();
            match names[..] {
                [one] if !one.is_empty() => Ok((one.to_string(), one.to_string())),
                [a, b] if !a.is_empty() && !b.is_empty() => Ok((a.to_string(), b.to_string())),
                _ => Err(format!("`{s}`: name one interface, or two separated by a comma")),
            }
        };
        if let Some(list) = t.strip_prefix("dut:") {
            let (input, output) = interfaces(list)?;
            return Ok(PortsSetting::Dut { input, output });
        }
        if let Some(list) = t.strip_prefix("tester:") {
            let (output, input) = interfaces(list)?;
            return Ok(PortsSetting::Tester { output, input });
        }
        if sfclab_io::is_memif(t) {
            // sfclab as the device under test on memif: `memif:A` in and out of one
            // interface, `memif:A,memif:B` in on A and out on B.
            let (input, output) = interfaces(t)?;
            return Ok(PortsSetting::Dut { input, output });
        }
        match t.to_ascii_lowercase().as_str() {
            "memory" => Ok(PortsSetting::Memory),
            "veth" => Ok(PortsSetting::Veth),
            "linux" => Ok(PortsSetting::Linux),
            _ => Err(format!(
                "`{s}` is not a kind of ports: write memory, veth, linux, dut:IN,OUT, tester:OUT,IN or memif:PATH"
            )),
        }
    }
}

impl Display for PortsSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortsSetting::Memory => f.write_str("memory"),
            PortsSetting::Veth => f.write_str("veth"),
            PortsSetting::Linux => f.write_str("linux"),
            PortsSetting::Dut { input, output } => write!(f, "dut:{input},{output}"),
            PortsSetting::Tester { output, input } => write!(f, "tester:{output},{input}"),
        }
    }
}

/// A length of time written as people write it (`5s`, `500ms`, `1m 30s`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        humantime::parse_duration(s.trim())
            .map(Span)
            .map_err(|e| format!("`{s}` is not a duration ({e}); write e.g. 5s or 500ms"))
    }
}

impl From<Duration> for Span {
    fn from(d: Duration) -> Span {
        Span(d)
    }
}

impl From<sfclab_io::memif::Wait> for ReceiveWait {
    fn from(wait: sfclab_io::memif::Wait) -> ReceiveWait {
        ReceiveWait(wait)
    }
}

impl Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

/// Settings whose values are written as text (`64`, `imix`, `10Mpps`, `bi:2`, `5s`): read
/// with the type's `FromStr`, written with its `Display`, the same words on the command
/// line and in a file. Numbers and booleans in a file count as their text (`size: 64`).
mod text {
    use serde::de::{Deserializer, Error, Visitor};
    use serde::{Deserialize, Serializer};
    use std::fmt::{self, Display};
    use std::str::FromStr;

    pub fn serialize<T: Display, S: Serializer>(value: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.collect_str(v),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
    where
        T: FromStr,
        T::Err: Display,
        D: Deserializer<'de>,
    {
        Option::<Text>::deserialize(d)?
            .map(|t| t.0.parse().map_err(D::Error::custom))
            .transpose()
    }

    struct Text(String);

    impl<'de> Deserialize<'de> for Text {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Text;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a value written as text or a number")
                }
                fn visit_str<E: Error>(self, v: &str) -> Result<Text, E> {
                    Ok(Text(v.to_string()))
                }
                fn visit_u64<E: Error>(self, v: u64) -> Result<Text, E> {
                    Ok(Text(v.to_string()))
                }
                fn visit_i64<E: Error>(self, v: i64) -> Result<Text, E> {
                    Ok(Text(v.to_string()))
                }
                fn visit_f64<E: Error>(self, v: f64) -> Result<Text, E> {
                    Ok(Text(v.to_string()))
                }
            }
            d.deserialize_any(V)
        }
    }
}

/// The keys a section has, in declaration order: its fields, which are its flags too.
pub fn keys_of<T: Args>() -> Vec<String> {
    T::augment_args(clap::Command::new("keys"))
        .get_arguments()
        .map(|a| a.get_id().as_str().to_string())
        .collect()
}

/// The settings a run ends with, and which of them the command line gave.
#[derive(Debug, Clone, Default)]
pub struct MergedSettings {
    pub traffic: TrafficSection,
    pub run: RunSection,
    pub pipeline: PipelineSection,
    /// Keys the command line set (`batch`, `ring_size`, ...).
    given: BTreeSet<String>,
}

/// A value in a file section that is not a valid setting: the key and why.
#[derive(Debug, Clone, PartialEq)]
pub struct BadKey {
    /// `traffic` or `run`.
    pub section: &'static str,
    pub key: String,
    pub reason: String,
}

impl MergedSettings {
    /// The file's sections (`traffic:` and `run:` maps, as read) with the flags on top. A
    /// count on the command line replaces the file's duration, and the other way round.
    /// `profiles`: the chain file's own traffic profiles, by name (each a map of traffic
    /// keys); the named `profile`'s settings fill the traffic keys nobody set.
    pub fn merge(
        traffic: &Map<String, Value>,
        run: &Map<String, Value>,
        profiles: &Map<String, Value>,
        flags: &Settings,
    ) -> Result<MergedSettings, BadKey> {
        let given_traffic = section_map(&flags.traffic);
        let mut given_run = section_map(&flags.run);
        given_run.extend(section_map(&flags.pipeline));
        let mut given: BTreeSet<String> = given_traffic.keys().chain(given_run.keys()).cloned().collect();
        let mut run = run.clone();
        if given.contains("duration") || given.contains("count") {
            run.remove("duration");
            run.remove("count");
        }
        let mut traffic = traffic.clone();
        traffic.extend(given_traffic);
        if let Some(name) = traffic.get("profile").cloned() {
            for (k, v) in profile_settings(&name, profiles)? {
                traffic.entry(k).or_insert(v);
            }
        }
        run.extend(given_run);
        let (run_keys, pipeline_keys) = (keys_of::<RunSection>(), keys_of::<PipelineSection>());
        let part = |keys: &[String]| -> Map<String, Value> {
            run.iter()
                .filter(|(k, _)| keys.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        if let Some(k) = run.keys().find(|k| !run_keys.contains(k) && !pipeline_keys.contains(k)) {
            return Err(unknown("run", k, run_keys.iter().chain(&pipeline_keys)));
        }
        if let Some(k) = traffic.keys().find(|k| !keys_of::<TrafficSection>().contains(k)) {
            return Err(unknown("traffic", k, keys_of::<TrafficSection>().iter()));
        }
        // `duration` counts as given when `--count` replaced it.
        if given.contains("count") {
            given.insert("duration".into());
        }
        Ok(MergedSettings {
            traffic: typed("traffic", traffic)?,
            run: typed("run", part(&run_keys))?,
            pipeline: typed("run", part(&pipeline_keys))?,
            given,
        })
    }

    /// Whether the command line gave `key`.
    pub fn given_by_flag(&self, key: &str) -> bool {
        self.given.contains(key)
    }
}

/// The settings of the profile `name`: the chain file's own first, then the built-ins.
fn profile_settings(name: &Value, profiles: &Map<String, Value>) -> Result<Map<String, Value>, BadKey> {
    let bad = |reason: String| BadKey {
        section: "traffic",
        key: "profile".into(),
        reason,
    };
    let Value::String(name) = name else {
        return Err(bad(format!("expected a profile's name, found `{name}`")));
    };
    if let Some(own) = profiles.get(name) {
        return match own {
            Value::Object(m) => Ok(m.clone()),
            _ => Err(bad(format!("profile `{name}` is not a mapping of traffic settings"))),
        };
    }
    let builtin = sfclab_traffic::profiles::builtin(name).ok_or_else(|| {
        let known: Vec<&str> = profiles
            .keys()
            .map(String::as_str)
            .chain(sfclab_traffic::profiles::PROFILES.iter().map(|p| p.name))
            .collect();
        bad(format!(
            "`{name}` is not a traffic profile; known: {}",
            known.join(", ")
        ))
    })?;
    match serde_json::from_str(builtin.settings) {
        Ok(Value::Object(m)) => Ok(m),
        _ => unreachable!("built-in profiles are JSON objects (tested)"),
    }
}

/// The flag that sets `key` (`--batch`, `--no-accounting`), from the declaration.
pub fn flag_of(key: &str) -> String {
    Settings::augment_args(clap::Command::new("flags"))
        .get_arguments()
        .find(|a| a.get_id().as_str() == key)
        .and_then(|a| a.get_long())
        .map(|l| format!("--{l}"))
        .unwrap_or_else(|| format!("--{}", key.replace('_', "-")))
}

impl Settings {
    /// These settings with `--<key> <value>` applied, parsed exactly as the command line
    /// parses it (a sweep point).
    pub fn with(&self, key: &str, value: &str) -> Result<Settings, String> {
        let flag = flag_of(key);
        let known = keys_of::<Settings>();
        if !known.iter().any(|k| k == key) {
            return Err(format!("`{key}` is not a setting; settings are {}", known.join(", ")));
        }
        let command = Settings::augment_args(clap::Command::new("sfclab").no_binary_name(true));
        let matches = command
            .try_get_matches_from([flag.as_str(), value])
            .map_err(|e| first_line(&e.to_string()))?;
        let mut out = self.clone();
        out.update_from_arg_matches(&matches).map_err(|e| e.to_string())?;
        Ok(out)
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string()
}

fn unknown<'a>(section: &'static str, key: &str, known: impl Iterator<Item = &'a String>) -> BadKey {
    BadKey {
        section,
        key: key.to_string(),
        reason: format!(
            "unknown key; `{section}:` takes {}",
            known.map(String::as_str).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A section's given settings as a map of key to value.
fn section_map<T: Serialize>(section: &T) -> Map<String, Value> {
    match serde_json::to_value(section) {
        Ok(Value::Object(m)) => m,
        _ => unreachable!("a settings section serializes to a map"),
    }
}

fn typed<T: serde::de::DeserializeOwned>(section: &'static str, map: Map<String, Value>) -> Result<T, BadKey> {
    serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| BadKey {
        section,
        key: e.path().iter().next().map(|s| s.to_string()).unwrap_or_default(),
        reason: crate::settings::plain(&e.into_inner().to_string()),
    })
}

/// The keys a section sets (those that are not `None`).
pub fn given_keys<T: Serialize>(section: &T) -> Vec<String> {
    section_map(section).keys().cloned().collect()
}

impl Span {
    pub fn duration(self) -> Duration {
        self.0
    }
}

/// Serde's words for what it expected, in a chain file's terms (no Rust type names).
pub(crate) fn plain(message: &str) -> String {
    let mut m = message.to_string();
    for (rust, words) in [
        ("expected usize", "expected a whole number"),
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected u16", "expected a whole number"),
        ("expected u8", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a mapping (key: value)"),
        (
            "expected struct ChainFile",
            "expected a mapping with `chain:` (and optionally `traffic:` and `run:`)",
        ),
        (
            "expected struct TrafficSection",
            "expected a mapping of traffic settings",
        ),
        ("expected struct RunSection", "expected a mapping of run settings"),
        ("expected a boolean", "expected true or false"),
    ] {
        m = m.replace(rust, words);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memif_endpoints_keep_their_settings_and_name_a_bad_one() {
        let p: PortsSetting = "memif:/run/a.sock,role=client,id=3,memif:/run/b.sock".parse().unwrap();
        assert_eq!(
            p,
            PortsSetting::Dut {
                input: "memif:/run/a.sock,role=client,id=3".into(),
                output: "memif:/run/b.sock".into()
            }
        );
        assert_eq!(p.to_string().parse::<PortsSetting>().unwrap(), p, "written as read");
        let one: PortsSetting = "memif:/run/a.sock,wait=interrupt".parse().unwrap();
        assert_eq!(
            one,
            PortsSetting::Dut {
                input: "memif:/run/a.sock,wait=interrupt".into(),
                output: "memif:/run/a.sock,wait=interrupt".into()
            }
        );
        let t: PortsSetting = "tester:memif:/a.sock,eth0".parse().unwrap();
        assert_eq!(
            t,
            PortsSetting::Tester {
                output: "memif:/a.sock".into(),
                input: "eth0".into()
            }
        );
        let e = "memif:/a.sock,wait=sometimes".parse::<PortsSetting>().unwrap_err();
        assert!(e.contains("wait `sometimes`"), "{e}");
    }

    fn map(text: &str) -> Map<String, Value> {
        match serde_json::from_str(text).unwrap() {
            Value::Object(m) => m,
            _ => panic!(),
        }
    }

    #[test]
    fn flags_win_and_are_remembered() {
        let flags = Settings::default().with("batch", "64").unwrap();
        let l = MergedSettings::merge(
            &map(r#"{"size": 128}"#),
            &map(r#"{"batch": 8, "ring_size": 512}"#),
            &Map::new(),
            &flags,
        )
        .unwrap();
        assert_eq!(l.traffic.size, Some(FrameSizes::Fixed { size: 128 }));
        assert_eq!((l.run.batch, l.pipeline.ring_size), (Some(64), Some(512)));
        assert!(l.given_by_flag("batch") && !l.given_by_flag("ring_size") && !l.given_by_flag("size"));
    }

    #[test]
    fn a_count_flag_replaces_the_file_duration_and_the_other_way_round() {
        let flags = Settings::default().with("count", "1000").unwrap();
        let l = MergedSettings::merge(&Map::new(), &map(r#"{"duration": "9s"}"#), &Map::new(), &flags).unwrap();
        assert_eq!((l.run.count, l.run.duration), (Some(1000), None));
        assert!(l.given_by_flag("duration"), "an error about the duration is the flag's");
        let flags = Settings::default().with("duration", "2s").unwrap();
        let l = MergedSettings::merge(&Map::new(), &map(r#"{"count": 5}"#), &Map::new(), &flags).unwrap();
        assert_eq!(
            (l.run.count, l.run.duration),
            (None, Some(Span(Duration::from_secs(2))))
        );
    }

    #[test]
    fn file_values_are_typed_with_the_key_and_reason() {
        let e = MergedSettings::merge(
            &Map::new(),
            &map(r#"{"links": "sometimes"}"#),
            &Map::new(),
            &Settings::default(),
        )
        .unwrap_err();
        assert_eq!((e.section, e.key.as_str()), ("run", "links"));
        assert!(e.reason.contains("not a link mode"), "{e:?}");
        let e = MergedSettings::merge(&map(r#"{"sizes": 64}"#), &Map::new(), &Map::new(), &Settings::default())
            .unwrap_err();
        assert_eq!((e.section, e.key.as_str()), ("traffic", "sizes"));
        assert!(e.reason.contains("takes size, flows"), "{e:?}");
    }

    /// Every key is in one section only, so a key names its setting everywhere.
    #[test]
    fn every_setting_has_a_typed_setter_that_sets_what_its_flag_sets() {
        let mut keys = keys_of::<Settings>();
        let mut setters: Vec<String> = SETTERS.iter().map(ToString::to_string).collect();
        keys.sort();
        setters.sort();
        assert_eq!(keys, setters);
        let typed = Settings::default()
            .duration(Duration::from_millis(1500))
            .chaining(ChainingSetting::Memif)
            .memif_wait(sfclab_io::memif::Wait::Poll)
            .flows(7u32)
            .cores(vec![0, 1]);
        let parsed = [
            ("duration", "1500ms"),
            ("chaining", "memif"),
            ("memif_wait", "polling"),
            ("flows", "7"),
            ("cores", "0,1"),
        ]
        .iter()
        .try_fold(Settings::default(), |s, (k, v)| s.with(k, v))
        .unwrap();
        assert_eq!(format!("{typed:?}"), format!("{parsed:?}"));
    }

    #[test]
    fn keys_are_unique_across_sections() {
        let all = keys_of::<Settings>();
        let unique: BTreeSet<&String> = all.iter().collect();
        assert_eq!(all.len(), unique.len(), "{all:?}");
        assert_eq!(flag_of("accounting"), "--no-accounting");
        assert_eq!(flag_of("ring_size"), "--ring-size");
    }

    /// What `Display` writes, `FromStr` reads back: flags survive the merge unchanged.
    #[test]
    fn text_settings_round_trip() {
        let flags = Settings::default()
            .with("size", "64:7,594:4,1518:1")
            .and_then(|s| s.with("rate", "2.5Gbit/s"))
            .and_then(|s| s.with("placement", "0,0,1"))
            .and_then(|s| s.with("duration", "1m 30s"))
            .and_then(|s| s.with("ip", "v6"))
            .and_then(|s| s.with("runtime", "pipeline"))
            .and_then(|s| s.with("links", "backpressure"))
            .unwrap();
        let l = MergedSettings::merge(&Map::new(), &Map::new(), &Map::new(), &flags).unwrap();
        assert_eq!(
            (l.traffic, l.run, l.pipeline),
            (flags.traffic, flags.run, flags.pipeline)
        );
    }

    #[test]
    fn sweep_values_parse_as_flags_do() {
        let e = Settings::default().with("batch", "many").unwrap_err();
        assert!(e.contains("invalid value 'many' for '--batch"), "{e}");
        let e = Settings::default().with("colour", "red").unwrap_err();
        assert!(e.contains("`colour` is not a setting"), "{e}");
    }

    /// A profile fills the traffic keys nobody set; keys in the file and flags win; the
    /// file's own profiles come before the built-ins; an unknown name lists the known.
    #[test]
    fn profiles_fill_what_nobody_set() {
        let l = MergedSettings::merge(
            &map(r#"{"profile": "web", "flows": 8}"#),
            &Map::new(),
            &Map::new(),
            &Settings::default(),
        )
        .unwrap();
        let t = &l.traffic;
        assert_eq!(
            (t.proto, t.flows, t.session_packets, t.responder),
            (Some(L4::Tcp), Some(8), Some(10), Some(true))
        );
        let flags = Settings::default()
            .with("profile", "churn")
            .unwrap()
            .with("size", "128")
            .unwrap();
        let l = MergedSettings::merge(&Map::new(), &Map::new(), &Map::new(), &flags).unwrap();
        assert_eq!(
            l.traffic.size,
            Some(FrameSizes::Fixed { size: 128 }),
            "the flag wins over the profile"
        );
        assert_eq!(l.traffic.session_packets, Some(2));
        let own = map(r#"{"web": {"flows": 3}}"#);
        let l = MergedSettings::merge(&map(r#"{"profile": "web"}"#), &Map::new(), &own, &Settings::default()).unwrap();
        assert_eq!(
            (l.traffic.flows, l.traffic.proto),
            (Some(3), None),
            "the file's own profile, not the built-in"
        );
        let e =
            MergedSettings::merge(&map(r#"{"profile": "webb"}"#), &Map::new(), &own, &Settings::default()).unwrap_err();
        assert_eq!((e.section, e.key.as_str()), ("traffic", "profile"));
        assert!(
            e.reason
                .contains("`webb` is not a traffic profile; known: web, rfc2544"),
            "{}",
            e.reason
        );
        let bad = map(r#"{"mine": {"sizes": 64}}"#);
        let e =
            MergedSettings::merge(&map(r#"{"profile": "mine"}"#), &Map::new(), &bad, &Settings::default()).unwrap_err();
        assert_eq!(e.key, "sizes", "a profile's unknown key is named");
    }

    /// Every built-in profile is a valid set of traffic settings.
    #[test]
    fn built_in_profiles_are_valid_traffic_settings() {
        for p in &sfclab_traffic::profiles::PROFILES {
            let m = map(p.settings);
            let l = MergedSettings::merge(
                &map(&format!(r#"{{"profile": "{}"}}"#, p.name)),
                &Map::new(),
                &Map::new(),
                &Settings::default(),
            )
            .unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
            assert_eq!(l.traffic.flows.map(Value::from), m.get("flows").cloned(), "{}", p.name);
        }
    }
}
