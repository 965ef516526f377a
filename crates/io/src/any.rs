//! One type for a port on an interface, whichever kernel interface it uses, so that a
//! run can choose AF_XDP or AF_PACKET from its settings (one branch per batch).

use crate::af_packet::{AfPacketPort, AfPacketSettings};
use crate::af_xdp::{AfXdpPort, AfXdpSettings};
use crate::memif::{self, MemifPort, MemifSettings};
use sfclab_core::port::{PortInfo, PortStats, Shortfall};
use sfclab_core::{Batch, NfCounter, PacketPool, Recycle, RxPort, TxPort};

/// Which kernel interface a port uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IoKind {
    /// AF_XDP sockets with an XDP redirect program (the fast path).
    #[default]
    AfXdp,
    /// AF_PACKET rings (works everywhere).
    AfPacket,
}

impl std::str::FromStr for IoKind {
    type Err = String;
    fn from_str(s: &str) -> Result<IoKind, String> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "af_xdp" | "xdp" => Ok(IoKind::AfXdp),
            "af_packet" | "packet" => Ok(IoKind::AfPacket),
            _ => Err(format!("`{s}` is not a kind of I/O: write af_xdp or af_packet")),
        }
    }
}

impl std::fmt::Display for IoKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoKind::AfXdp => "af_xdp",
            IoKind::AfPacket => "af_packet",
        })
    }
}

/// A port on an interface.
// One per port, built once for a run: its size costs nothing, a box would cost a pointer
// chase per batch.
#[allow(clippy::large_enum_variant)]
pub enum InterfacePort {
    AfXdp(AfXdpPort),
    AfPacket(AfPacketPort),
    Memif(MemifPort),
}

/// Whether an endpoint names a memif interface rather than a kernel one.
pub fn is_memif(endpoint: &str) -> bool {
    endpoint.starts_with(memif::SPEC_PREFIX)
}

impl InterfacePort {
    /// Opens a port of `kind` on `interface` (of the calling thread's namespace);
    /// `receive`: whether it receives (an AF_XDP port then attaches its program).
    pub fn open(kind: IoKind, interface: &str, xdp: &AfXdpSettings, receive: bool) -> Result<InterfacePort, String> {
        match kind {
            IoKind::AfXdp => {
                AfXdpPort::open(interface, &AfXdpSettings { receive, ..xdp.clone() }).map(InterfacePort::AfXdp)
            }
            IoKind::AfPacket => AfPacketPort::open(
                interface,
                &AfPacketSettings {
                    receive,
                    ..AfPacketSettings::default()
                },
            )
            .map(InterfacePort::AfPacket),
        }
    }

    /// The receiving port on `input` and the sending one on `output`, each a kernel
    /// interface (a port of `kind`) or a memif endpoint (`memif:PATH[,key=value...]`,
    /// `role` when it names none). One memif endpoint named twice is one interface whose
    /// queue receives and sends. Nothing waits for a memif peer here: a caller that must
    /// (a tester) waits on each port once both are open (and a zero-copy client's pool
    /// attached): a server then listens on all its sockets at once, as a DPDK client
    /// tries each socket once when its port starts.
    pub fn open_pair(
        kind: IoKind,
        input: &str,
        output: &str,
        xdp: &AfXdpSettings,
        role: memif::Role,
    ) -> Result<(InterfacePort, InterfacePort), String> {
        let memif_interface = |spec: &str| -> Result<memif::Interface, String> {
            let settings = MemifSettings::from_spec(spec, role)?;
            memif::Interface::open(&settings)
        };
        if is_memif(input) && input == output {
            let mut i = memif_interface(input)?;
            let rx = i.port(0, true, false)?;
            let tx = i.port(0, false, true)?;
            return Ok((InterfacePort::Memif(rx), InterfacePort::Memif(tx)));
        }
        let mut rx_interface = is_memif(input).then(|| memif_interface(input)).transpose()?;
        let mut tx_interface = is_memif(output).then(|| memif_interface(output)).transpose()?;
        let rx = match &mut rx_interface {
            Some(i) => i.port(0, true, false).map(InterfacePort::Memif)?,
            None => Self::open(kind, input, xdp, true)?,
        };
        let tx = match &mut tx_interface {
            Some(i) => i.port(0, false, true).map(InterfacePort::Memif)?,
            None => Self::open(kind, output, xdp, false)?,
        };
        Ok((rx, tx))
    }

    /// Opens `queues` ports on `interface`, port k for replica k. AF_XDP: port k is
    /// queue k's socket (receiving ones share one redirect program). AF_PACKET: the
    /// receiving sockets form one flow-hash fanout group (the kernel gives each frame
    /// to one of them, every frame of a flow to the same one); sending ones are plain.
    pub fn open_queues(
        kind: IoKind,
        interface: &str,
        xdp: &AfXdpSettings,
        receive: bool,
        queues: u32,
    ) -> Result<Vec<InterfacePort>, String> {
        if queues <= 1 {
            return Self::open(kind, interface, xdp, receive).map(|p| vec![p]);
        }
        let packet = AfPacketSettings {
            receive,
            ..AfPacketSettings::default()
        };
        match (kind, receive) {
            (IoKind::AfXdp, true) => {
                AfXdpPort::open_queues(interface, &AfXdpSettings { receive, ..xdp.clone() }, queues)
                    .map(|ports| ports.into_iter().map(InterfacePort::AfXdp).collect())
            }
            (IoKind::AfXdp, false) => (0..queues)
                .map(|queue| {
                    AfXdpPort::open(
                        interface,
                        &AfXdpSettings {
                            receive,
                            queue,
                            ..xdp.clone()
                        },
                    )
                    .map(InterfacePort::AfXdp)
                })
                .collect(),
            (IoKind::AfPacket, true) => AfPacketPort::open_fanout(interface, &packet, queues)
                .map(|ports| ports.into_iter().map(InterfacePort::AfPacket).collect()),
            (IoKind::AfPacket, false) => (0..queues)
                .map(|_| AfPacketPort::open(interface, &packet).map(InterfacePort::AfPacket))
                .collect(),
        }
    }
}

macro_rules! each {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            InterfacePort::AfXdp($p) => $e,
            InterfacePort::AfPacket($p) => $e,
            InterfacePort::Memif($p) => $e,
        }
    };
}

impl RxPort for InterfacePort {
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        each!(self, p => p.rx(now, pool, batch))
    }
    fn exhausted(&self) -> bool {
        each!(self, p => RxPort::exhausted(p))
    }
    fn needs_fresh_clock(&self) -> bool {
        each!(self, p => RxPort::needs_fresh_clock(p))
    }
    fn stats(&self) -> PortStats {
        each!(self, p => RxPort::stats(p))
    }
    fn start_window(&mut self, count: Option<u64>) {
        each!(self, p => RxPort::start_window(p, count))
    }
    fn shortfall(&self) -> Shortfall {
        each!(self, p => RxPort::shortfall(p))
    }
    fn counters(&self) -> Vec<NfCounter> {
        each!(self, p => RxPort::counters(p))
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        each!(self, p => RxPort::drops(p))
    }
    fn discard_unread(&mut self) {
        each!(self, p => RxPort::discard_unread(p))
    }
    fn shared_pool_need(&self) -> Option<usize> {
        each!(self, p => RxPort::shared_pool_need(p))
    }
    fn attach_pool(&mut self, pool: &PacketPool) {
        each!(self, p => RxPort::attach_pool(p, pool))
    }
    fn return_buffers(&mut self, pool: &mut PacketPool) {
        each!(self, p => RxPort::return_buffers(p, pool))
    }
    fn info(&self) -> PortInfo {
        each!(self, p => RxPort::info(p))
    }
}

impl TxPort for InterfacePort {
    fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R) {
        each!(self, p => p.tx(now, batch, recycle))
    }
    fn stats(&self) -> PortStats {
        each!(self, p => TxPort::stats(p))
    }
    fn start_window(&mut self) {
        each!(self, p => TxPort::start_window(p))
    }
    fn flush(&mut self) {
        each!(self, p => TxPort::flush(p))
    }
    fn window_packets(&self) -> u64 {
        each!(self, p => TxPort::window_packets(p))
    }
    fn lost_in_flight(&self) -> u64 {
        each!(self, p => TxPort::lost_in_flight(p))
    }
    fn shared_pool_need(&self) -> Option<usize> {
        each!(self, p => TxPort::shared_pool_need(p))
    }
    fn attach_pool(&mut self, pool: &PacketPool) {
        each!(self, p => TxPort::attach_pool(p, pool))
    }
    fn return_buffers(&mut self, pool: &mut PacketPool) {
        each!(self, p => TxPort::return_buffers(p, pool))
    }
    fn counters(&self) -> Vec<NfCounter> {
        each!(self, p => TxPort::counters(p))
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        each!(self, p => TxPort::drops(p))
    }
    fn info(&self) -> PortInfo {
        each!(self, p => TxPort::info(p))
    }
}
