//! How far apart two cores are right now: the round trip of a cache line between them.
//!
//! On a virtual machine the hypervisor places the vCPUs on physical cores and moves
//! them: on the machine these figures come from, the round trip between vCPU 0 and 1
//! switches every one to three seconds between ~150, ~340 and ~1,500 TSC cycles, and
//! what a ring between the two cores costs a pipeline moves with it. `bench model`
//! samples it around every pipeline cell so a miss can be told from a host that moved,
//! and every run on two cores can be taken while the cores are near ([`NearCores`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use sfclab_core::tsc;

/// One cache line of its own, so the two counters do not share one.
#[repr(align(64))]
struct Line(AtomicU64);

/// Round trips per sample: ~3 ms at 1,500 cycles each and 2.4 GHz, ~0.3 ms at 150.
const TRIPS: u64 = 5_000;

/// The mean TSC cycles of one round trip of a cache line between cores `near` and
/// `far`, over `TRIPS`: a thread on `near` writes a number, one on `far` echoes it in a
/// line of its own, the first waits for the echo. `None` when either core cannot be
/// used.
pub fn round_trip_cycles(near: usize, far: usize) -> Option<f64> {
    let allowed = sfclab_runtime::placement::allowed_cores();
    if near == far || !allowed.contains(&near) || !allowed.contains(&far) {
        return None;
    }
    let ping = Line(AtomicU64::new(0));
    let pong = Line(AtomicU64::new(0));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: far }) {
                return;
            }
            let mut last = 0;
            while !stop.load(Ordering::Relaxed) {
                let v = ping.0.load(Ordering::Acquire);
                if v != last {
                    pong.0.store(v, Ordering::Release);
                    last = v;
                }
                std::hint::spin_loop();
            }
        });
        // On a thread of its own, so the caller's affinity stays as it was.
        let near = s.spawn(|| {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: near }) {
                return None;
            }
            // Gives up if the far side never answers (it could not move to its core).
            let deadline = tsc::now() + tsc::ticks(std::time::Duration::from_millis(500));
            let start = tsc::now();
            for i in 1..=TRIPS {
                ping.0.store(i, Ordering::Release);
                while pong.0.load(Ordering::Acquire) != i {
                    if tsc::now() > deadline {
                        return None;
                    }
                    std::hint::spin_loop();
                }
            }
            Some((tsc::now() - start) as f64 / TRIPS as f64)
        });
        let cycles = near.join().ok().flatten();
        stop.store(true, Ordering::Relaxed);
        cycles
    })
}

/// Runs on two cores are taken while the two cores are near: a run is repeated when the
/// round trip between them, sampled right before and right after it, exceeds the limit
/// either time. On the machine of these figures a pipeline of four forwarders on two
/// cores forwards ~50 Mpps while the round trip is ~350 cycles and ~15 Mpps while it is
/// ~1,500: two machines, and a calibration priced on one predicts nothing of the other.
/// Shared by clones (the counts are of every run it guarded).
#[derive(Debug)]
pub struct NearCores {
    limit: Limit,
    /// Every round trip sampled, TSC cycles (an automatic limit is taken from them).
    samples: Mutex<Vec<f64>>,
    /// Runs taken again because the cores were far before or after them.
    repeated: AtomicUsize,
    /// Runs kept with the cores far after `TRIES` tries (the host kept them apart).
    kept_far: AtomicUsize,
}

/// The largest round trip of cores taken as near.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    Cycles(f64),
    /// `AUTO_FACTOR` times the median of the round trips sampled so far (at least
    /// `AUTO_SAMPLES`, taken before the first run): where the cores are usually near
    /// and sometimes far, the far ones; where they are always one distance, none.
    Auto,
}

/// How often a run is tried before it is kept whatever the cores' distance.
const TRIES: usize = 10;
const AUTO_FACTOR: f64 = 2.0;
const AUTO_SAMPLES: usize = 8;

impl NearCores {
    pub fn new(limit: Limit) -> NearCores {
        NearCores {
            limit,
            samples: Mutex::new(Vec::new()),
            repeated: AtomicUsize::new(0),
            kept_far: AtomicUsize::new(0),
        }
    }

    /// The limit in force: as given, or the automatic one from the samples so far
    /// (`None` before any).
    pub fn limit_cycles(&self) -> Option<f64> {
        match self.limit {
            Limit::Cycles(c) => Some(c),
            Limit::Auto => {
                let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
                (!samples.is_empty()).then(|| AUTO_FACTOR * crate::median(&samples))
            }
        }
    }

    /// Runs taken again because the cores were far.
    pub fn repeated(&self) -> usize {
        self.repeated.load(Ordering::Relaxed)
    }

    /// Runs kept although the cores were far (after `TRIES` tries).
    pub fn kept_far(&self) -> usize {
        self.kept_far.load(Ordering::Relaxed)
    }

    fn sample(&self, near: usize, far: usize) -> Option<f64> {
        let c = round_trip_cycles(near, far)?;
        self.samples.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        Some(c)
    }

    /// `run` (on cores `near` and `far`) while the two are near: tried again, up to
    /// `TRIES` times, while the round trip before or after it exceeds the limit; the
    /// last try is kept whatever the distance, and counted.
    pub fn run<T>(&self, near: usize, far: usize, mut run: impl FnMut() -> Result<T, String>) -> Result<T, String> {
        if self.limit == Limit::Auto {
            let have = self.samples.lock().unwrap_or_else(|e| e.into_inner()).len();
            for _ in have..AUTO_SAMPLES {
                self.sample(near, far);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let before = self.sample(near, far);
            let value = run()?;
            let after = self.sample(near, far);
            let limit = self.limit_cycles().unwrap_or(f64::INFINITY);
            let stayed_near = [before, after].iter().all(|c| c.is_some_and(|c| c <= limit));
            if stayed_near || tries == TRIES {
                if !stayed_near {
                    self.kept_far.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(value);
            }
            self.repeated.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_between_two_cores_takes_some_cycles_and_one_core_has_none() {
        let cores = sfclab_runtime::placement::allowed_cores();
        assert_eq!(round_trip_cycles(cores[0], cores[0]), None);
        assert_eq!(round_trip_cycles(cores[0], usize::MAX), None);
        if cores.len() < 2 {
            eprintln!("skipped: one core, no round trip between two");
            return;
        }
        let c = round_trip_cycles(cores[0], cores[1]).expect("two cores answer");
        // A cache line moving twice takes more than a few cycles and (on any machine
        // this runs on) far less than a millisecond; on a loaded CI host the far
        // thread may be descheduled, hence the wide bound.
        assert!(c > 10.0 && c < 10_000_000.0, "{c} cycles");
    }

    #[test]
    fn runs_are_repeated_while_the_cores_are_far_and_kept_after_the_last_try() {
        let cores = sfclab_runtime::placement::allowed_cores();
        if cores.len() < 2 {
            eprintln!("skipped: one core, no round trip between two");
            return;
        }
        // No round trip is that short: every run is far, tried TRIES times, the last kept.
        let never = NearCores::new(Limit::Cycles(0.0));
        let mut runs = 0;
        assert_eq!(
            never.run(cores[0], cores[1], || Ok::<_, String>({
                runs += 1;
                runs
            })),
            Ok(TRIES)
        );
        assert_eq!((never.repeated(), never.kept_far()), (TRIES - 1, 1));
        // Every round trip is that short: the first run is kept.
        let always = NearCores::new(Limit::Cycles(f64::INFINITY));
        assert_eq!(always.run(cores[0], cores[1], || Ok::<_, String>(7)), Ok(7));
        assert_eq!((always.repeated(), always.kept_far()), (0, 0));
        // A failing run is not repeated: its error is the answer.
        let mut tries = 0;
        let failed = never.run(cores[0], cores[1], || -> Result<(), String> {
            tries += 1;
            Err("broken".into())
        });
        assert_eq!((failed, tries), (Err("broken".to_string()), 1));
        // Automatic: the limit is twice the median of the round trips sampled, at least
        // AUTO_SAMPLES of them before the first run and two per run.
        let auto = NearCores::new(Limit::Auto);
        assert_eq!(auto.limit_cycles(), None);
        auto.run(cores[0], cores[1], || Ok::<_, String>(())).unwrap();
        let samples = auto.samples.lock().unwrap().clone();
        assert!(samples.len() >= AUTO_SAMPLES + 2, "{samples:?}");
        assert_eq!(auto.limit_cycles(), Some(2.0 * crate::median(&samples)));
    }
}
