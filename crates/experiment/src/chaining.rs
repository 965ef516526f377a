//! How a resolved experiment's NFs are joined, each chaining with the settings that
//! apply to it and to nothing else: a memif wait or DPDK hops cannot exist on a veth
//! chain, nor an SR-IOV NIC on anything but the NIC switch.
//!
//! [`crate::settings::ChainingSetting`] is the `chaining` key as written; the chain
//! file's resolution checks it against the other keys and builds one of these.

use std::fmt::{self, Display};

use sfclab_runtime::PipelineSettings;

use crate::settings::{ChainingSetting, Isolation};

/// How the NFs of a chain are joined, resolved.
#[derive(Clone, Debug, Default)]
pub enum Chaining {
    /// Function calls in one thread (the compound runtime).
    #[default]
    Compound,
    /// Rings between cores (the pipeline runtime): its placement, cores and links.
    Pipeline { settings: PipelineSettings },
    /// Namespaces joined by veth pairs, an sfclab NF in each.
    Veth {
        hop_cores: HopCores,
        /// Hops as threads of this process, or as processes.
        isolation: Isolation,
    },
    /// Namespaces joined by veth pairs, the kernel forwarding in each.
    Linux { hop_cores: HopCores },
    /// Open vSwitch bridges (userspace datapath) joined by veth pairs.
    Ovs { hop_cores: HopCores },
    /// Namespaces whose ends are virtual functions of one NIC switch: emulated (macvlans
    /// of one parent: VEB, or VEPA through the adjacent switch), or a real SR-IOV NIC.
    NicSwitch {
        vepa: bool,
        /// The real SR-IOV NIC to use instead of the emulated one (`sriov`).
        sriov: Option<sfclab_topology::SriovNic>,
        hop_cores: HopCores,
    },
    /// Every hop an sfclab process in its own namespace, neighbours (and the tester)
    /// joined by memif.
    Memif {
        hop_cores: HopCores,
        /// How the hops' (and the tester's) receivers wait (`memif_wait`); `None`: polling.
        wait: Option<sfclab_io::memif::Wait>,
        /// The hops (0-based) that run as dpdk-testpmd (`dpdk_hops`).
        dpdk_hops: Vec<usize>,
    },
}

/// The core of each hop of a chain in namespaces (hops on one core share its thread).
pub type HopCores = Vec<Option<usize>>;

impl Chaining {
    /// The chaining as the `chaining` key names it.
    pub fn kind(&self) -> ChainingSetting {
        match self {
            Chaining::Compound => ChainingSetting::Compound,
            Chaining::Pipeline { .. } => ChainingSetting::Pipeline,
            Chaining::Veth { .. } => ChainingSetting::Veth,
            Chaining::Linux { .. } => ChainingSetting::Linux,
            Chaining::Ovs { .. } => ChainingSetting::Ovs,
            Chaining::NicSwitch { vepa, .. } => ChainingSetting::NicSwitch { vepa: *vepa },
            Chaining::Memif { .. } => ChainingSetting::Memif,
        }
    }

    /// Whether the chain's hops are namespaces sfclab builds.
    pub fn in_namespaces(&self) -> bool {
        self.kind().in_namespaces()
    }

    /// The core of each hop; empty for a chain in one process.
    pub fn hop_cores(&self) -> &[Option<usize>] {
        match self {
            Chaining::Compound | Chaining::Pipeline { .. } => &[],
            Chaining::Veth { hop_cores, .. }
            | Chaining::Linux { hop_cores }
            | Chaining::Ovs { hop_cores }
            | Chaining::NicSwitch { hop_cores, .. }
            | Chaining::Memif { hop_cores, .. } => hop_cores,
        }
    }

    /// The pipeline runtime's settings, when the chain runs as a pipeline across cores.
    pub fn pipeline(&self) -> Option<&PipelineSettings> {
        match self {
            Chaining::Pipeline { settings, .. } => Some(settings),
            _ => None,
        }
    }

    /// How a memif chain's receivers wait; `None` for other chainings, or polling.
    pub fn memif_wait(&self) -> Option<sfclab_io::memif::Wait> {
        match self {
            Chaining::Memif { wait, .. } => *wait,
            _ => None,
        }
    }

    /// The hops (0-based) of a memif chain that dpdk-testpmd runs; none elsewhere.
    pub fn dpdk_hops(&self) -> &[usize] {
        match self {
            Chaining::Memif { dpdk_hops, .. } => dpdk_hops,
            _ => &[],
        }
    }
}

/// Written as the `chaining` key is.
impl Display for Chaining {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind().fmt(f)
    }
}
