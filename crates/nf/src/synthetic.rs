//! `synthetic`: an NF whose cost is set by the experiment, after the synthetic NF of
//! Hahn et al. (seed 004, Fig. 5 and Table 3): CPU load in cycles per packet, and cache
//! load as a working set read at random offsets a given number of times per packet.
//! Sweeping `working_set` across the L1, L2 and L3 sizes shows the cache steps.
//!
//! Keys:
//! - `cycles` (default 0): TSC cycles of pure CPU work per packet, spent per batch
//!   (`cycles x batch length`, measured with the TSC after the memory work).
//! - `working_set` (default 0): bytes of the data set, e.g. `32KiB`, `8MiB`.
//! - `accesses` (default 0): 8-byte reads of the working set per packet, each at an
//!   offset given by the previous read: a walk along one random cycle through the whole
//!   set (Sattolo's algorithm), so every read waits for the memory level that holds the
//!   set and the L1/L2/L3/DRAM steps show as latency, as in the paper's worst case.
//! - `drop_one_in` (default none): drop every k-th packet, reason `injected`.
//! - `seed` (default 1): seed of the offset generator.
//!
//! Every packet is touched: its first 8 bytes are read and folded into the NF's state,
//! so the work cannot be skipped by the hardware or the compiler. Drops: `injected`.

use serde::Deserialize;
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Verdicts, tsc};

use crate::{ByteSize, ConfigError};

pub struct Synthetic {
    cycles: u64,
    accesses: u32,
    /// A single random cycle: `working_set[i]` is the index read after `i`.
    working_set: Box<[u64]>,
    /// Where the walk continues with the next packet.
    position: usize,
    drop_one_in: u64,
    until_drop: u64,
    /// Folded result of every read, kept so the reads are not dead code.
    fold: u64,
}

impl NetworkFunction for Synthetic {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    #[inline]
    fn process(&mut self, _ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        let accesses = if self.working_set.is_empty() { 0 } else { self.accesses };
        let mut position = self.position;
        for (i, p) in batch.iter_mut().enumerate() {
            let data = p.data();
            let head = data
                .first_chunk::<8>()
                .map_or(data.len() as u64, |b| u64::from_ne_bytes(*b));
            for _ in 0..accesses {
                // Each read's address is the previous read's value: a dependent chain.
                position = self.working_set[position] as usize;
            }
            self.fold = self.fold.wrapping_add(head ^ position as u64);
            if self.drop_one_in != 0 {
                self.until_drop -= 1;
                if self.until_drop == 0 {
                    self.until_drop = self.drop_one_in;
                    verdicts.drop(i, DropReason::INJECTED);
                }
            }
        }
        self.position = position;
        if self.cycles != 0 {
            let start = tsc::now();
            let budget = self.cycles * batch.len() as u64;
            while tsc::now().wrapping_sub(start) < budget {
                std::hint::spin_loop();
            }
        }
        std::hint::black_box(self.fold);
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![NfCounter::gauge("working_set_bytes", self.working_set.len() as u64 * 8)]
    }
}

/// Registers `synthetic`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "synthetic",
    about: "tunable load: cycles per packet, a working set read at random offsets, injected drops",
    stateless: false,
    cost_neutral: &["seed"],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(SyntheticConfig),
    drops_all_by_default: None,
    fixes: &[],
    build: |v| Ok(Box::new(Synthetic::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    /// TSC cycles of pure CPU work per packet (spent per batch).
    #[serde(default)]
    pub cycles: u64,
    /// Bytes of the data set read per packet, e.g. 32KiB, 8MiB (0: none).
    #[serde(default)]
    pub working_set: ByteSize,
    /// 8-byte reads of the working set per packet, each at the address the previous one read.
    #[serde(default)]
    pub accesses: u32,
    /// Drop every k-th packet, reason `injected`.
    pub drop_one_in: Option<u64>,
    /// Seed of the random walk (non-zero; default 1).
    pub seed: Option<u64>,
}

impl Synthetic {
    /// Largest working set: far beyond any L3, small enough not to surprise anyone.
    pub const MAX_WORKING_SET: u64 = 16 << 30;

    pub fn new(cfg: &SyntheticConfig) -> Result<Synthetic, ConfigError> {
        let ws = cfg.working_set.0;
        if ws > Self::MAX_WORKING_SET {
            return Err(ConfigError::new(
                "working_set",
                format!("{ws} bytes is over the 16 GiB limit"),
            ));
        }
        if ws != 0 && ws < 8 {
            return Err(ConfigError::new("working_set", "must be 0 (none) or at least 8 bytes"));
        }
        if cfg.accesses != 0 && ws == 0 {
            return Err(ConfigError::new("accesses", "needs a `working_set` to read from"));
        }
        if cfg.cycles > 1_000_000 {
            return Err(ConfigError::new(
                "cycles",
                format!("{} cycles per packet is over the 1,000,000 limit", cfg.cycles),
            ));
        }
        if cfg.drop_one_in == Some(0) {
            return Err(ConfigError::new(
                "drop_one_in",
                "must be at least 1 (1 drops every packet)",
            ));
        }
        let seed = cfg.seed.unwrap_or(1);
        if seed == 0 {
            return Err(ConfigError::new("seed", "must be non-zero (xorshift)"));
        }
        let working_set = random_cycle((ws / 8) as usize, seed);
        let drop_one_in = cfg.drop_one_in.unwrap_or(0);
        Ok(Synthetic {
            cycles: cfg.cycles,
            accesses: cfg.accesses,
            working_set,
            position: 0,
            drop_one_in,
            until_drop: drop_one_in,
            fold: 0,
        })
    }
}

/// A permutation of `0..n` that is one cycle through all elements (Sattolo's algorithm),
/// so a walk from any index visits the whole set before it repeats.
fn random_cycle(n: usize, seed: u64) -> Box<[u64]> {
    let mut next: Box<[u64]> = (0..n as u64).collect();
    let mut x = seed;
    for i in (1..n).rev() {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        // Multiply-shift maps the high bits into 0..i without a division.
        let j = (((x >> 32) * i as u64) >> 32) as usize;
        next.swap(i, j);
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{run_one_batch, udp_frame};
    use sfclab_core::Verdict;

    #[test]
    fn drops_exactly_one_in_k_across_batches() {
        let cfg = SyntheticConfig {
            drop_one_in: Some(3),
            ..Default::default()
        };
        let mut nf = Synthetic::new(&cfg).unwrap();
        let frames = vec![udp_frame(); 8];
        let (_, a) = run_one_batch(&mut nf, &frames);
        let (_, b) = run_one_batch(&mut nf, &frames);
        let all: Vec<_> = a.into_iter().chain(b).collect();
        let dropped: Vec<usize> = all
            .iter()
            .enumerate()
            .filter(|(_, v)| **v == Verdict::Drop(DropReason::INJECTED))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(dropped, vec![2, 5, 8, 11, 14]);
    }

    #[test]
    fn spends_the_requested_cycles() {
        let cfg = SyntheticConfig {
            cycles: 2000,
            ..Default::default()
        };
        let mut nf = Synthetic::new(&cfg).unwrap();
        let frames = vec![udp_frame(); 32];
        let t0 = tsc::now();
        let (out, _) = run_one_batch(&mut nf, &frames);
        let spent = tsc::now() - t0;
        assert!(spent >= 2000 * 32, "spent only {spent} cycles");
        assert_eq!(out[0], frames[0], "packets are read, not changed");
    }

    #[test]
    fn reads_stay_inside_the_working_set() {
        // 24 bytes = 3 words: not a power of two.
        let cfg = SyntheticConfig {
            working_set: ByteSize(24),
            accesses: 1000,
            ..Default::default()
        };
        let mut nf = Synthetic::new(&cfg).unwrap();
        run_one_batch(&mut nf, &vec![udp_frame(); 32]);
        // 32 packets x 1000 dependent reads walk the 3-word cycle 32,000 steps from 0.
        let mut expect = 0usize;
        for _ in 0..32 * 1000 {
            expect = nf.working_set[expect] as usize;
        }
        assert!(nf.position < 3, "position {} is outside the 3 words", nf.position);
        assert_eq!(nf.position, expect, "the reads follow the cycle");
        assert_eq!(nf.working_set.len(), 3);
    }

    #[test]
    fn the_walk_visits_every_word_once_per_cycle() {
        for n in [1usize, 2, 3, 64, 1000] {
            let next = random_cycle(n, 7);
            let mut seen = vec![false; n];
            let mut i = 0;
            for _ in 0..n {
                assert!(!seen[i], "index {i} visited twice before the cycle closed (n = {n})");
                seen[i] = true;
                i = next[i] as usize;
            }
            assert_eq!(i, 0, "the walk returns to its start after n steps");
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn config_errors_name_the_key() {
        let bad = [
            (
                SyntheticConfig {
                    accesses: 4,
                    ..Default::default()
                },
                "accesses",
            ),
            (
                SyntheticConfig {
                    working_set: ByteSize(4),
                    ..Default::default()
                },
                "working_set",
            ),
            (
                SyntheticConfig {
                    drop_one_in: Some(0),
                    ..Default::default()
                },
                "drop_one_in",
            ),
            (
                SyntheticConfig {
                    cycles: 10_000_000,
                    ..Default::default()
                },
                "cycles",
            ),
            (
                SyntheticConfig {
                    seed: Some(0),
                    ..Default::default()
                },
                "seed",
            ),
        ];
        for (cfg, key) in bad {
            assert_eq!(Synthetic::new(&cfg).err().unwrap().key, key);
        }
    }

    #[test]
    fn byte_sizes_parse_with_units() {
        assert_eq!("32KiB".parse::<ByteSize>().unwrap().0, 32 * 1024);
        assert_eq!("8 MiB".parse::<ByteSize>().unwrap().0, 8 << 20);
        assert!("lots".parse::<ByteSize>().is_err());
    }
}
