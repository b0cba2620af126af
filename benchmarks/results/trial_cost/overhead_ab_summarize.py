"""An overhead.py A/B's table (FOLDER/{before,after}_{1,2,3}.json, one pair each): per round and
side, P1, steady pace, P2, time in report, train and the trial's start-up and teardown, then each side's median [min, max]:
python overhead_ab_summarize.py FOLDER"""
import json
import statistics
import sys

out = sys.argv[1]
keys = ("throughput_ratio", "steady_step_ratio", "per_trial_overhead_s", "report_s")
rows = {}
for side in ("before", "after"):
    for rnd in (1, 2, 3):
        r = json.load(open(f"{out}/{side}_{rnd}.json"))
        agg = r["aggregate"]
        row = {k: agg[k]["median"] for k in keys}
        row["train_s"] = agg["timeline_s"]["train"]["median"]
        row["train_startup_s"] = agg["timeline_s"]["train_startup"]["median"]
        row["train_teardown_s"] = agg["timeline_s"]["train_teardown"]["median"]
        row["load"] = r["machine"]["load_avg_at_start"][0]
        rows.setdefault(side, []).append(row)
        print(side, rnd, row)
for side, rs in rows.items():
    print(side, {k: (round(statistics.median(r[k] for r in rs), 3), min(r[k] for r in rs), max(r[k] for r in rs))
                 for k in (*keys, "train_s", "train_startup_s", "train_teardown_s")})
