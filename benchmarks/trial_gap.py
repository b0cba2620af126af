"""Time between trials: a FIFO sweep of short trials, its wall against the sum of its trials' walls.

A sweep of 6 one-epoch trials of a tiny BERT (built from a config, 256 train / 64 held-out
synthetic sentiment rows, max_length 32; 1 CPU a worker), each sweep in a fresh process on its
own local cluster. What the trials themselves take (driver start to result written,
``cost.wall_s``) is subtracted from the sweep's wall: the rest is the sweep's fixed cost plus
what happens between trials (Tune starting the next trial's driver process). With
``--compare SRC`` the same sweeps run with another ftplat source root, interleaved:

  python benchmarks/trial_gap.py --repeats 3 --compare /tmp/before/platform --json /tmp/trial_gap.json

``--tracking`` tracks the sweeps in MLflow (a sqlite file beside the sweep), as the README's
main command does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compare", help="another ftplat source root (a checkout's platform/ folder)")
    p.add_argument("--json", help="write the whole report here")
    p.add_argument("--tracking", action="store_true", help="MLflow on a local sqlite file (default: no tracking)")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    return p


def run_one(a: argparse.Namespace) -> dict:
    """One sweep in this process (the code on PYTHONPATH); the tiny assets of the test suite."""
    import ftplat
    from _common import run_tiny_sweep

    summary, wall, timelines = run_tiny_sweep("gap", a.trials, tracking=a.tracking)
    trial_walls = [t.cost["wall_s"] for t in summary.trials]
    return {"code": os.path.dirname(ftplat.__file__), "wall_s": round(wall, 1), "trial_wall_s": trial_walls,
            "outside_trials_s": round(wall - sum(trial_walls), 1), "status": [t.status for t in summary.trials],
            "timelines_s": timelines}


def summarize_timelines(runs: list[dict]) -> dict:
    """Each timeline part over every trial of every sweep (median, min, max)."""
    from _common import summarize

    parts = [t for r in runs for t in r.get("timelines_s") or [] if t]
    names = sorted({k for t in parts for k in t})
    return {k: summarize([t.get(k) for t in parts]) for k in names}


def run_in_process(a: argparse.Namespace, source_root: str | None) -> dict:
    from _common import run_json_process

    return run_json_process([sys.executable, os.path.abspath(__file__), "--one", "--trials", str(a.trials),
                             *(["--tracking"] if a.tracking else [])], source_root)


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a)))
        return 0
    from _common import build_machine_record, summarize, write_report

    machine = build_machine_record()
    trees = {"this tree": None, **({f"compare ({a.compare})": a.compare} if a.compare else {})}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for i in range(a.repeats):
        for name, root in trees.items():
            r = run_in_process(a, root)
            runs[name].append(r)
            print(f"{i + 1}/{a.repeats} {name}: sweep {r['wall_s']} s, outside the trials {r['outside_trials_s']} s",
                  flush=True)
    report = {"config": {k: v for k, v in vars(a).items() if k != "one"}, "machine": machine,
              "load_avg_at_end": [round(x, 2) for x in os.getloadavg()], "runs": runs,
              "aggregate": {name: {"wall_s": summarize([r["wall_s"] for r in rs]),
                                   "outside_trials_s": summarize([r["outside_trials_s"] for r in rs]),
                                   "timeline_s": summarize_timelines(rs)}
                            for name, rs in runs.items()}}
    write_report(report, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
