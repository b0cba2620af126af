"""An A/B folder of ab.sh as a table: sweep wall, and each trial's train, overhead and start-up, per side.

  python summarize.py ab_train     # or ab_packed
"""
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
name = sys.argv[1] if len(sys.argv) > 1 else "ab_train"
for side in ("before", "after"):
    runs = []
    for path in sorted(glob.glob(os.path.join(HERE, name, f"{side}_*", "*.json"))):
        d = json.load(open(path))
        runs.append({"round": os.path.basename(os.path.dirname(path)), "wall_s": d["wall_s"],
                     **{f"{k}_s": [t["timeline_s"][k] for t in d["trials"]] for k in ("train", "overhead", "train_startup")}})
    for r in runs:
        print(side, r)
    if runs:
        med = lambda xs: (round(statistics.median(xs), 2), round(min(xs), 2), round(max(xs), 2))
        print(side, "wall", med([r["wall_s"] for r in runs]),
              *(f"{k} {med([x for r in runs for x in r[f'{k}_s']])}" for k in ("train", "overhead", "train_startup")))
