//! A network namespace of a run and the interfaces in it.

use crate::command::{self, TopologyError};
use crate::counters::LinkCounters;
use nix::sched::CloneFlags;
use std::fs::File;

/// A network namespace a [`crate::Topology`] created (it removes it; this is a handle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    pub(crate) fn new(name: String) -> Namespace {
        Namespace { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A directory for the files of processes run inside this namespace (created on
    /// first use; removed with the namespace, also by `sfclab cleanup`).
    pub fn state_dir(&self) -> Result<std::path::PathBuf, TopologyError> {
        let dir = state_dir_of(&self.name);
        std::fs::create_dir_all(&dir).map_err(|e| TopologyError::Command {
            command: format!("mkdir {}", dir.display()),
            reason: e.to_string(),
        })?;
        Ok(dir)
    }

    /// Runs `f` on a thread inside this namespace and returns its result. Sockets opened
    /// and interfaces named there are this namespace's, and stay so when the socket is
    /// then used from any other thread: open AF_XDP and AF_PACKET ports here.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, TopologyError> {
        let enter = |e: String| TopologyError::Enter(self.name.clone(), e);
        let file = File::open(format!("/run/netns/{}", self.name)).map_err(|e| enter(e.to_string()))?;
        std::thread::scope(|s| {
            s.spawn(|| {
                // setns changes only the calling thread: the rest of the process stays where it was.
                nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| enter(e.to_string()))?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Runs `program ARGS` inside this namespace (`ip netns exec`); its standard output.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<String, TopologyError> {
        let mut all = vec!["netns", "exec", &self.name, program];
        all.extend_from_slice(args);
        command::ip(&all)
    }

    /// Sets a `net.*` sysctl of this namespace (`net.ipv4.ip_forward`, `1`). A key the
    /// kernel does not have (IPv6 compiled out) is not an error when switching it off.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), TopologyError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let written = self.run(|| std::fs::write(&path, value))?;
        match written {
            Ok(()) => Ok(()),
            // IPv6 compiled out or disabled at boot: already what was asked.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && key.ends_with("disable_ipv6") => Ok(()),
            Err(e) => Err(TopologyError::Command {
                command: format!("sysctl -w {key}={value} in {}", self.name),
                reason: e.to_string(),
            }),
        }
    }

    /// Every interface in the namespace, by name.
    pub fn interfaces(&self) -> Result<Vec<String>, TopologyError> {
        let json = command::ip(&["-n", &self.name, "-j", "link", "show"])?;
        let links: Vec<serde_json::Value> =
            serde_json::from_str(&json).map_err(|e| TopologyError::Counters(self.name.clone(), e.to_string()))?;
        Ok(links
            .iter()
            .filter_map(|l| l["ifname"].as_str().map(str::to_string))
            .collect())
    }
}

/// An interface inside a run's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    namespace: Namespace,
    name: String,
}

impl Interface {
    pub(crate) fn new(namespace: Namespace, name: &str) -> Interface {
        Interface {
            namespace,
            name: name.to_string(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    pub(crate) fn set_up(&self) -> Result<(), TopologyError> {
        command::ip(&["-n", self.namespace.name(), "link", "set", "dev", &self.name, "up"]).map(drop)
    }

    /// Adds an address (`10.0.1.1/24`) to the interface.
    pub fn add_address(&self, cidr: &str) -> Result<(), TopologyError> {
        command::ip(&["-n", self.namespace.name(), "addr", "add", cidr, "dev", &self.name]).map(drop)
    }

    /// Runs `ip -n NS ARGS...` (routes, neighbours, link settings) for this interface's namespace.
    pub fn ip(&self, args: &[&str]) -> Result<String, TopologyError> {
        let mut all = vec!["-n", self.namespace.name()];
        all.extend_from_slice(args);
        command::ip(&all)
    }

    /// The interface's counters and identity as the kernel reports them now.
    pub fn counters(&self) -> Result<LinkCounters, TopologyError> {
        let json = command::ip(&[
            "-n",
            self.namespace.name(),
            "-s",
            "-j",
            "link",
            "show",
            "dev",
            &self.name,
        ])?;
        LinkCounters::from_ip_json(&json)
            .map_err(|e| TopologyError::Counters(format!("{} in {}", self.name, self.namespace.name()), e))
    }
}

/// Where [`Namespace::state_dir`] keeps namespace `name`'s files.
pub(crate) fn state_dir_of(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{name}.d"))
}
