"""The ab_packed pieces: sweep wall, each trial's train and overhead, per side."""
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
for side in ("before", "after"):
    runs = []
    for path in sorted(glob.glob(os.path.join(HERE, "ab_packed", f"{side}_*", "*.json"))):
        d = json.load(open(path))
        runs.append((os.path.basename(os.path.dirname(path)), d["wall_s"],
                     [t["timeline_s"]["train"] for t in d["trials"]], [t["timeline_s"]["overhead"] for t in d["trials"]]))
    for r in runs:
        print(side, r)
    if runs:
        med = lambda xs: (round(statistics.median(xs), 1), round(min(xs), 1), round(max(xs), 1))
        print(side, "wall", med([r[1] for r in runs]), "train", med([x for r in runs for x in r[2]]),
              "overhead", med([x for r in runs for x in r[3]]))
