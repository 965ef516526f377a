//! Where the NFs of a chain run: which NFs form a stage, and which core runs it.
//!
//! Patterns from seed 002 (Section V): `s_core` (every NF on one core), `bi:K`
//! (Block-Interleaving: K contiguous blocks of equal length, one per core, the fewest
//! core switches), `pbp:K` (Pipeline-by-Pipeline: a new stage after every NF, cores
//! taken round robin, the most core switches), or an explicit core per NF (`0,0,1,1`),
//! where consecutive NFs on the same core form one stage. Stages that share a core are
//! run in turn on it (run-to-completion, time-multiplexed), so chains longer than the
//! core count work and oversubscription can be studied.

use serde::Serialize;
use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    SCore,
    Bi(usize),
    Pbp(usize),
    /// One core per NF.
    Cores(Vec<usize>),
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::SCore => f.write_str("s_core"),
            Placement::Bi(k) => write!(f, "bi:{k}"),
            Placement::Pbp(k) => write!(f, "pbp:{k}"),
            Placement::Cores(c) => {
                let s: Vec<String> = c.iter().map(|c| c.to_string()).collect();
                f.write_str(&s.join(","))
            }
        }
    }
}

impl std::str::FromStr for Placement {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let k = |rest: &str| -> Result<usize, String> {
            let k: usize = rest
                .parse()
                .map_err(|_| format!("`{s}`: `{rest}` is not a core count"))?;
            if k == 0 {
                return Err(format!("`{s}`: the core count must be at least 1"));
            }
            Ok(k)
        };
        if t == "s_core" || t == "score" {
            return Ok(Placement::SCore);
        }
        if let Some(rest) = t.strip_prefix("bi:") {
            return Ok(Placement::Bi(k(rest)?));
        }
        if let Some(rest) = t.strip_prefix("pbp:") {
            return Ok(Placement::Pbp(k(rest)?));
        }
        let cores: Result<Vec<usize>, _> = t.split(',').map(|c| c.trim().parse::<usize>()).collect();
        match cores {
            Ok(c) if !c.is_empty() => Ok(Placement::Cores(c)),
            _ => Err(format!(
                "`{s}` is not a placement: write s_core, bi:K, pbp:K, or one core per NF like 0,0,1,1"
            )),
        }
    }
}

/// One stage: a contiguous block of NFs run in compound fashion on one core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagePlan {
    pub nfs: Range<usize>,
    pub core: usize,
}

impl Placement {
    /// The stages for a chain of `n` NFs, on `cores` (the cores the pattern may use, in
    /// order: `bi:2` uses the first two). Errors name what is wrong.
    pub fn stages(&self, n: usize, cores: &[usize]) -> Result<Vec<StagePlan>, String> {
        let online = allowed_cores();
        if let Some(bad) = cores.iter().find(|c| !online.contains(c)) {
            return Err(format!(
                "core {bad} is not available (this process may use {})",
                list(&online)
            ));
        }
        if cores.is_empty() {
            return Err("no cores to place the chain on".into());
        }
        let need = |k: usize| {
            if k > cores.len() {
                Err(format!(
                    "{self} needs {k} cores but only {} are given ({})",
                    cores.len(),
                    list(cores)
                ))
            } else {
                Ok(())
            }
        };
        if n == 0 {
            // A chain without NFs still has a stage, so that packets cross the ingress queue.
            return Ok(vec![StagePlan {
                nfs: 0..0,
                core: cores[0],
            }]);
        }
        Ok(match self {
            Placement::SCore => vec![StagePlan {
                nfs: 0..n,
                core: cores[0],
            }],
            Placement::Bi(k) => {
                need(*k)?;
                if n < *k {
                    return Err(format!(
                        "bi:{k} on {n} NF(s) would leave empty blocks: use at most bi:{n}"
                    ));
                }
                let (base, extra) = (n / k, n % k);
                let mut start = 0;
                (0..*k)
                    .map(|b| {
                        let len = base + usize::from(b < extra);
                        let plan = StagePlan {
                            nfs: start..start + len,
                            core: cores[b],
                        };
                        start += len;
                        plan
                    })
                    .collect()
            }
            Placement::Pbp(k) => {
                need(*k)?;
                (0..n)
                    .map(|i| StagePlan {
                        nfs: i..i + 1,
                        core: cores[i % k],
                    })
                    .collect()
            }
            Placement::Cores(per_nf) => {
                if per_nf.len() != n {
                    return Err(format!(
                        "{} core(s) given for {n} NF(s): give one core per NF",
                        per_nf.len()
                    ));
                }
                if let Some(bad) = per_nf.iter().find(|c| !online.contains(c)) {
                    return Err(format!(
                        "core {bad} is not available (this process may use {})",
                        list(&online)
                    ));
                }
                let mut stages: Vec<StagePlan> = Vec::new();
                for (i, &c) in per_nf.iter().enumerate() {
                    match stages.last_mut() {
                        Some(s) if s.core == c => s.nfs.end = i + 1,
                        _ => stages.push(StagePlan { nfs: i..i + 1, core: c }),
                    }
                }
                stages
            }
        })
    }
}

/// Cores this process may run on: its affinity mask (`taskset`, a cpuset, a container's
/// or pod's CPU set), not every core of the machine. Every default core comes from here.
pub fn allowed_cores() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// The default core of a chain: the last allowed one, away from core 0 where interrupts
/// land when there is a choice.
pub fn default_chain_core() -> Option<usize> {
    allowed_cores().last().copied()
}

/// The default core of a generator that must not share `chain_core`: the first other
/// allowed core; `None` when the process may use only one core.
pub fn default_generator_core(chain_core: usize) -> Option<usize> {
    allowed_cores().into_iter().find(|&c| c != chain_core)
}

fn list(c: &[usize]) -> String {
    c.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores() -> Vec<usize> {
        allowed_cores()
    }

    #[test]
    fn parses_every_form() {
        assert_eq!("s_core".parse::<Placement>().unwrap(), Placement::SCore);
        assert_eq!("BI:2".parse::<Placement>().unwrap(), Placement::Bi(2));
        assert_eq!("pbp:4".parse::<Placement>().unwrap(), Placement::Pbp(4));
        assert_eq!("0, 0,1".parse::<Placement>().unwrap(), Placement::Cores(vec![0, 0, 1]));
        for bad in ["bi:0", "bi:x", "pbp:", "", "fast", "0,,1"] {
            assert!(bad.parse::<Placement>().is_err(), "{bad}");
        }
    }

    #[test]
    fn block_interleaving_makes_contiguous_equal_blocks() {
        let c = cores();
        if c.len() < 2 {
            eprintln!("skipped: needs 2 cores, this machine has {}", c.len());
            return;
        }
        let s = Placement::Bi(2).stages(5, &c[..2]).unwrap();
        assert_eq!(
            s,
            vec![StagePlan { nfs: 0..3, core: c[0] }, StagePlan { nfs: 3..5, core: c[1] }]
        );
        let s = Placement::Pbp(2).stages(4, &c[..2]).unwrap();
        assert_eq!(
            s.iter().map(|s| s.core).collect::<Vec<_>>(),
            vec![c[0], c[1], c[0], c[1]]
        );
        assert!(s.iter().all(|s| s.nfs.len() == 1));
        let s = Placement::Cores(vec![c[0], c[0], c[1], c[1], c[0]])
            .stages(5, &c)
            .unwrap();
        assert_eq!(
            s.iter().map(|s| (s.nfs.clone(), s.core)).collect::<Vec<_>>(),
            vec![(0..2, c[0]), (2..4, c[1]), (4..5, c[0])]
        );
    }

    #[test]
    fn single_core_and_empty_chains() {
        let c = cores();
        assert_eq!(
            Placement::SCore.stages(16, &c).unwrap(),
            vec![StagePlan { nfs: 0..16, core: c[0] }]
        );
        assert_eq!(Placement::Bi(1).stages(0, &c).unwrap().len(), 1);
        // PbP on one core: a stage per NF, all sharing the core.
        assert_eq!(Placement::Pbp(1).stages(3, &c).unwrap().len(), 3);
    }

    #[test]
    fn impossible_placements_say_why() {
        let c = cores();
        let e = Placement::Bi(c.len() + 1).stages(8, &c).unwrap_err();
        assert!(e.contains("needs") && e.contains("cores"), "{e}");
        let e = Placement::Bi(1).stages(4, &[4096]).unwrap_err();
        assert!(e.contains("core 4096 is not available"), "{e}");
        let e = Placement::Cores(vec![c[0], 4096]).stages(2, &c).unwrap_err();
        assert!(e.contains("4096"), "{e}");
        let e = Placement::Cores(vec![c[0]]).stages(2, &c).unwrap_err();
        assert!(e.contains("one core per NF"), "{e}");
        if c.len() >= 2 {
            let e = Placement::Bi(2).stages(1, &c).unwrap_err();
            assert!(e.contains("empty blocks"), "{e}");
        }
    }
}
