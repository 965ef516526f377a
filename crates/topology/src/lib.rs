//! What the kernel builds for a run: network namespaces, the veth pairs that join
//! them, the Open vSwitch daemons that may switch between them, and hosts joined by a
//! shaped cable with a VXLAN tunnel per crossing, under run-unique names, always taken
//! down again.
//!
//! Every namespace is named `sfclab-<pid>-<n>-<role>`, and every link is created inside
//! one of them (never in the namespace sfclab runs in), so deleting a run's namespaces
//! deletes its links and whatever XDP programs sat on them. Three guarantees:
//! - a [`Topology`] removes what it built when dropped (success, error, unwinding);
//! - a process-wide registry lets a panic hook or signal handler remove everything
//!   this process still holds ([`tear_down_everything`]), as release builds abort on
//!   panic without unwinding;
//! - [`cleanup`] removes what killed processes left: namespaces whose pid is gone.
//!
//! The kernel is driven through `ip` (iproute2, on every Linux box): the set-up is not
//! on the data path, and `ip`'s own errors are the clearest a user can get.

#![forbid(unsafe_code)]

mod command;
mod counters;
mod host_link;
mod namespace;
pub mod ovs;
mod restore;
pub mod sriov;
mod testbed;

pub use command::TopologyError;
pub use counters::LinkCounters;
pub use host_link::{HostLink, LinkEndCounters, LinkShape, MAX_HOSTS, VXLAN_OVERHEAD};
pub use namespace::{Interface, Namespace};
pub use sriov::SriovNic;
pub use testbed::{Hop, TESTER_IN_MAC, Testbed, vf_in_mac, vf_out_mac};

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// An interface name the kernel takes: 1 to 15 bytes, no `/` or space.
pub(crate) fn check_interface_name(name: &str) -> Result<(), TopologyError> {
    if name.is_empty() || name.len() > 15 || name.contains(['/', ' ']) {
        return Err(TopologyError::BadName(name.to_string()));
    }
    Ok(())
}

/// Every name sfclab gives a namespace starts with this.
pub const PREFIX: &str = "sfclab-";

/// Namespaces this process created and has not removed yet.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Topologies created by this process so far (so parallel tests get distinct names).
static CREATED: AtomicU32 = AtomicU32::new(0);

/// Namespaces and links built for one run; removed when dropped.
pub struct Topology {
    /// `sfclab-<pid>-<n>`: the start of every name this topology gives.
    run: String,
    namespaces: Vec<Namespace>,
    /// Macvlans made so far (their temporary names).
    macvlans: u32,
    /// What the run changed outside its namespaces, undone first at teardown.
    restorations: restore::Journal,
}

/// How the macvlans of one parent reach each other: as an SR-IOV NIC's embedded switch
/// does (`bridge`, VEB: switched inside), or through the adjacent switch (`vepa`: every
/// frame leaves by the parent, and the switch on the other side sends it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacvlanMode {
    /// The parent switches between its macvlans itself (a NIC's VEB).
    Bridge,
    /// Every frame leaves by the parent; the switch it is cabled to sends it back.
    Vepa,
}

impl MacvlanMode {
    pub fn name(self) -> &'static str {
        match self {
            MacvlanMode::Bridge => "bridge",
            MacvlanMode::Vepa => "vepa",
        }
    }
}

impl std::fmt::Display for MacvlanMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Topology {
    /// An empty topology. Fails, saying what is missing, when this process may not
    /// create network namespaces (root or CAP_SYS_ADMIN and CAP_NET_ADMIN are needed).
    pub fn new() -> Result<Topology, TopologyError> {
        command::check_ip_present()?;
        let n = CREATED.fetch_add(1, Ordering::Relaxed);
        Ok(Topology {
            run: format!("{PREFIX}{}-{n}", std::process::id()),
            restorations: restore::Journal::new(&format!("{PREFIX}{}-{n}", std::process::id())),
            namespaces: Vec::new(),
            macvlans: 0,
        })
    }

    /// The start of every name this topology gives (`sfclab-<pid>-<n>`).
    pub fn run_name(&self) -> &str {
        &self.run
    }

    /// A new network namespace for `role` (`tester`, `dut`, `nf1`), with IPv6 off so the
    /// kernel sends nothing of its own (router solicitations, MLD) onto the run's links,
    /// and its loopback up.
    pub fn namespace(&mut self, role: &str) -> Result<Namespace, TopologyError> {
        let name = format!("{}-{role}", self.run);
        command::ip(&["netns", "add", &name]).map_err(TopologyError::needs_privilege)?;
        register(&name);
        let ns = Namespace::new(name);
        self.namespaces.push(ns.clone());
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
        command::ip(&["-n", ns.name(), "link", "set", "dev", "lo", "up"])?;
        Ok(ns)
    }

    /// A veth pair from `a` in its namespace to `b` in its own, both up. Interface names
    /// are at most 15 bytes (the kernel's limit).
    pub fn veth(
        &mut self,
        a: (&Namespace, &str),
        b: (&Namespace, &str),
    ) -> Result<(Interface, Interface), TopologyError> {
        self.veth_with_queues(a, b, 1)
    }

    /// A veth pair with `queues` receive and transmit queues on each end: a frame sent on
    /// transmit queue k of one end arrives on receive queue k of the other (veth's own
    /// steering), so sockets on different queues see different frames.
    pub fn veth_with_queues(
        &mut self,
        a: (&Namespace, &str),
        b: (&Namespace, &str),
        queues: u32,
    ) -> Result<(Interface, Interface), TopologyError> {
        for name in [a.1, b.1] {
            check_interface_name(name)?;
        }
        let q = queues.max(1).to_string();
        command::ip(&[
            "-n",
            a.0.name(),
            "link",
            "add",
            "name",
            a.1,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b.1,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            b.0.name(),
        ])?;
        let (ia, ib) = (Interface::new(a.0.clone(), a.1), Interface::new(b.0.clone(), b.1));
        ia.set_up()?;
        ib.set_up()?;
        Ok((ia, ib))
    }

    /// A macvlan on `parent` (an interface of namespace `parent.0`) in `mode`, with
    /// address `mac`, moved into namespace `into.0` under the name `into.1`, up: a
    /// "virtual function" of an emulated NIC whose switch is the parent's macvlan port.
    pub fn macvlan(
        &mut self,
        parent: (&Namespace, &str),
        mode: MacvlanMode,
        mac: [u8; 6],
        into: (&Namespace, &str),
    ) -> Result<Interface, TopologyError> {
        check_interface_name(into.1)?;
        // A temporary name unique in the parent's namespace, renamed in its own.
        let n = self.macvlans;
        self.macvlans += 1;
        let temporary = format!("mv{n}");
        let address = mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        command::ip(&[
            "-n",
            parent.0.name(),
            "link",
            "add",
            &temporary,
            "link",
            parent.1,
            "address",
            &address,
            "type",
            "macvlan",
            "mode",
            mode.name(),
        ])?;
        command::ip(&["-n", parent.0.name(), "link", "set", &temporary, "netns", into.0.name()])?;
        command::ip(&["-n", into.0.name(), "link", "set", &temporary, "name", into.1])?;
        let interface = Interface::new(into.0.clone(), into.1);
        interface.set_up()?;
        Ok(interface)
    }

    /// Moves `interface`, an interface of the machine (of the namespace sfclab runs in),
    /// into namespace `into.0` as `into.1`, up; at teardown (or `sfclab cleanup`) it goes
    /// back under its own name and address.
    pub fn take_interface(&mut self, interface: &str, into: (&Namespace, &str)) -> Result<Interface, TopologyError> {
        check_interface_name(into.1)?;
        let mac = sriov::Sysfs::default()
            .address_of(interface)
            .ok_or_else(|| TopologyError::Command {
                command: format!("read the address of {interface}"),
                reason: "no such interface on this machine".into(),
            })?;
        command::ip(&["link", "set", "dev", interface, "down"])?;
        command::ip(&["link", "set", "dev", interface, "netns", into.0.name()])?;
        self.restorations.record(restore::Restoration::Taken {
            namespace: into.0.name().to_string(),
            name: interface.to_string(),
            original: interface.to_string(),
            mac,
        })?;
        if into.1 != interface {
            command::ip(&["-n", into.0.name(), "link", "set", "dev", interface, "name", into.1])?;
            self.restorations.renamed(into.0.name(), interface, into.1)?;
        }
        let taken = Interface::new(into.0.clone(), into.1);
        taken.set_up()?;
        Ok(taken)
    }

    /// Gives SR-IOV physical function `pf` `count` virtual functions (none before; the
    /// number it had comes back at teardown), and returns their interfaces' names.
    pub fn make_vfs(&mut self, sysfs: &sriov::Sysfs, pf: &str, count: u32) -> Result<Vec<String>, TopologyError> {
        let before = sysfs.num_vfs(pf)?;
        self.restorations.record(restore::Restoration::NumVfs {
            pf: pf.to_string(),
            vfs: before,
        })?;
        sysfs.set_num_vfs(pf, count)?;
        // The VF driver names the interfaces after the kernel made the functions.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match sysfs.vf_interfaces(pf, count) {
                Ok(names) => return Ok(names),
                Err(e) if std::time::Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
            }
        }
    }

    /// Moves VF `vf` (an interface in sfclab's namespace) into `into.0` as `into.1`, its
    /// address `mac` set through the physical function as the VF's administrator does
    /// (`ip link set PF vf K mac`), up. VFs are removed with the physical function's
    /// VFs at teardown: no restoration of their own.
    pub fn take_vf(
        &mut self,
        (pf, index): (&str, u32),
        vf: &str,
        mac: [u8; 6],
        into: (&Namespace, &str),
    ) -> Result<Interface, TopologyError> {
        check_interface_name(into.1)?;
        let address = mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        command::ip(&["link", "set", "dev", pf, "vf", &index.to_string(), "mac", &address])?;
        command::ip(&["link", "set", "dev", vf, "netns", into.0.name()])?;
        command::ip(&["-n", into.0.name(), "link", "set", "dev", vf, "name", into.1])?;
        let taken = Interface::new(into.0.clone(), into.1);
        taken.set_up()?;
        Ok(taken)
    }

    /// Puts back what the run changed outside its namespaces, then removes every
    /// namespace (and so every link and XDP program) this topology built, and kills any
    /// process still running inside one.
    /// Errors are collected, not stopped at: everything that can go, goes.
    pub fn tear_down(&mut self) -> Result<(), TopologyError> {
        let mut failures = self.restorations.undo();
        for ns in self.namespaces.drain(..).rev() {
            if let Err(e) = remove_namespace(ns.name()) {
                failures.push(e.to_string());
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(TopologyError::TearDown(failures))
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if let Err(e) = self.tear_down() {
            eprintln!("sfclab: {e}; `sfclab cleanup` removes what is left");
        }
    }
}

fn register(name: &str) {
    LIVE.lock().unwrap_or_else(|p| p.into_inner()).push(name.to_string());
}

/// Kills every process inside namespace `name` (a peer such as testpmd or trafgen, and
/// what it forked), never this one: left running, they would outlive their interfaces.
/// The processes killed.
fn stop_processes_in(name: &str) -> Vec<u32> {
    let own = std::process::id();
    let mut pids: Vec<u32> = command::ip(&["netns", "pids", name])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| p != own)
        .collect();
    // A killed run's own children outside the namespace that work on its files (an
    // `ovs-vsctl` waiting for the switch's database) go with it too.
    let state = namespace::state_dir_of(name);
    for pid in processes_naming(&state.to_string_lossy()) {
        if pid != own && !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    for &pid in &pids {
        if let Ok(pid) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
    // A killed process lingers until the kernel has torn it down (an OVS daemon for ~2 s
    // after its run was killed): return once every one is gone, or only a zombie left
    // for its parent to reap, so that nothing of the run is still running after cleanup.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|&p| still_running(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    pids
}

/// The processes whose command line holds `text`.
fn processes_naming(text: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(text))
        })
        .collect()
}

/// Whether process `pid` exists and is not a zombie (its state in /proc/PID/stat).
fn still_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

fn remove_namespace(name: &str) -> Result<(), TopologyError> {
    stop_processes_in(name);
    remove_state_dir(name);
    let result = command::ip(&["netns", "delete", name]);
    LIVE.lock().unwrap_or_else(|p| p.into_inner()).retain(|n| n != name);
    result.map(drop)
}

/// Files that processes inside namespace `name` kept (an OVS database, its sockets and
/// logs: [`Namespace::state_dir`]); they go with the namespace.
fn remove_state_dir(name: &str) {
    let _ = std::fs::remove_dir_all(namespace::state_dir_of(name));
}

/// Removes every namespace this process created and still holds: for a panic hook or a
/// signal handler, where no destructor will run.
pub fn tear_down_everything() {
    restore::undo_all_of(std::process::id());
    let names = std::mem::take(&mut *LIVE.lock().unwrap_or_else(|p| p.into_inner()));
    for name in names {
        stop_processes_in(&name);
        remove_state_dir(&name);
        let _ = command::ip(&["netns", "delete", &name]);
    }
}

/// True when this process runs as root (effective uid 0), which namespaces, BPF and raw
/// sockets need here.
pub fn running_as_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// For tests that need root (marked `#[ignore = "needs root ..."]`, which CI runs as
/// root): fails at once, saying why, when asked to run without it.
pub fn require_root(needs: &str) {
    assert!(
        running_as_root(),
        "this test needs root for {needs}: run it as root (CI does), or leave it ignored"
    );
}

/// What [`cleanup`] found and did.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct Cleanup {
    /// Namespaces removed.
    pub removed: Vec<String>,
    /// Runs whose changes outside their namespaces (interfaces taken, SR-IOV VFs made)
    /// were put back.
    pub restored: Vec<String>,
    /// Namespaces of processes still running, left alone.
    pub in_use: Vec<String>,
    /// Namespaces that could not be removed, with the reason.
    pub failed: Vec<(String, String)>,
}

/// Removes the namespaces (with their links and XDP programs, and killing the processes
/// left inside them: a peer the run started) of sfclab runs whose process is gone, as
/// after `kill -9`; with `all`, of running ones too.
pub fn cleanup(all: bool) -> Result<Cleanup, TopologyError> {
    command::check_ip_present()?;
    let mut report = Cleanup::default();
    let alive = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    for (journal, failures) in restore::undo_left_over(|pid| all || !alive(pid)) {
        match failures.is_empty() {
            true => report.restored.push(journal),
            false => report.failed.push((journal, failures.join("; "))),
        }
    }
    for name in sfclab_namespaces()? {
        let alive = owner_pid(&name).is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if alive && !all {
            report.in_use.push(name);
            continue;
        }
        match remove_namespace(&name) {
            Ok(()) => report.removed.push(name),
            Err(e) => report.failed.push((name, e.to_string())),
        }
    }
    // DPDK's runtime directories of the peers a run started in its namespaces
    // (`--file-prefix sfclab-<pid>-...`): removed once those processes
    // went with the namespaces.
    if let Ok(dirs) = std::fs::read_dir("/var/run/dpdk") {
        for d in dirs.flatten() {
            let name = d.file_name().to_string_lossy().into_owned();
            let dead = owner_pid(&name).is_some_and(|pid| all || !alive(pid));
            if dead && std::fs::remove_dir_all(d.path()).is_ok() {
                report.removed.push(format!("/var/run/dpdk/{name}"));
            }
        }
    }
    Ok(report)
}

/// Every namespace on the machine whose name sfclab gave.
pub fn sfclab_namespaces() -> Result<Vec<String>, TopologyError> {
    let listing = command::ip(&["netns", "list"])?;
    Ok(listing
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
        .map(str::to_string)
        .collect())
}

/// The pid in `sfclab-<pid>-...`.
fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_is_read_from_the_name() {
        assert_eq!(owner_pid("sfclab-4242-0-tester"), Some(4242));
        assert_eq!(owner_pid("sfclab-x-0-tester"), None);
        assert_eq!(owner_pid("other-4242"), None);
    }
}
