//! The CPU time the kernel counts (`/proc/stat`): the one reader the benchmarks use, to
//! wait for idle cores and to price a DUT core's non-idle time per frame.

/// Jiffies of one `/proc/stat` line since boot: every core's (`cpu`) or one core's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuTime {
    /// user, nice, system, irq, softirq.
    pub busy: u64,
    /// idle and iowait.
    pub idle: u64,
    /// Time the hypervisor gave another guest.
    pub steal: u64,
}

impl CpuTime {
    /// Every core's time (`None`) or core `n`'s, now.
    pub fn read(core: Option<usize>) -> Option<CpuTime> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let prefix = core.map_or("cpu ".to_string(), |n| format!("cpu{n} "));
        CpuTime::parse(stat.lines().find(|l| l.starts_with(&prefix))?)
    }

    /// One line: `cpuN user nice system idle iowait irq softirq steal ...`.
    fn parse(line: &str) -> Option<CpuTime> {
        let v: Vec<u64> = line.split_whitespace().skip(1).map_while(|x| x.parse().ok()).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        (v.len() >= 4).then(|| CpuTime {
            busy: at(0) + at(1) + at(2) + at(5) + at(6),
            idle: at(3) + at(4),
            steal: at(7),
        })
    }

    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_line_as_the_kernel_writes_it() {
        let t = CpuTime::parse("cpu1 100 2 30 500 7 1 4 9 0 0").unwrap();
        assert_eq!((t.busy, t.idle, t.steal, t.total()), (137, 507, 9, 653));
        assert!(CpuTime::parse("cpu1 garbage").is_none());
        assert!(CpuTime::read(None).is_some_and(|t| t.total() > 0));
    }
}
