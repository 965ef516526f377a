//! Open vSwitch as a chaining technology (`chaining: ovs`): a private `ovsdb-server` and
//! `ovs-vswitchd` started inside a namespace of the run, with their database, sockets
//! and logs in the namespace's state directory, bridges on the userspace `netdev`
//! datapath (no kernel module needed) whose ports are AF_XDP (`afxdp`) or raw-socket
//! (`system`) ports on veth ends, and one flow per bridge that forwards as a forwarder
//! does (MACs rewritten, out of the other port).
//!
//! The daemons are children of this process and are stopped when the switch is dropped;
//! they also die with their namespace (removing a namespace kills what runs inside it),
//! so a killed run leaves nothing behind once `sfclab cleanup` ran.

use crate::command::{self, TopologyError};
use crate::namespace::Namespace;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How a bridge's ports do their I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OvsPort {
    /// `type=afxdp`: AF_XDP sockets polled by OVS's PMD threads.
    AfXdp,
    /// `type=system`: the netdev datapath's raw-socket ports.
    System,
}

impl OvsPort {
    fn type_name(self) -> &'static str {
        match self {
            OvsPort::AfXdp => "afxdp",
            OvsPort::System => "system",
        }
    }
}

/// A running Open vSwitch of one run.
pub struct OvsSwitch {
    namespace: Namespace,
    dir: PathBuf,
    // Dropped in this order: the switch before its database.
    vswitchd: Daemon,
    ovsdb: Daemon,
    version: String,
}

/// A daemon this process started; asked to exit (then killed) when dropped.
struct Daemon {
    child: Child,
    /// Its `--unixctl` socket.
    control: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = command::run("ovs-appctl", &["-t", &self.control.display().to_string(), "exit"]);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Whether Open vSwitch's daemon is installed here.
pub fn installed() -> bool {
    Command::new("ovs-vswitchd")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Where the programs are, and a clear error when they are not.
/// Its `--version` line.
fn find(program: &str) -> Result<String, TopologyError> {
    match Command::new(program).arg("--version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()),
        _ => Err(TopologyError::Command {
            command: program.to_string(),
            reason: "Open vSwitch is not installed (Debian: apt-get install openvswitch-switch)".into(),
        }),
    }
}

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

impl OvsSwitch {
    /// Starts `ovsdb-server` and `ovs-vswitchd` inside `namespace`, the PMD threads on
    /// `pmd_core` (all cores when `None`). Waits until the switch answers.
    pub fn start(namespace: &Namespace, pmd_core: Option<usize>) -> Result<OvsSwitch, TopologyError> {
        for p in ["ovsdb-server", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ovsdb-tool"] {
            find(p)?;
        }
        let version = find("ovs-vswitchd")?;
        let dir = namespace.state_dir()?;
        let path = |f: &str| dir.join(f).display().to_string();
        command::run("ovsdb-tool", &["create", &path("conf.db"), SCHEMA])?;
        let spawn = |args: &[String]| -> Result<Child, TopologyError> {
            let mut all = vec!["netns".to_string(), "exec".to_string(), namespace.name().to_string()];
            all.extend_from_slice(args);
            Command::new("ip")
                .args(&all)
                .env("OVS_RUNDIR", &dir)
                .env("OVS_LOGDIR", &dir)
                .env("OVS_DBDIR", &dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| TopologyError::Command {
                    command: format!("ip {}", all.join(" ")),
                    reason: e.to_string(),
                })
        };
        let ovsdb = spawn(&[
            "ovsdb-server".into(),
            path("conf.db"),
            format!("--remote=punix:{}", path("db.sock")),
            format!("--unixctl={}", path("ovsdb.ctl")),
            format!("--log-file={}", path("ovsdb.log")),
            "--no-chdir".into(),
        ])?;
        // Stopped again if anything below fails (the namespace's removal would too).
        let ovsdb = Daemon {
            child: ovsdb,
            control: dir.join("ovsdb.ctl"),
        };
        wait_for(&dir.join("db.sock"), "ovsdb-server", &dir.join("ovsdb.log"))?;
        let db = format!("--db=unix:{}", path("db.sock"));
        command::run("ovs-vsctl", &[&db, "--no-wait", "init"])?;
        let mut other = vec![
            db.clone(),
            "--no-wait".to_string(),
            "set".into(),
            "Open_vSwitch".into(),
            ".".into(),
            "other_config:n-handler-threads=1".into(),
            "other_config:n-revalidator-threads=1".into(),
        ];
        if let Some(core) = pmd_core {
            other.push(format!("other_config:pmd-cpu-mask={:x}", 1u128 << core.min(127)));
        }
        command::run("ovs-vsctl", &other.iter().map(String::as_str).collect::<Vec<_>>())?;
        let vswitchd = Daemon {
            child: spawn(&[
                "ovs-vswitchd".into(),
                format!("unix:{}", path("db.sock")),
                format!("--unixctl={}", path("vswitchd.ctl")),
                format!("--log-file={}", path("vswitchd.log")),
                "--no-chdir".into(),
            ])?,
            control: dir.join("vswitchd.ctl"),
        };
        wait_for(&dir.join("vswitchd.ctl"), "ovs-vswitchd", &dir.join("vswitchd.log"))?;
        Ok(OvsSwitch {
            namespace: namespace.clone(),
            dir,
            vswitchd,
            ovsdb,
            version,
        })
    }

    /// `ovs-vswitchd (Open vSwitch) 3.1.0`.
    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The daemons, as `program (pid N)`, for reports.
    pub fn processes(&self) -> Vec<String> {
        vec![
            format!("ovsdb-server (pid {})", self.ovsdb.child.id()),
            format!("ovs-vswitchd (pid {})", self.vswitchd.child.id()),
        ]
    }

    fn db(&self) -> String {
        format!("--db=unix:{}", self.dir.join("db.sock").display())
    }

    /// `ovs-vsctl ARGS` against this switch's database.
    pub fn vsctl(&self, args: &[&str]) -> Result<String, TopologyError> {
        let db = self.db();
        let mut all = vec![db.as_str(), "--timeout=20"];
        all.extend_from_slice(args);
        command::run("ovs-vsctl", &all)
    }

    /// `ovs-ofctl ARGS` with the bridge given as its management socket.
    pub fn ofctl(&self, command_name: &str, bridge: &str, rest: &[&str]) -> Result<String, TopologyError> {
        let socket = format!("unix:{}", self.dir.join(format!("{bridge}.mgmt")).display());
        let mut all = vec![command_name, socket.as_str()];
        all.extend_from_slice(rest);
        command::run("ovs-ofctl", &all)
    }

    /// `ovs-appctl ARGS` to `ovs-vswitchd`.
    pub fn appctl(&self, args: &[&str]) -> Result<String, TopologyError> {
        let target = self.dir.join("vswitchd.ctl").display().to_string();
        let mut all = vec!["-t", target.as_str()];
        all.extend_from_slice(args);
        command::run("ovs-appctl", &all)
    }

    /// A bridge on the userspace datapath between `input` and `output` (interfaces of
    /// the switch's namespace) that forwards what arrives on `input` out of `output`,
    /// its source MAC set to `output`'s and its destination to `next_mac`, and drops the
    /// rest (no learning, no flooding).
    pub fn forwarding_bridge(
        &self,
        bridge: &str,
        input: &str,
        output: &str,
        kind: OvsPort,
        next_mac: &str,
    ) -> Result<(), TopologyError> {
        self.bridge(bridge, &[input, output], kind)?;
        // sysfs as `ip netns exec` mounts it: the namespace's own interfaces.
        let out_mac = self
            .namespace
            .exec("cat", &[&format!("/sys/class/net/{output}/address")])?
            .trim()
            .to_string();
        let flow = format!("in_port={input},actions=mod_dl_src:{out_mac},mod_dl_dst:{next_mac},output:{output}");
        self.ofctl("add-flow", bridge, &[&flow]).map(drop)
    }

    /// A bridge on the userspace datapath with `ports` (interfaces of the switch's
    /// namespace) and no flows: it drops everything (`fail_mode=secure`: no learning, no
    /// flooding) until flows are added (`ofctl("add-flow", ...)`). Returns once every
    /// port is up in the datapath.
    pub fn bridge(&self, bridge: &str, ports: &[&str], kind: OvsPort) -> Result<(), TopologyError> {
        let port_type = format!("type={}", kind.type_name());
        let mut args = vec![
            "add-br",
            bridge,
            "--",
            "set",
            "bridge",
            bridge,
            "datapath_type=netdev",
            "fail_mode=secure",
        ];
        for port in ports {
            args.extend([
                "--",
                "add-port",
                bridge,
                port,
                "--",
                "set",
                "interface",
                port,
                &port_type,
            ]);
        }
        self.vsctl(&args)?;
        wait_for(
            &self.dir.join(format!("{bridge}.mgmt")),
            "the bridge's OpenFlow socket",
            &self.dir.join("vswitchd.log"),
        )?;
        self.ofctl("del-flows", bridge, &[])?;
        for iface in ports {
            let state = self.vsctl(&["get", "interface", iface, "error"])?;
            if !state.trim().is_empty() && state.trim() != "[]" {
                return Err(TopologyError::Command {
                    command: format!("ovs-vsctl add-port {bridge} {iface} ({})", kind.type_name()),
                    reason: state.trim().to_string(),
                });
            }
        }
        Ok(())
    }

    /// How the datapath's ports do their I/O, from `dpctl/show`, grouped: `4 afxdp
    /// (xdp-mode-in-use=native)`.
    pub fn port_modes(&self) -> Result<Vec<String>, TopologyError> {
        let show = self.appctl(&["dpctl/show"])?;
        let mut groups: BTreeMap<String, usize> = BTreeMap::new();
        for port in show.lines().filter_map(|l| l.trim().strip_prefix("port ")) {
            // `1: s1-in (afxdp: n_rxq=1, ..., xdp-mode-in-use=native)`
            let Some((_, rest)) = port.split_once(" (") else {
                continue;
            };
            let rest = rest.trim_end_matches(')');
            let (kind, options) = rest.split_once(':').unwrap_or((rest, ""));
            if kind == "tap" {
                continue; // the bridges' own internal ports
            }
            let mode: Vec<&str> = options
                .split(',')
                .map(str::trim)
                .filter(|o| o.starts_with("xdp-mode-in-use"))
                .collect();
            let key = if mode.is_empty() {
                kind.to_string()
            } else {
                format!("{kind} ({})", mode.join(", "))
            };
            *groups.entry(key).or_default() += 1;
        }
        Ok(groups.into_iter().map(|(k, n)| format!("{n} {k}")).collect())
    }

    /// The datapath's counters now: lookups `hit`, `missed`, `lost` (`dpctl/show`), and
    /// each interface's drop counters (`statistics` of the Interface table, non-zero
    /// ones, as `<iface> <counter>`).
    pub fn counters(&self) -> Result<BTreeMap<String, u64>, TopologyError> {
        let mut all = BTreeMap::new();
        let show = self.appctl(&["dpctl/show"])?;
        if let Some(lookups) = show.lines().find_map(|l| l.trim().strip_prefix("lookups:")) {
            for part in lookups.split_whitespace() {
                if let Some((k, v)) = part.split_once(':')
                    && let Ok(v) = v.parse()
                {
                    all.insert(format!("datapath {k}"), v);
                }
            }
        }
        let listing = self.vsctl(&[
            "--format=csv",
            "--data=bare",
            "--no-headings",
            "--columns=name,statistics",
            "list",
            "interface",
        ])?;
        for line in listing.lines() {
            let Some((name, stats)) = line.split_once(',') else {
                continue;
            };
            for pair in stats.trim_matches('"').split_whitespace() {
                if let Some((k, v)) = pair.split_once('=')
                    && (k.contains("drop") || k.contains("error"))
                    && let Ok(v) = v.parse()
                {
                    all.insert(format!("{name} {k}"), v);
                }
            }
        }
        Ok(all)
    }
}

/// Waits up to 10 s for `path` (a socket the daemon creates when it is ready).
fn wait_for(path: &Path, what: &str, log: &Path) -> Result<(), TopologyError> {
    let started = Instant::now();
    while !path.exists() {
        if started.elapsed() > Duration::from_secs(10) {
            let tail: String = std::fs::read_to_string(log)
                .unwrap_or_default()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ");
            return Err(TopologyError::Command {
                command: what.to_string(),
                reason: format!("did not come up within 10 s ({}: {tail})", log.display()),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
