//! How far apart two cores are right now: the round trip of a cache line between them.
//!
//! On a virtual machine the hypervisor places the vCPUs on physical cores and moves
//! them: on the machine these figures come from, the round trip between vCPU 0 and 1
//! switches every one to three seconds between ~150, ~340 and ~1,500 TSC cycles, and
//! what a ring between the two cores costs a pipeline moves with it. `bench model`
//! samples it around every pipeline cell so a miss can be told from a host that moved.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sfclab_core::tsc;

/// One cache line of its own, so the two counters do not share one.
#[repr(align(64))]
struct Line(AtomicU64);

/// Round trips per sample: ~10 ms at 1,500 cycles each, ~1 ms at 150.
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
}
