#!/usr/bin/env python3
"""sfclab's MLRsearch beside the reference (FD.io CSIT's `MLRsearch` on PyPI).

Both search the same simulated noisy DUTs (a capacity, plus stalls that lose packets at
any load, as vCPU stalls do on VMs) with the same goals; each DUT is searched with
several seeds by each side, under two sets of search parameters (the simulated
comparison's and the real-DUT comparison's). sfclab ports the reference's controller
whole, so on a deterministic DUT both must measure the same loads, for the same
durations, in the same order, and find the same bounds: every search is compared trial
by trial. Also checks the ported decision rule (`TargetStat.estimates`) on random trial
sets against the reference's own code.

Usage: compare_with_mlrsearch.py SIMULATED_SEARCH_BINARY
Prints one line per check and a closing `N passed, N failed` line; exits 1 on failure.
"""

import json
import random
import subprocess
import sys
from types import SimpleNamespace

from MLRsearch import (
    AbstractMeasurer,
    Config,
    MeasurementResult,
    MultipleLossRatioSearch,
    SearchGoal,
)
from MLRsearch.target_stat import TargetStat

MASK = (1 << 64) - 1


class StallingDut(AbstractMeasurer):
    """The same model as sfclab_measure::simulated::StallingDut."""

    def __init__(self, capacity_pps, stall_share, stall_s, queue, seed):
        self.capacity_pps = capacity_pps
        self.stall_share = stall_share
        self.stall_s = stall_s
        self.queue = queue
        self.seed = seed
        self.trial_time_s = 0.0
        self.trials = []

    def next_uniform(self):
        self.seed = (self.seed + 0x9E3779B97F4A7C15) & MASK
        z = self.seed
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        return (z >> 11) / float(1 << 53)

    def loss_ratio(self, load, duration, stalled):
        offered = load * duration
        lost = max(load - self.capacity_pps, 0.0) * duration
        if stalled:
            lost += max(load * self.stall_s - self.queue, 0.0)
        return min(lost / max(offered, 1.0), 1.0)

    def measure(self, intended_duration, intended_load):
        self.trial_time_s += intended_duration
        self.trials.append((intended_load, intended_duration))
        stalled = self.next_uniform() < self.stall_share
        sent = round(intended_load * intended_duration)
        received = min(sent, round(sent * (1.0 - self.loss_ratio(intended_load, intended_duration, stalled))))
        return MeasurementResult(
            intended_duration=intended_duration,
            intended_load=intended_load,
            offered_count=sent,
            loss_count=sent - received,
        )


GOALS = [dict(name="NDR", loss_ratio=0.0, exceed_ratio=0.5), dict(name="PDR", loss_ratio=0.005, exceed_ratio=0.5)]
SEARCHES = [
    # The simulated comparison's parameters.
    (5.0, dict(min_pps=10e3, max_pps=20e6, resolution=0.005, initial_duration_s=0.125, final_duration_s=1.0)),
    # real_dut_with_mlrsearch.py's.
    (3.0, dict(min_pps=100e3, max_pps=20e6, resolution=0.01, initial_duration_s=0.2, final_duration_s=1.0)),
]
DUTS = [
    # The chain on a noisy VM: ~8 Mpps, a 5 ms stall in 15% of trials.
    dict(capacity_pps=8e6, stall_share=0.15, stall_s=0.005, queue=4096.0),
    # Long stalls that fail the PDR goal at almost any load, in a quarter of the trials:
    # a lossy trial at a low load must not end the search there.
    dict(capacity_pps=8e6, stall_share=0.25, stall_s=0.02, queue=4096.0),
    # A slow chain: stalls do not overflow the queue at its rates.
    dict(capacity_pps=0.7e6, stall_share=0.3, stall_s=0.005, queue=4096.0),
    # The real-DUT comparison's chain behind its 32k-packet queue.
    dict(capacity_pps=5.9e6, stall_share=0.3, stall_s=0.004, queue=32768.0),
    # Quiet and fast.
    dict(capacity_pps=14.2e6, stall_share=0.0, stall_s=0.0, queue=0.0),
]
SEEDS = range(1, 16)


def reference(dut, duration_sum, search):
    goals = [
        SearchGoal(
            loss_ratio=g["loss_ratio"],
            exceed_ratio=g["exceed_ratio"],
            relative_width=search["resolution"],
            initial_trial_duration=search["initial_duration_s"],
            final_trial_duration=search["final_duration_s"],
            duration_sum=duration_sum,
        )
        for g in GOALS
    ]
    config = Config()
    config.goals = goals
    config.min_load = search["min_pps"]
    config.max_load = search["max_pps"]
    config.warmup_duration = None
    measurer = StallingDut(**dut)
    results = MultipleLossRatioSearch(config=config).search(measurer=measurer, debug=lambda _: None)
    out = []
    for goal in goals:
        r = results[goal]
        out.append(float(r.relevant_lower_bound) if r.relevant_lower_bound is not None else 0.0)
    return out, measurer.trials


def sfclab(binary, dut, duration_sum, search):
    goals = [dict(g, duration_sum_s=duration_sum) for g in GOALS]
    request = dict(dut=dut, method="mlr", goals=goals, max_trials=2000, **search)
    done = subprocess.run([binary], input=json.dumps(request), capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    trials = [(t["offered_pps"], t["intended_duration_s"]) for t in result["trials"]]
    return [g["lower_pps"] or 0.0 for g in result["goals"]], trials


def check_estimates(passed, failed):
    """The ported TargetStat.estimates against the reference's on random trial sets."""
    rng = random.Random(2544)
    cases = []
    for _ in range(2000):
        target = SimpleNamespace(
            loss_ratio=rng.choice([0.0, 0.005]),
            exceed_ratio=rng.choice([0.0, 0.2, 0.5]),
            trial_duration=1.0,
            duration_sum=rng.choice([1.0, 3.0, 5.0, 21.0]),
        )
        stat = TargetStat(target=target)
        trials = []
        for _ in range(rng.randrange(0, 12)):
            d = rng.choice([0.125, 0.5, 1.0, 2.0])
            loss = rng.choice([0.0, 0.0, 0.001, 0.01, 0.2])
            trials.append(dict(intended_duration_s=d, duration_s=d, loss_ratio=loss))
            stat.add(SimpleNamespace(intended_duration=d, duration_with_overheads=d, loss_ratio=loss))
        cases.append(dict(target=vars(target), trials=trials, estimates=list(stat.estimates())))
    return cases


def main():
    binary = sys.argv[1]
    passed, failed = 0, 0
    for duration_sum, search in SEARCHES:
        for dut in DUTS:
            differ, ref_s, our_s, ref_trials = [], 0.0, 0.0, 0
            for seed in SEEDS:
                ref, ref_log = reference(dict(dut, seed=seed), duration_sum, search)
                ours, our_log = sfclab(binary, dict(dut, seed=seed), duration_sum, search)
                ref_s += sum(d for _, d in ref_log)
                our_s += sum(d for _, d in our_log)
                ref_trials += len(ref_log)
                if ours != ref or our_log != ref_log:
                    first = next((i for i, (a, b) in enumerate(zip(ref_log, our_log)) if a != b), min(len(ref_log), len(our_log)))
                    differ.append(f"seed {seed}: bounds {ref} vs {ours}, first different trial #{first} "
                                  f"{ref_log[first:first + 1]} vs {our_log[first:first + 1]}")
            ok = not differ
            print(
                f"{'ok  ' if ok else 'FAIL'} capacity {dut['capacity_pps'] / 1e6:.2f} Mpps, stalls "
                f"{dut['stall_share']:.0%}, width {search['resolution']:.1%}: {len(SEEDS) - len(differ)} of "
                f"{len(SEEDS)} searches trial for trial as the reference ({ref_trials} trials, "
                f"trial time reference {ref_s:.1f} s, sfclab {our_s:.1f} s)"
            )
            for d in differ[:3]:
                print(f"     {d}")
            passed, failed = passed + ok, failed + (not ok)
    # The decision rule case by case: sfclab's port reads the same fixture format.
    cases = check_estimates(passed, failed)
    done = subprocess.run([binary, "--estimates"], input=json.dumps(cases), capture_output=True, text=True, check=True)
    mismatches = [i for i, (c, e) in enumerate(zip(cases, json.loads(done.stdout))) if c["estimates"] != e]
    ok = not mismatches
    print(f"{'ok  ' if ok else 'FAIL'} TargetStat.estimates on {len(cases)} random trial sets: {len(mismatches)} differ {mismatches[:5]}")
    passed, failed = passed + ok, failed + (not ok)
    print(f"mlrsearch-reference: {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
