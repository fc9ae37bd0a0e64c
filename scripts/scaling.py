#!/usr/bin/python3
"""The scaling picture of the main job: the data-parallel training example run for 1, 2, 4 and 8
emulated devices (and, with --mpi, 2 processes x 4 devices and 2 processes x 1 device with a
core each), each with a timeline (SPMD_TRACE).

For every configuration it measures the throughput (the example's samples/s) and, from the
timeline, how the devices' time splits: compute (their programs, collectives excluded),
communication (inside collectives, moving and reducing data) and wait (inside collectives,
waiting for the other devices or processes to arrive). Writes scaling.csv and scaling.png
(speed-up against devices with the ideal line; a stacked bar of the three shares per
configuration) into --out and prints the table.

  scripts/scaling.py --example build/examples/mnist_data_parallel [--devices 1 2 4 8]
                     [--train-limit 25600] [--mpi] [--out build/scaling]
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys


def shares(trace_paths):
    """(compute, communication, wait) shares of the devices' time, from Chrome trace events."""
    compute = collective = wait = epilogue = 0.0
    for path in trace_paths:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        for e in events:
            if e.get("ph") != "X" or not 0 <= e.get("tid", -1) < 1000:
                continue  # host spans, metadata, communication threads (overlapped all-reduces)
            name, dur = e["name"], float(e["dur"])
            if name == "compute":
                compute += dur
            elif name == "collective":
                collective += dur
            elif name in ("collective wait", "exchange wait"):
                wait += dur
            elif name == "epilogue":  # an all-reduce's shared update: computing inside it
                epilogue += dur
    if compute <= 0:
        return (1.0, 0.0, 0.0)
    # Waits happen inside collectives; collectives inside the devices' compute spans.
    epilogue = min(epilogue, collective)
    collective -= epilogue
    wait = min(wait, collective)
    return ((compute - collective) / compute, (collective - wait) / compute, wait / compute)


def run(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit("failed: %s\n%s%s" % (" ".join(cmd), out.stdout, out.stderr))
    rates = re.findall(r"samples/s=([0-9.]+)", out.stdout)
    if not rates:
        sys.exit("no samples/s in the output of %s:\n%s" % (" ".join(cmd), out.stdout))
    return float(rates[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--example", required=True, help="the mnist_data_parallel binary")
    p.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--train-limit", type=int, default=25600)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--mpi", action="store_true",
                   help="also 2 processes x 4 devices and 2 x 1 (a core each) under mpirun")
    p.add_argument("--out", default="scaling")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    common = ["--epochs", "1", "--train-limit", str(a.train_limit), "--test-limit", "1000",
              "--batch-size", str(a.batch_size), "--no-progress"]
    configs = [(1, d) for d in a.devices]
    if a.mpi and shutil.which("mpirun"):
        configs += [(2, 4), (2, 1)]
    rows = []
    for procs, devs in configs:
        trace = os.path.join(a.out, "trace_%dx%d.json" % (procs, devs))
        env = dict(os.environ, SPMD_TRACE=trace)
        if procs == 1:
            rate = run([a.example, "--devices", str(devs)] + common, env)
            traces = [trace]
        else:
            env["SPMD_CPU_DEVICES"] = str(devs)
            if devs == 1:  # a core each: the processes' large collectives read each other's buffers
                env["SPMD_CPU_THREADS"] = "1"
            rate = run(["mpirun", "-np", str(procs), "--allow-run-as-root", "--oversubscribe",
                        a.example, "--devices", str(devs)] + common, env)
            base = trace[: -len(".json")]
            traces = ["%s.p%d.json" % (base, k) for k in range(procs)]
        c, m, w = shares(traces)
        rows.append({"processes": procs, "devices": procs * devs, "samples_per_s": rate,
                     "compute": c, "communication": m, "wait": w})
    base_rate = rows[0]["samples_per_s"]
    for r in rows:
        r["speedup"] = r["samples_per_s"] / base_rate
    csv_path = os.path.join(a.out, "scaling.csv")
    fields = ["processes", "devices", "samples_per_s", "speedup", "compute", "communication", "wait"]
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    print("%-22s %12s %9s %9s %14s %7s" % ("configuration", "samples/s", "speed-up", "compute",
                                            "communication", "wait"))
    for r in rows:
        label = "%d process%s x %d" % (r["processes"], "es" if r["processes"] > 1 else "",
                                        r["devices"] // r["processes"])
        print("%-22s %12.0f %9.2f %8.0f%% %13.0f%% %6.0f%%" % (
            label, r["samples_per_s"], r["speedup"], 100 * r["compute"],
            100 * r["communication"], 100 * r["wait"]))
    print("wrote", csv_path)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (Debian's python3-matplotlib): no plot")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    single = [r for r in rows if r["processes"] == 1]
    xs = [r["devices"] for r in single]
    left.plot(xs, [r["speedup"] for r in single], "o-", label="spmd (one process)")
    left.plot(xs, [x / xs[0] for x in xs], "--", color="gray", label="ideal")
    for r in rows:
        if r["processes"] > 1:
            left.plot([r["devices"]], [r["speedup"]], "s",
                      label="%d processes x %d" % (r["processes"], r["devices"] // r["processes"]))
    left.set_xlabel("devices")
    left.set_ylabel("speed-up over %d device%s" % (xs[0], "s" if xs[0] > 1 else ""))
    left.set_xticks(sorted(set(r["devices"] for r in rows)))
    left.set_title("throughput at a global batch of %d" % a.batch_size)
    left.legend()
    labels = ["%dx%d" % (r["processes"], r["devices"] // r["processes"]) for r in rows]
    bottom = [0.0] * len(rows)
    for key, color in (("compute", "tab:blue"), ("communication", "tab:orange"), ("wait", "tab:red")):
        vals = [100 * r[key] for r in rows]
        right.bar(labels, vals, bottom=bottom, label=key, color=color)
        bottom = [b + v for b, v in zip(bottom, vals)]
    right.set_ylabel("% of the devices' time")
    right.set_xlabel("processes x devices")
    right.set_title("where the devices' time goes")
    right.legend()
    fig.tight_layout()
    png = os.path.join(a.out, "scaling.png")
    fig.savefig(png, dpi=90)
    print("wrote", png)


if __name__ == "__main__":
    main()
