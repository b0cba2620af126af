"""The P2 A/B table from p2_ab.sh's JSONs in a folder:
python p2_ab_summarize.py FOLDER "before label" "after label"
"""
import glob
import json
import os
import statistics
import sys

PARTS = ("driver_setup", "train_startup", "worker_imports", "trainer_build", "train_teardown", "train")


def read(folder, side):
    runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(folder, f"ab_{side}_*.json")))]
    agg = [r["aggregate"] for r in runs]
    return {"P2": [a["per_trial_overhead_s"]["median"] for a in agg],
            "P1": [a["throughput_ratio"]["median"] for a in agg],
            "fixed": [a["sweep_fixed_overhead_s"]["median"] for a in agg],
            **{p: [a["timeline_s"][p]["median"] for a in agg] for p in PARTS}}


def fmt(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}, {max(xs):.2f}]"


def main(folder, before_label, after_label):
    before, after = read(folder, "before"), read(folder, "after")
    print(f"| median [min, max] of 3 | {before_label} | {after_label} |\n|---|---|---|")
    for key in ("P2", "P1", "fixed", *PARTS):
        print(f"| {key} | {fmt(before[key])} | {fmt(after[key])} |")
    print("P2 per round, after/before:", [round(a / b, 2) for a, b in zip(after["P2"], before["P2"])])


if __name__ == "__main__":
    main(*sys.argv[1:4])
