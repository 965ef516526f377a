//! Where a resolved experiment's traffic flows, each kind of ports with the settings
//! that apply to it and to nothing else: an AF_XDP setting cannot exist on a run in
//! memory or over AF_PACKET, nor a hop's control on a tester.
//!
//! [`crate::settings::PortsSetting`] is the `ports` key as written; the chain file's
//! resolution checks it against the other keys and builds one of these.

use std::fmt::{self, Display};
use std::path::PathBuf;

use sfclab_io::{AfXdpSettings, IoKind, XdpMode};

/// Where a run's traffic flows, resolved.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Ports {
    /// The generator and the sink in this process, joined to the chain by function calls.
    #[default]
    Memory,
    /// A testbed sfclab builds: the chain (or its hops) in namespaces between veth
    /// pairs, the tester in another.
    Veth(InterfaceIo),
    /// A testbed sfclab builds, with no chain: the Linux kernel forwards in the
    /// device-under-test namespace.
    Linux(InterfaceIo),
    /// sfclab as the device under test: the chain forwards from one existing interface
    /// (or memif endpoint) of this namespace to another, or the same.
    Dut {
        input: String,
        output: String,
        io: InterfaceIo,
        hop: ServedHop,
    },
    /// sfclab as the tester, no chain: the generator sends on one existing interface and
    /// the sink takes the frames back on another (or the same), whatever joins them.
    Tester {
        output: String,
        input: String,
        io: InterfaceIo,
        /// The core of a sending thread of its own (`sender_core`); `None`: the tester
        /// sends from its one thread.
        sender_core: Option<usize>,
    },
}

impl Ports {
    /// A testbed sfclab builds (namespaces and veth pairs) for the run.
    pub fn builds_testbed(&self) -> bool {
        matches!(self, Ports::Veth(_) | Ports::Linux(_))
    }

    /// Whether the chain runs: not when the device under test is outside sfclab.
    pub fn runs_chain(&self) -> bool {
        !matches!(self, Ports::Linux(_) | Ports::Tester { .. })
    }

    /// How the ports on interfaces move frames; `None` in memory.
    pub fn interface_io(&self) -> Option<&InterfaceIo> {
        match self {
            Ports::Memory => None,
            Ports::Veth(io) | Ports::Linux(io) | Ports::Dut { io, .. } | Ports::Tester { io, .. } => Some(io),
        }
    }

    /// What the device under test is told by, when it is a hop serving runs.
    pub fn served_hop(&self) -> Option<&ServedHop> {
        match self {
            Ports::Dut { hop, .. } => Some(hop),
            _ => None,
        }
    }
}

/// Written as the `ports` key is.
impl Display for Ports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ports::Memory => f.write_str("memory"),
            Ports::Veth(_) => f.write_str("veth"),
            Ports::Linux(_) => f.write_str("linux"),
            Ports::Dut { input, output, .. } => write!(f, "dut:{input},{output}"),
            Ports::Tester { output, input, .. } => write!(f, "tester:{output},{input}"),
        }
    }
}

/// How ports on interfaces move frames (`io`), with AF_XDP's own settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterfaceIo {
    AfXdp {
        /// `xdp_mode`; `None`: native where the driver has it.
        mode: Option<XdpMode>,
        /// `busy_poll`, microseconds.
        busy_poll: Option<u32>,
        /// `xdp_wait`; `None`: polling.
        wait: Option<sfclab_io::Wait>,
    },
    AfPacket,
}

impl Default for InterfaceIo {
    fn default() -> InterfaceIo {
        InterfaceIo::AfXdp {
            mode: None,
            busy_poll: None,
            wait: None,
        }
    }
}

impl InterfaceIo {
    pub fn kind(&self) -> IoKind {
        match self {
            InterfaceIo::AfXdp { .. } => IoKind::AfXdp,
            InterfaceIo::AfPacket => IoKind::AfPacket,
        }
    }

    /// The settings of each AF_XDP port (the defaults where the ports are AF_PACKET's).
    pub fn af_xdp_settings(&self) -> AfXdpSettings {
        match *self {
            InterfaceIo::AfXdp { mode, busy_poll, wait } => AfXdpSettings {
                xdp_mode: mode,
                busy_poll,
                wait: wait.unwrap_or(sfclab_io::Wait::Poll),
                ..AfXdpSettings::default()
            },
            InterfaceIo::AfPacket => AfXdpSettings::default(),
        }
    }

    /// The flags of `sfclab run` that give these settings to a hop process.
    pub fn flags(&self) -> Vec<String> {
        let mut args: Vec<String> = vec!["--io".into(), self.kind().to_string()];
        if let InterfaceIo::AfXdp { mode, busy_poll, wait } = *self {
            if let Some(m) = mode {
                args.extend(["--xdp-mode".into(), m.to_string()]);
            }
            if let Some(us) = busy_poll {
                args.extend(["--busy-poll".into(), us.to_string()]);
            }
            if let Some(w) = wait {
                args.extend(["--xdp-wait".into(), crate::settings::ReceiveWait(w).to_string()]);
            }
        }
        args
    }
}

/// A device under test that serves runs for a tester elsewhere (a hop process of a
/// deployment or of `isolation: process`), and what it shares with other processes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ServedHop {
    /// `ready_file`: created once the ports are open (and the next memif hop is there).
    pub ready_file: Option<PathBuf>,
    /// How the tester ends each run and takes its report; `None`: one run, ended by
    /// the process's own stop (SIGINT, SIGTERM) or its duration.
    pub control: Option<ControlledBy>,
    /// `shared_capacity`: the capacity its sending port shares with other processes.
    pub shared_capacity: Option<PathBuf>,
    /// `both_ways`: forwards both ways at once between its two memif interfaces.
    pub both_ways: bool,
}

/// How a hop serving runs is told to end one and gives its report (the tester's side:
/// [`crate::remote_hops::HopControl`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlledBy {
    /// `control_files`: each run ended by `<prefix>.stop`, reported to `<prefix>.json`.
    Files(PathBuf),
    /// `control_port`: told over TCP on this port.
    Port(u16),
}
