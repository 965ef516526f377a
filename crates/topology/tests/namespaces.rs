//! Namespaces and veth pairs built, used and always removed (needs root: CI is root;
//! elsewhere each test says it is skipped, and why).

use sfclab_topology::{Topology, cleanup, sfclab_namespaces};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn listed(name: &str) -> bool {
    sfclab_namespaces().unwrap().iter().any(|n| n == name)
}

#[test]
#[ignore = "needs root for network namespaces (CI runs it)"]
fn a_veth_pair_joins_two_namespaces_and_everything_goes_with_the_topology() {
    sfclab_topology::require_root("network namespaces");
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("left").unwrap();
    let b = topo.namespace("right").unwrap();
    let (ia, ib) = topo.veth((&a, "veth-l"), (&b, "veth-r")).unwrap();
    ia.add_address("10.99.0.1/24").unwrap();
    ib.add_address("10.99.0.2/24").unwrap();
    let before = ib.counters().unwrap();
    // Three datagrams from `left` to `right`, over the pair (sockets opened inside each).
    let receiver = b.run(|| std::net::UdpSocket::bind("10.99.0.2:9999")).unwrap().unwrap();
    receiver.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let sender = a.run(|| std::net::UdpSocket::bind("10.99.0.1:0")).unwrap().unwrap();
    for i in 0..3u8 {
        sender.send_to(&[i; 32], "10.99.0.2:9999").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(receiver.recv(&mut buf).unwrap(), 32);
        assert_eq!(buf[0], i);
    }
    let after = ib.counters().unwrap();
    // The 3 datagrams and an ARP request crossed into `right`.
    assert!(after.since(&before).rx_packets >= 4, "{:?}", after.since(&before));
    assert_eq!(after.address.len(), 17);
    assert!(a.interfaces().unwrap().contains(&"veth-l".to_string()));
    // IPv6 is off, so the kernel puts nothing of its own on the links.
    let v6 = a
        .run(|| std::fs::read_to_string("/proc/sys/net/ipv6/conf/veth-l/disable_ipv6"))
        .unwrap();
    assert!(v6.map(|s| s.trim() == "1").unwrap_or(true));

    let names = [a.name().to_string(), b.name().to_string()];
    assert!(names.iter().all(|n| listed(n)));
    drop(topo);
    assert!(names.iter().all(|n| !listed(n)), "namespaces left behind: {names:?}");
}

#[test]
#[ignore = "needs root for network namespaces (CI runs it)"]
fn a_bad_interface_name_is_refused_before_the_kernel_sees_it() {
    sfclab_topology::require_root("network namespaces");
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("a").unwrap();
    let b = topo.namespace("b").unwrap();
    let e = topo.veth((&a, "a-name-longer-than-15"), (&b, "ok")).unwrap_err();
    assert!(e.to_string().contains("15 bytes"), "{e}");
    let e = topo.veth((&a, "x"), (&b, "bad/name")).unwrap_err();
    assert!(e.to_string().contains("bad/name"), "{e}");
}

/// Not a test of its own: run by `cleanup_removes_what_a_killed_run_left` as a child
/// process that builds a topology, says its names, and waits to be killed.
#[test]
fn killed_run_helper() {
    if std::env::var_os("SFCLAB_TOPOLOGY_HELPER").is_none() {
        return;
    }
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("killed-a").unwrap();
    let b = topo.namespace("killed-b").unwrap();
    topo.veth((&a, "k0"), (&b, "k1")).unwrap();
    println!("BUILT {} {}", a.name(), b.name());
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
#[ignore = "needs root for network namespaces (CI runs it)"]
fn cleanup_removes_what_a_killed_run_left() {
    sfclab_topology::require_root("network namespaces");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "killed_run_helper", "--nocapture", "--test-threads", "1"])
        .env("SFCLAB_TOPOLOGY_HELPER", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let prefix = format!("sfclab-{pid}-");
    // The helper prints once everything is built (libtest's own lines come first).
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let built = lines.by_ref().map_while(Result::ok).find(|l| l.contains("BUILT"));
    assert!(built.is_some(), "the helper built nothing");
    assert_eq!(
        sfclab_namespaces()
            .unwrap()
            .iter()
            .filter(|n| n.starts_with(&prefix))
            .count(),
        2
    );
    // A running owner's namespaces are left alone.
    let report = cleanup(false).unwrap();
    assert!(report.in_use.iter().any(|n| n.starts_with(&prefix)), "{report:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    let report = cleanup(false).unwrap();
    let removed: Vec<_> = report.removed.iter().filter(|n| n.starts_with(&prefix)).collect();
    assert_eq!(removed.len(), 2, "{report:?}");
    assert!(sfclab_namespaces().unwrap().iter().all(|n| !n.starts_with(&prefix)));
}

/// A process left running inside a namespace (a peer that did not stop, and what it
/// forked) is killed when the topology goes: it would outlive its interfaces otherwise.
#[test]
#[ignore = "needs root for network namespaces (CI runs it)"]
fn processes_left_in_a_namespace_are_stopped_with_it() {
    sfclab_topology::require_root("network namespaces");
    let mut topo = Topology::new().unwrap();
    let ns = topo.namespace("peer").unwrap();
    // A shell that forks a sleeper and then sleeps itself: two processes inside.
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sh", "-c", "sleep 600 & exec sleep 601"])
        .spawn()
        .unwrap();
    let pids_inside = || {
        let out = Command::new("ip").args(["netns", "pids", ns.name()]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().count()
    };
    let started = std::time::Instant::now();
    while pids_inside() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the sleepers did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let forked: Vec<String> = {
        let out = Command::new("ip").args(["netns", "pids", ns.name()]).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    drop(topo);
    let dropped = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if dropped.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("the process inside the namespace is still running");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(!status.success(), "the process inside was killed");
    // SIGKILL is delivered asynchronously: give each a moment to end (or be a zombie
    // waiting for its new parent to reap it).
    let alive = |pid: &str| {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    };
    for pid in forked {
        let killed = std::time::Instant::now();
        while alive(&pid) && killed.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(&pid), "process {pid} outlived its namespace");
    }
}

/// Deletes the test's stand-in for a machine's port however the test ends.
struct DummyPort(String);

impl Drop for DummyPort {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "delete", &self.0]).output();
    }
}

fn address_of(interface: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{interface}/address"))
        .ok()
        .map(|a| a.trim().to_string())
}

/// A machine's interface (an SR-IOV tester port; here an ifb device standing for one) taken
/// into a run's namespace under another name comes back as it was (ifb keeps its
/// address: a NIC's, changed, is put back by the same journal line).
#[test]
#[ignore = "needs root for network namespaces and moving interfaces (CI runs it)"]
fn a_taken_interface_goes_back_under_its_name_and_address() {
    sfclab_topology::require_root("network namespaces and moving interfaces");
    let port = DummyPort(format!("sfcd{}", std::process::id() % 100_000));
    // ifb: a virtual device that, as a NIC's port does, may change namespace.
    let made = Command::new("ip")
        .args(["link", "add", &port.0, "type", "ifb"])
        .output()
        .unwrap();
    if !made.status.success() {
        eprintln!(
            "SKIPPED: no ifb device to stand for a machine's port ({})",
            String::from_utf8_lossy(&made.stderr).trim()
        );
        return;
    }
    let mac = address_of(&port.0).unwrap();

    let mut topo = Topology::new().unwrap();
    let tester = topo.namespace("tester").unwrap();
    topo.take_interface(&port.0, (&tester, "t-in")).unwrap();
    assert!(tester.interfaces().unwrap().contains(&"t-in".to_string()));
    assert_eq!(
        address_of(&port.0),
        None,
        "gone from the machine's namespace while taken"
    );
    let journal = std::env::temp_dir().join(format!("{}.restore", topo.run_name()));
    let written = std::fs::read_to_string(&journal).unwrap();
    assert!(written.contains(&format!("t-in {} {mac}", port.0)), "{written}");

    drop(topo);
    assert_eq!(address_of(&port.0), Some(mac), "back under its name, with its address");
    assert!(!journal.exists(), "the journal goes once everything is back");
    assert!(!listed(tester.name()));
}
