//! What the OS scheduler did with a process: CPU time, time spent waiting on a run
//! queue, and context switches, summed over its threads (`/proc/PID/task/*/schedstat`
//! and `status`).

use std::path::Path;

/// A process's scheduling counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SchedCounters {
    pub(super) cpu_ns: u64,
    pub(super) run_queue_ns: u64,
    /// Times a thread was put on a CPU.
    pub(super) timeslices: u64,
    pub(super) voluntary_switches: u64,
    pub(super) involuntary_switches: u64,
}

impl SchedCounters {
    /// The counters of process `pid` now; `None` when it is gone or /proc says nothing.
    pub(super) fn of(pid: u32) -> Option<SchedCounters> {
        Self::read(&Path::new("/proc").join(pid.to_string()))
    }

    fn read(process: &Path) -> Option<SchedCounters> {
        let mut total = SchedCounters::default();
        for task in std::fs::read_dir(process.join("task")).ok()?.flatten() {
            let path = task.path();
            // A thread that ended between the listing and the read is skipped.
            let Ok(schedstat) = std::fs::read_to_string(path.join("schedstat")) else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(path.join("status")) else {
                continue;
            };
            total.add(&parse(&schedstat, &status)?);
        }
        Some(total)
    }

    fn add(&mut self, o: &SchedCounters) {
        self.cpu_ns += o.cpu_ns;
        self.run_queue_ns += o.run_queue_ns;
        self.timeslices += o.timeslices;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
    }

    /// What happened between `earlier` and these counters.
    pub(super) fn since(&self, earlier: &SchedCounters) -> SchedCounters {
        SchedCounters {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            run_queue_ns: self.run_queue_ns.saturating_sub(earlier.run_queue_ns),
            timeslices: self.timeslices.saturating_sub(earlier.timeslices),
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self.involuntary_switches.saturating_sub(earlier.involuntary_switches),
        }
    }
}

/// One thread's counters from its `schedstat` (`cpu_ns run_queue_ns timeslices`) and
/// `status` (`voluntary_ctxt_switches:`, `nonvoluntary_ctxt_switches:`).
fn parse(schedstat: &str, status: &str) -> Option<SchedCounters> {
    let mut fields = schedstat.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (cpu_ns, run_queue_ns, timeslices) = (fields.next()??, fields.next()??, fields.next()??);
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(SchedCounters {
        cpu_ns,
        run_queue_ns,
        timeslices,
        voluntary_switches: field("voluntary_ctxt_switches:")?,
        involuntary_switches: field("nonvoluntary_ctxt_switches:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_threads_counters() {
        let status = "Name:\tsfclab\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        let c = parse("1500000 250000 15\n", status).unwrap();
        assert_eq!(
            c,
            SchedCounters {
                cpu_ns: 1_500_000,
                run_queue_ns: 250_000,
                timeslices: 15,
                voluntary_switches: 12,
                involuntary_switches: 3
            }
        );
        assert!(parse("1 2\n", status).is_none());
        assert!(parse("1 2 3\n", "Name:\tx\n").is_none());
    }

    #[test]
    fn a_process_that_runs_then_sleeps_counts_cpu_time_and_switches() {
        // A child of its own, single-threaded: this test process's other threads (tests
        // running beside) come and go, and a thread that ends takes its counters out of
        // the sum.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 30"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let before = SchedCounters::of(pid).expect("the child's counters");
        // It spins (5 ms of CPU time or more, however loaded the machine) and has waited
        // at least once (a voluntary switch: starting, or its sleep after the spin).
        let t = std::time::Instant::now();
        let grown = loop {
            let c = SchedCounters::of(pid).expect("the child's counters").since(&before);
            if c.cpu_ns >= 5_000_000 && c.timeslices >= 1 && c.voluntary_switches >= 1 {
                break Some(c);
            }
            if t.elapsed() > std::time::Duration::from_secs(30) {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(grown.is_some(), "no CPU time or switch counted");
        assert!(SchedCounters::of(pid).is_none(), "a reaped process has no counters");
        assert!(SchedCounters::of(u32::MAX).is_none());
    }
}
