"""Which processes a real ftplat trial starts, and how long each spends importing Python modules.

A FIFO sweep of ``--trials`` one-epoch tiny-BERT trials (the test suite's tiny assets, 256
train / 64 held-out rows, 1 CPU a worker, a dashboard like the main command's) runs in a fresh
process on its own local cluster, with ``PYTHONPROFILEIMPORTTIME=1`` in the environment every
Ray process inherits. Each process's import report (its worker ``.err`` log) gives the seconds
spent in top-level imports and the heaviest of them; processes are named by their Ray actor or
task. Import times are wall-clock inside processes that start side by side on the same cores,
so they include waiting for a core. ``--env KEY=VALUE`` sets a variable in the sweep's
environment first (the trial driver passes Train's own variables on to its actors):

  python benchmarks/trial_imports.py --trials 2 --json /tmp/trial_imports.json
  python benchmarks/trial_imports.py --trials 2 --env RAY_TRAIN_ENABLE_PREEMPTION_WATCHER=0
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import parse_env  # noqa: E402

#: ``-X importtime`` lines: "import time: self [us] | cumulative | <indent>package".
IMPORT_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|( +)(\S+)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--env", type=parse_env, action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", help="write the whole report here")
    p.add_argument("--one", metavar="RAY_TMPDIR", help=argparse.SUPPRESS)
    return p


def read_import_report(lines: list[str], top: int = 5) -> dict:
    """Seconds in top-level imports (cumulative, nested ones inside them) and the heaviest."""
    tops = []
    for line in lines:
        m = IMPORT_LINE.match(line)
        if m and len(m.group(2)) == 1:
            tops.append((int(m.group(1)) / 1e6, m.group(3)))
    heaviest = sorted(tops, reverse=True)[:top]
    return {"import_s": round(sum(s for s, _ in tops), 2), "heaviest": {name: round(s, 2) for s, name in heaviest}}


def read_process_name(out_lines: list[str]) -> str:
    for line in out_lines:
        if line.startswith((":actor_name:", ":task_name:")):
            return line.split(":", 2)[2].strip()
    return "idle worker"


def read_session_imports(session_logs: str) -> list[dict]:
    """One record per Ray worker process of the session that imported anything."""
    processes = []
    for err in sorted(glob.glob(os.path.join(session_logs, "worker-*.err"))):
        with open(err, errors="replace") as f:
            report = read_import_report(f.read().splitlines())
        out = err[:-len(".err")] + ".out"
        name = "idle worker"
        if os.path.exists(out):
            with open(out, errors="replace") as f:
                name = read_process_name(f.read().splitlines())
        if report["import_s"] > 0:
            processes.append({"process": name, **report})
    return processes


def build_aggregate(processes: list[dict], trials: int) -> dict:
    """Per process name: how many started per trial and the median of their import seconds."""
    by_name: dict[str, list[float]] = defaultdict(list)
    for p in processes:
        by_name[p["process"]].append(p["import_s"])
    rows = {}
    for name, seconds in sorted(by_name.items(), key=lambda kv: -sum(kv[1])):
        seconds = sorted(seconds)
        rows[name] = {"per_trial": round(len(seconds) / trials, 2), "import_s_median": seconds[len(seconds) // 2],
                      "import_s_total": round(sum(seconds), 2)}
    return {"processes": rows, "import_s_per_trial": round(sum(p["import_s"] for p in processes) / trials, 2)}


def run_one(a: argparse.Namespace) -> dict:
    """The sweep, in this process; its cluster's session folder is under ``a.one``."""
    from _common import run_tiny_sweep

    summary, _, _ = run_tiny_sweep("imports", a.trials)
    return {"status": [t.status for t in summary.trials], "trial_wall_s": [t.cost["wall_s"] for t in summary.trials]}


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a)))
        return 0
    from _common import build_machine_record, write_report

    # A short folder of our own: Ray's session (and its unix sockets) goes there, nowhere else.
    ray_tmp = tempfile.mkdtemp(prefix="ti-", dir="/tmp")
    env = {**os.environ, **dict(a.env), "PYTHONPROFILEIMPORTTIME": "1", "RAY_TMPDIR": ray_tmp}
    machine = build_machine_record()
    cmd = [sys.executable, os.path.abspath(__file__), "--trials", str(a.trials), "--one", ray_tmp]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the sweep failed:\n{out.stderr[-3000:]}")
    sweep = json.loads(out.stdout.strip().splitlines()[-1])
    sessions = sorted(glob.glob(os.path.join(ray_tmp, "ray", "session_2*")) + glob.glob(os.path.join(ray_tmp, "session_2*")))
    assert len(sessions) == 1, f"expected one Ray session under {ray_tmp}, found {sessions}"
    processes = read_session_imports(os.path.join(sessions[0], "logs"))
    report = {"config": {**vars(a), "env": dict(a.env)}, "machine": machine, "sweep": sweep, "processes": processes,
              "aggregate": build_aggregate(processes, a.trials)}
    write_report(report, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
