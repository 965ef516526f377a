#!/usr/bin/env python3
"""`sfclab search` beside FD.io CSIT's MLRsearch (PyPI `MLRsearch` 1.2.1) on a real DUT.

Both search the same device under test with the same goals: the chain
`forwarder -> synthetic(cycles=300)` on one core, the generator on another, 64 B
(both searches are told the same placement). The reference runs its own controller and
measures each trial with `sfclab run --rate X --json` in that placement (offered = what
the generator sent in the window, less what a transmit refused; lost = offered -
received: the counts `sfclab search` judges).

The two searches run at the same time and take turns, trial by trial, on one lock file
(`sfclab search --take-turns`; the reference takes the same flock around each of its
trials and its controller's work): run one after the other, each would measure a
different state of a machine whose capacity drifts by more than 10% within minutes
(a VM's vCPUs move, the host throttles sustained load), and the second would always be
the one measured after minutes of load. Their PDRs are compared round by round: the
median over `--rounds` of sfclab's PDR over the reference's must be within `--tolerance`
of 1 (NDR sits at the noise floor on a VM: reported, not checked).

With sfclab's default RX queue (1024 packets: 0.13 ms at 8 Mpps) the chain core's
multi-millisecond stalls on a VM (4.5 ms, several a second after minutes of load, here)
lose 0.1-1% in most trials at any load: PDR 0.5% then sits on the noise floor too, and
a search that measures one unlucky load far below capacity ends there (both searches
do, in different rounds). CI passes `--rx-queue 32768` (4 ms at 8 Mpps), which makes
the DUT's PDR its capacity rather than the host's luck.

Usage: real_dut_with_mlrsearch.py SFCLAB_BINARY [--rounds N] [--tolerance 0.10]
       [--trials FILE] [--rx-queue PACKETS]
Prints one line per search (its trials and trial-seconds: the intended durations, as the
reference counts them; both search 0.1-20 Mpps, so sfclab measures no maximum first) and
a closing verdict; exits 1 when the PDRs disagree. The trial-time ratio (median of the rounds') is
printed beside it (the economy goal), not checked: it swings 3x between rounds here.
`--trials` writes every trial of both searches as JSON lines, to see what each measured.
"""

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from MLRsearch import AbstractMeasurer, Config, MeasurementResult, MultipleLossRatioSearch, SearchGoal

CHAIN = "forwarder -> synthetic(cycles=300)"
# The chain on the second core this process may use, the generator on the first.
_CORES = sorted(os.sched_getaffinity(0))
PLACEMENT = ["--placement", "s_core", "--cores", str(_CORES[-1]), "--generator-core", str(_CORES[0])]
GOALS = [("NDR", 0.0), ("PDR", 0.005)]
INITIAL_S, FINAL_S, SUM_S, EXCEED, WIDTH = 0.2, 1.0, 3.0, 0.5, 0.01
MIN_PPS, MAX_PPS = 100e3, 20e6
# As `sfclab --take-turns`: wait this long before asking for a turn, so that a process
# blocked on the lock takes the one that just ended.
GIVE_WAY_S = 0.02


class Turns:
    """An exclusive flock on the file both searches name, held from one trial to the next."""

    def __init__(self, path):
        self.file = open(path, "a")
        self.held = False

    def next(self):
        self.end()
        time.sleep(GIVE_WAY_S)
        fcntl.flock(self.file, fcntl.LOCK_EX)
        self.held = True

    def end(self):
        if self.held:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.held = False


class SfclabRun(AbstractMeasurer):
    """One trial: `sfclab run` at the load for the duration, counted over its window."""

    def __init__(self, binary, extra, turns, log):
        self.binary, self.extra, self.turns, self.log = binary, extra, turns, log
        self.trials = 0
        self.trial_s = 0.0

    def measure(self, intended_duration, intended_load):
        # The turn covers this trial and the controller's work after it: nothing of this
        # search runs while the other measures.
        self.turns.next()
        args = [self.binary, "run", "--chain", CHAIN, "--size", "64", *PLACEMENT, *self.extra,
                "--rate", f"{intended_load:.0f}pps", "--duration", f"{intended_duration * 1e6:.0f}us", "--json"]
        doc = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
        w = doc["window_loss"]
        offered = w["sent"] - doc.get("not_offered", 0)
        self.trials += 1
        self.trial_s += intended_duration
        loss = max(offered - w["received"], 0)
        self.log.append({"search": "MLRsearch", "load_pps": intended_load, "duration_s": intended_duration,
                         "offered": offered, "lost": loss, "at_s": time.time()})
        return MeasurementResult(
            intended_duration=intended_duration,
            intended_load=intended_load,
            offered_count=offered,
            loss_count=loss,
            duration_with_overheads=doc["duration_s"],
        )


def reference(binary, extra, turns, log):
    goals = [
        SearchGoal(loss_ratio=loss, exceed_ratio=EXCEED, relative_width=WIDTH,
                   initial_trial_duration=INITIAL_S, final_trial_duration=FINAL_S, duration_sum=SUM_S)
        for _, loss in GOALS
    ]
    config = Config()
    config.goals = goals
    config.min_load = MIN_PPS
    config.max_load = MAX_PPS
    config.warmup_duration = None
    measurer = SfclabRun(binary, extra, turns, log)
    try:
        results = MultipleLossRatioSearch(config=config).search(measurer=measurer, debug=lambda _: None)
    finally:
        turns.end()
    found = [float(results[g].relevant_lower_bound or 0.0) for g in goals]
    return found, measurer.trials, measurer.trial_s


def start_sfclab(binary, extra, turn_file):
    args = [binary, "search", "--chain", CHAIN, "--size", "64", *PLACEMENT, *extra, "--take-turns", turn_file,
            "--goals", "ndr,pdr", "--method", "mlr", "--initial-duration", f"{INITIAL_S}s",
            "--duration", f"{FINAL_S}s", "--duration-sum", f"{SUM_S}s", "--exceed-ratio", str(EXCEED),
            "--resolution", f"{WIDTH * 100}%", "--min-rate", f"{MIN_PPS:.0f}pps", "--max-rate", f"{MAX_PPS:.0f}pps",
            "--latency-at", "none", "--json"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_sfclab(proc, log):
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"sfclab search failed ({proc.returncode}): {err.strip()}")
    s = json.loads(out)["search"]
    for t in s["trials"]:
        log.append({"search": "sfclab", "load_pps": t["offered_pps"], "duration_s": t["intended_duration_s"],
                    "offered": t["sent"], "lost": t["sent"] - t["received"], "valid": t["valid"]})
    return [g["lower_pps"] or 0.0 for g in s["goals"]], s["trial_count"], sum(t["intended_duration_s"] for t in s["trials"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--trials", help="write every trial of both searches here (JSON lines)")
    ap.add_argument("--rx-queue", type=int, help="packets the chain's RX queue holds (sfclab's default: 1024)")
    a = ap.parse_args()
    a.extra = ["--rx-queue", str(a.rx_queue)] if a.rx_queue else []
    ref, ours, log, ref_s, ours_s = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        turn_file = os.path.join(tmp, "turns")
        turns = Turns(turn_file)
        for r in range(a.rounds):
            started = time.time()
            proc = start_sfclab(a.binary, a.extra, turn_file)
            try:
                found, trials, trial_s = reference(a.binary, a.extra, turns, log)
            except BaseException:
                proc.kill()
                raise
            ref.append(found)
            ref_s.append(trial_s)
            print(f"round {r + 1} MLRsearch 1.2.1: NDR {found[0] / 1e6:.3f} PDR {found[1] / 1e6:.3f} Mpps "
                  f"({trials} trials, {trial_s:.1f} trial-s, done after {time.time() - started:.0f} s)", flush=True)
            found, trials, trial_s = finish_sfclab(proc, log)
            ours.append(found)
            ours_s.append(trial_s)
            print(f"round {r + 1} sfclab search:    NDR {found[0] / 1e6:.3f} PDR {found[1] / 1e6:.3f} Mpps "
                  f"({trials} trials, {trial_s:.1f} trial-s, done after {time.time() - started:.0f} s)", flush=True)
    if a.trials:
        with open(a.trials, "w") as f:
            f.writelines(json.dumps(t) + "\n" for t in log)
    # Each round's two searches take turns on the same machine state, so they are compared
    # round by round: the median of the per-round ratios. Medians taken over each search's
    # rounds apart would pair one search's round with the other's from minutes later (the
    # capacity drifts 10% between rounds here): a CI run failed at +10.9% that way when
    # the rounds' own ratios were +0.0, -0.8, +10.9, +2.4 and +1.9%.
    pdr_ratio = statistics.median(o[1] / r[1] for r, o in zip(ref, ours))
    ndr_ratio = statistics.median(o[0] / r[0] if r[0] else float("nan") for r, o in zip(ref, ours))
    ok = abs(pdr_ratio - 1) <= a.tolerance
    print("     PDR sfclab/MLRsearch per round: " + ", ".join(f"{o[1] / r[1]:.3f}" for r, o in zip(ref, ours)))
    print(f"{'ok  ' if ok else 'FAIL'} PDR: sfclab/MLRsearch median of the rounds {pdr_ratio:.3f} "
          f"({(pdr_ratio - 1) * 100:+.1f}%, tolerance {a.tolerance:.0%}); medians MLRsearch "
          f"{statistics.median(x[1] for x in ref) / 1e6:.3f}, sfclab {statistics.median(x[1] for x in ours) / 1e6:.3f} Mpps; "
          f"NDR ratio {ndr_ratio:.3f} (not checked)")
    # Trial time is reported, not checked: one search's rounds here spread 3x.
    time_ratio = statistics.median(o / r for r, o in zip(ref_s, ours_s))
    print(f"     trial time: sfclab/MLRsearch median of the rounds x{time_ratio:.2f} (medians MLRsearch "
          f"{statistics.median(ref_s):.1f} s, sfclab {statistics.median(ours_s):.1f} s; the goal is at most x1.1, not checked)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
