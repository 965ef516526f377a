//! What every result document records beside its figures: the machine it ran on and the
//! chain's NFs with their settings.

use serde::Serialize;

/// The machine a result was measured on.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub tsc_hz: f64,
    pub kernel: String,
}

impl Machine {
    /// This machine, from /proc.
    pub fn read() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            tsc_hz: sfclab_core::tsc::hz(),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "unknown".into(), |s| s.trim().to_string()),
        }
    }
}

/// One NF of a chain as a document records it: its name in the chain and its settings.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NfOwned {
    pub name: String,
    pub config: sfclab_nf::NfSpec,
}

impl NfOwned {
    /// The NFs of `experiment`, in chain order.
    pub fn of(experiment: &crate::Experiment) -> Vec<NfOwned> {
        experiment
            .nfs
            .iter()
            .map(|(name, config)| NfOwned {
                name: name.clone(),
                config: config.clone(),
            })
            .collect()
    }
}
