"""The P2 A/B table from ab.sh's JSONs: python summarize.py (in this folder)."""
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
PARTS = ("driver_setup", "train_startup", "worker_imports", "trainer_build", "train_teardown", "train")


def read(side):
    runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(HERE, f"ab_{side}_*.json")))]
    agg = [r["aggregate"] for r in runs]
    return {"P2": [a["per_trial_overhead_s"]["median"] for a in agg],
            "P1": [a["throughput_ratio"]["median"] for a in agg],
            "fixed": [a["sweep_fixed_overhead_s"]["median"] for a in agg],
            **{p: [a["timeline_s"][p]["median"] for a in agg] for p in PARTS}}


def fmt(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]"


before, after = read("before"), read("after")
print("| median [min, max] of 3 | before (5f16145) | after (coordinator started by the sweep) |\n|---|---|---|")
for key in ("P2", "P1", "fixed", *PARTS):
    print(f"| {key} | {fmt(before[key])} | {fmt(after[key])} |")
print("P2 per round, after/before:", [round(a / b, 2) for a, b in zip(after["P2"], before["P2"])])
