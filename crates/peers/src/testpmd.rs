//! DPDK's testpmd as a peer: start processes with given lcores and virtual devices,
//! let them forward, stop them with SIGINT and read their per-port Rx-pps samples.
//!
//! testpmd without `-i` exits when its stdin reaches EOF, so stdin stays piped open.
//! It runs under `stdbuf -oL` so that its statistics arrive as they are printed: a
//! benchmark can wait until a process really forwards (start-up takes seconds, and far
//! longer when its core is shared with busy pollers). A [`Testpmd`] dropped before
//! [`Testpmd::stop`] kills its process, so a failed benchmark leaves nothing running
//! (memif sockets are abstract: no files to remove).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One testpmd process to start.
#[derive(Debug, Clone)]
pub struct TestpmdSpec {
    /// The lcore that runs the forwarding loop.
    pub forward_core: usize,
    /// The main lcore (prints statistics, sleeps otherwise).
    pub main_core: usize,
    /// `--vdev` arguments, e.g. `net_memif0,role=server,socket=/x`.
    pub vdevs: Vec<String>,
    /// `--forward-mode`: `mac`, `io`, ...
    pub mode: &'static str,
    /// Send a first burst on every port when forwarding starts.
    pub tx_first: bool,
    /// `--record-core-cycles`: the forwarding core's TSC cycles over the bursts that
    /// received something ([`Stopped::busy_cycles`]). It reads the TSC twice a burst,
    /// so it is left off where only throughput counts.
    pub record_core_cycles: bool,
    /// `--single-file-segments`: one memory file per list, which `net_memif`'s
    /// `zero-copy=yes` client hands its server as regions.
    pub single_file_segments: bool,
    /// The network namespace to run in (`ip netns exec`), for vdevs on its interfaces.
    pub netns: Option<String>,
}

impl TestpmdSpec {
    /// The arguments after the binary. Unique `--file-prefix` per process: several run at once.
    pub fn args(&self, prefix: &str) -> Vec<String> {
        let mut args = vec![
            "-l".to_string(),
            format!(
                "{},{}",
                self.main_core.min(self.forward_core),
                self.main_core.max(self.forward_core)
            ),
            "--main-lcore".into(),
            self.main_core.to_string(),
            "--no-huge".into(),
            "-m".into(),
            "1024".into(),
            "--no-pci".into(),
        ];
        if self.single_file_segments {
            args.push("--single-file-segments".into());
        }
        args.extend(self.vdevs.iter().map(|v| format!("--vdev={v}")));
        args.extend(
            [
                "--file-prefix",
                prefix,
                "--log-level",
                "error",
                "--",
                &format!("--forward-mode={}", self.mode),
                "--stats-period=1",
            ]
            .map(String::from),
        );
        if self.tx_first {
            args.push("--tx-first".into());
        }
        if self.record_core_cycles {
            args.push("--record-core-cycles".into());
        }
        args
    }
}

/// A running testpmd.
pub struct Testpmd {
    child: Option<Child>,
    reader: Option<JoinHandle<()>>,
    /// What it printed so far, line by line.
    lines: Arc<Mutex<Vec<String>>>,
    pub command: String,
    /// Its `--file-prefix`: names the runtime directory removed when it ends.
    prefix: String,
}

impl Testpmd {
    pub fn start(bin: &str, spec: &TestpmdSpec, prefix: &str) -> Result<Testpmd, String> {
        let args = spec.args(prefix);
        let command = format!("{bin} {}", args.join(" "));
        let mut launcher = match &spec.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]);
                c
            }
            None => Command::new("env"),
        };
        // `ip netns exec`, `env` and `stdbuf` each exec the next: the child's pid is testpmd's.
        match crate::which("stdbuf") {
            Some(stdbuf) => launcher.arg(stdbuf).arg("-oL").arg(bin),
            None => launcher.arg(bin),
        };
        let mut child = launcher
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {bin}: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().expect("reader").push(line);
            }
        });
        Ok(Testpmd {
            child: Some(child),
            reader: Some(reader),
            lines,
            command,
            prefix: prefix.to_string(),
        })
    }

    /// Statistics periods printed since forwarding started; `None` before it started.
    pub fn periods_forwarding(&self) -> Option<usize> {
        let lines = self.lines.lock().expect("reader");
        let start = forwarding_start(&lines)?;
        Some(lines[start..].iter().filter(|l| l.contains("Port statistics")).count())
    }

    /// Whether the process is still there.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stops forwarding (SIGINT lets testpmd close its ports and remove its runtime
    /// files; a process still there after 10 s is killed) and returns its Rx-pps samples
    /// from the moment forwarding started (all, if it never said so).
    pub fn stop(self) -> Vec<Vec<f64>> {
        self.stop_reading().samples
    }

    /// As [`Testpmd::stop`], with the forwarding core's cycles per packet where it
    /// recorded them.
    pub fn stop_reading(self) -> Stopped {
        self.interrupt();
        self.finish()
    }

    fn interrupt(&self) {
        if let Some(child) = &self.child
            && let Ok(pid) = i32::try_from(child.id())
        {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT);
        }
    }

    /// Waits for an interrupted process (killing it after 10 s) and reads its samples.
    fn finish(mut self) -> Stopped {
        if let Some(mut child) = self.child.take()
            && !wait_timeout(&mut child, Duration::from_secs(10))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
        remove_runtime_dir(&self.prefix);
        let lines = self.output();
        Stopped {
            samples: rx_pps_samples(&lines[forwarding_start(&lines).unwrap_or(0)..]),
            busy_cycles: busy_cycles(&lines),
        }
    }

    /// Everything it printed, once its stdout has closed.
    fn output(&mut self) -> Vec<String> {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        std::mem::take(&mut *self.lines.lock().expect("reader"))
    }
}

impl Drop for Testpmd {
    /// A process not stopped by [`Testpmd::stop`] (a failed benchmark) is killed.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            remove_runtime_dir(&self.prefix);
        }
    }
}

/// Removes the runtime directory a DPDK process with `--file-prefix prefix` leaves
/// (its config and memory-segment files: ~12 MB in RAM under /run each, which DPDK does
/// not remove even on a clean exit).
pub fn remove_runtime_dir(prefix: &str) {
    let mut roots = vec![
        std::path::PathBuf::from("/run/dpdk"),
        std::path::PathBuf::from("/var/run/dpdk"),
    ];
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        roots.push(std::path::PathBuf::from(x).join("dpdk"));
    }
    for root in roots {
        let _ = std::fs::remove_dir_all(root.join(prefix));
    }
}

/// Waits for a whole set to stop; see [`Testpmd::stop`]. All are signalled first, so
/// their last samples cover the same seconds.
pub fn stop_all(procs: Vec<Testpmd>) -> Vec<Vec<Vec<f64>>> {
    procs.iter().for_each(Testpmd::interrupt);
    procs.into_iter().map(|p| p.finish().samples).collect()
}

/// What a stopped testpmd said.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopped {
    /// Per statistics period since forwarding started, each port's Rx-pps.
    pub samples: Vec<Vec<f64>>,
    /// With `record_core_cycles`: the `total cycles=B` of its closing line `CPU
    /// cycles/packet=C (total cycles=B / total io packets=N)`: the forwarding core's TSC
    /// cycles over the bursts that received something (polls that found nothing are not
    /// counted, as in sfclab's busy cycles). Its `C` and `N` are not taken: `N` is the
    /// ports' counters since forwarding started, which a PMD that clears them when its
    /// peer leaves (net_memif) makes wrap below zero.
    pub busy_cycles: Option<u64>,
}

/// The last `total cycles=` figure testpmd printed (its accumulated statistics).
fn busy_cycles(lines: &[String]) -> Option<u64> {
    lines.iter().rev().find_map(|l| {
        let rest = l.split("CPU cycles/packet=").nth(1)?.split("total cycles=").nth(1)?;
        let figure: String = rest.chars().take_while(char::is_ascii_digit).collect();
        figure.parse().ok()
    })
}

/// Polls `procs` until `ready` holds for their [`Testpmd::periods_forwarding`]; an error
/// naming `what` when a process exits, `limit` passes or `stop` holds (Ctrl-C) first.
pub fn wait_until(
    procs: &mut [Testpmd],
    limit: Duration,
    what: &str,
    stop: &dyn Fn() -> bool,
    ready: impl Fn(&[Option<usize>]) -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        if stop() {
            return Err(format!("dpdk-testpmd: stopped by Ctrl-C while waiting for {what}"));
        }
        let periods: Vec<Option<usize>> = procs.iter().map(Testpmd::periods_forwarding).collect();
        if ready(&periods) {
            return Ok(());
        }
        if let Some(gone) = procs.iter_mut().position(|p| !p.running()) {
            return Err(format!("dpdk-testpmd exited early: {}", procs[gone].command));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "dpdk-testpmd: {what} within {} s (statistics periods so far: {periods:?})",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where forwarding started in testpmd's output.
fn forwarding_start(lines: &[String]) -> Option<usize> {
    lines.iter().position(|l| l.contains("start packet forwarding"))
}

fn wait_timeout(child: &mut Child, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// The periodic statistics testpmd printed: one entry per period, each the Rx-pps of
/// every port in port order.
pub fn rx_pps_samples(lines: &[String]) -> Vec<Vec<f64>> {
    let mut samples = Vec::new();
    let mut block: Option<Vec<f64>> = None;
    for line in lines {
        if line.contains("Port statistics") {
            samples.extend(block.take());
            block = Some(Vec::new());
        } else if let (Some(b), Some(rest)) = (block.as_mut(), line.trim().strip_prefix("Rx-pps:")) {
            b.push(
                rest.split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0),
            );
        }
    }
    samples.extend(block.filter(|b| !b.is_empty()));
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_forwarding_cores_busy_cycles_from_its_closing_statistics() {
        // As DPDK 22.11's testpmd prints it at the end with --record-core-cycles, behind
        // net_memif ports whose counters its peer's leaving cleared.
        let lines: Vec<String> = [
            "  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++",
            "  RX-packets: 186861376      RX-dropped: 0             RX-total: 186861376",
            "",
            "  CPU cycles/packet=0.00 (total cycles=7574059162 / total io packets=18446744073709549568) at 2600 MHz Clock",
            "",
            "Done.",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(busy_cycles(&lines), Some(7_574_059_162));
        assert_eq!(busy_cycles(&lines[..2]), None, "not recorded: none");
    }

    #[test]
    fn reads_every_ports_rx_pps_per_period() {
        let text = "Port statistics ====\n  ### NIC statistics for port 0 ###\n  Rx-pps:      4871391          Rx-bps:   2494152400\n  Tx-pps:            0\n  ### NIC statistics for port 1 ###\n  Rx-pps:         12          Rx-bps: 6\nPort statistics ====\n  Rx-pps:  15171964  Rx-bps: 1\n  Rx-pps:  7  Rx-bps: 1\n";
        let lines: Vec<String> = text.lines().map(String::from).collect();
        assert_eq!(
            rx_pps_samples(&lines),
            vec![vec![4871391.0, 12.0], vec![15171964.0, 7.0]]
        );
        assert!(rx_pps_samples(&["no statistics".to_string()]).is_empty());
    }

    #[test]
    fn arguments_name_both_lcores_and_every_device() {
        let spec = TestpmdSpec {
            netns: None,
            forward_core: 1,
            main_core: 0,
            vdevs: vec![
                "net_memif0,role=client,socket=/a".into(),
                "net_memif1,role=client,socket=/c".into(),
            ],
            mode: "mac",
            tx_first: true,
            record_core_cycles: false,
            single_file_segments: false,
        };
        let args = spec.args("p").join(" ");
        assert!(args.starts_with("-l 0,1 --main-lcore 0 --no-huge"), "{args}");
        assert!(args.contains("--vdev=net_memif0,role=client,socket=/a --vdev=net_memif1,role=client,socket=/c"));
        assert!(
            args.ends_with("-- --forward-mode=mac --stats-period=1 --tx-first"),
            "{args}"
        );
    }
}
