"""The ab_train pieces as a table: sweep wall, and each trial's train and overhead, per side."""
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
rows = {"after": [], "before": []}
for path in sorted(glob.glob(os.path.join(HERE, "ab_train", "*", "*.json"))):
    side_round = os.path.basename(os.path.dirname(path))
    side = side_round.split("_")[0]
    d = json.load(open(path))
    trials = d["trials"]
    rows[side].append({"round": side_round, "wall_s": d["wall_s"],
                       "train_s": [t["timeline_s"]["train"] for t in trials],
                       "overhead_s": [t["timeline_s"]["overhead"] for t in trials],
                       "train_startup_s": [t["timeline_s"]["train_startup"] for t in trials]})
for side, runs in rows.items():
    for r in runs:
        print(side, r)
    flat = lambda k: [x for r in runs for x in r[k]]
    med = lambda xs: (round(statistics.median(xs), 2), round(min(xs), 2), round(max(xs), 2))
    print(side, "wall", med([r["wall_s"] for r in runs]), "train", med(flat("train_s")),
          "overhead", med(flat("overhead_s")), "train_startup", med(flat("train_startup_s")))
