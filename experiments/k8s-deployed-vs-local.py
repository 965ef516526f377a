#!/usr/bin/env python3
"""A scenario deployed with `sfclab deploy k8s`, run here as a node would run its pods,
against the same scenario run locally (`sfclab scenario`), interleaved rounds.

Each Pod of the deployment is started as its container's command and arguments (the
ConfigMap's files in a directory for /etc/sfclab, a directory per pod for /run/sfclab,
one node directory for /run/sfclab/memif), pinned with taskset to the VNF core as a
static CPU manager pins a Guaranteed pod, probed ready with its readiness probe's
command; then the tester Job's command (`sfclab scenario ... --attach`), pinned to the
tester core; its log is the result. The local run is `sfclab scenario FILE` with the
same cores. Both measure the same VNF processes and memif links: the ratio says what
attaching (no namespaces, VNFs serving run after run through control files) costs.

    python3 experiments/k8s-deployed-vs-local.py examples/scenarios/pvp-router.yaml \\
        --rounds 3 -- --rate 3Mpps --duration 2s --repeat 1

Prints each round's aggregate Mpps and conservation, and the medians with their ratio.
Needs root (the local run's namespaces) and one sfclab binary (`--sfclab`, default
target/release/sfclab)."""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import yaml


def run_deployed(sfclab, scenario, tester_core, vnf_core, extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sfclab, "deploy", "k8s", scenario], check=True, capture_output=True, text=True
        ).stdout
        objects = [o for o in yaml.safe_load_all(out) if o]
        config = os.path.join(tmp, "config")
        node = os.path.join(tmp, "node-memif")
        os.makedirs(config)
        os.makedirs(node)
        for o in objects:
            if o["kind"] == "ConfigMap":
                for key, text in o["data"].items():
                    with open(os.path.join(config, key), "w") as f:
                        f.write(text)

        def words(container, pod_dir):
            mounts = [("/run/sfclab/memif", node), ("/etc/sfclab", config), ("/run/sfclab", pod_dir)]
            ws = []
            for w in container["command"] + container.get("args", []):
                for a, b in mounts:
                    w = w.replace(a, b)
                ws.append(w)
            return [sfclab] + ws[1:]

        pods = []
        try:
            for o in objects:
                if o["kind"] != "Pod":
                    continue
                pod_dir = os.path.join(tmp, o["metadata"]["name"])
                os.makedirs(pod_dir)
                c = o["spec"]["containers"][0]
                p = subprocess.Popen(
                    ["taskset", "-c", str(vnf_core)] + words(c, pod_dir),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
                pods.append((p, words(c["readinessProbe"]["exec"], pod_dir)))
            deadline = time.time() + 30
            for _, probe in pods:
                while subprocess.run(probe).returncode != 0:
                    if time.time() > deadline:
                        sys.exit("a pod never said ready")
                    time.sleep(0.05)
            job = next(o for o in objects if o["kind"] == "Job")
            tester_dir = os.path.join(tmp, "tester")
            os.makedirs(tester_dir)
            c = job["spec"]["template"]["spec"]["containers"][0]
            result = subprocess.run(
                ["taskset", "-c", str(tester_core)] + words(c, tester_dir) + extra,
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                sys.exit("tester: " + result.stderr)
            return json.loads(result.stdout)
        finally:
            for p, _ in pods:
                p.send_signal(signal.SIGTERM)
            for p, _ in pods:
                p.communicate(timeout=20)


def run_local(sfclab, scenario, tester_core, vnf_core, extra):
    result = subprocess.run(
        # The tester takes the first core the VNFs do not (the tester core, default 0).
        [sfclab, "scenario", scenario, "--vnf-cores", str(vnf_core), "--json"] + extra,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit("local: " + result.stderr)
    return json.loads(result.stdout)


def mpps(doc):
    runs = doc["runs"]
    conserved = all(r["aggregate"]["conserved"] for r in runs)
    return statistics.median(r["aggregate"]["throughput_mpps"] for r in runs), conserved


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario")
    ap.add_argument("--sfclab", default="target/release/sfclab")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tester-core", type=int, default=0)
    ap.add_argument("--vnf-core", type=int, default=1)
    argv = sys.argv[1:]
    # After `--`: flags for both testers (--rate, --duration, ...).
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    a = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    a.extra = extra
    local, deployed = [], []
    for k in range(1, a.rounds + 1):
        for name, run, into in (("local", run_local, local), ("deployed", run_deployed, deployed)):
            m, conserved = mpps(run(a.sfclab, a.scenario, a.tester_core, a.vnf_core, a.extra))
            into.append(m)
            print(f"round {k} {name:8} {m:.4f} Mpps, conserved: {conserved}", flush=True)
            if not conserved:
                sys.exit(f"round {k} {name}: a chain did not conserve")
    ml, md = statistics.median(local), statistics.median(deployed)
    print(f"median: local {ml:.4f} Mpps, deployed (run here as a node runs it) {md:.4f} Mpps, ratio {md / ml:.3f}")


if __name__ == "__main__":
    main()
