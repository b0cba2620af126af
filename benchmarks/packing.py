"""Packing concurrent trials on a multi-node cluster, simulated on this machine.

``ray.cluster_utils.Cluster`` starts a head node that runs no work (0 CPUs, as on a real
cluster whose head only hosts the sweep's driver) and ``--nodes`` worker nodes of
``--cpus-per-node`` logical CPUs each, every one a raylet of its own on this host; the sweep
connects to it through ``RAY_ADDRESS`` as it would to a real cluster. A random-search sweep of
``--trials`` one-epoch trials of a tiny BERT (the test suite's assets: 256 train / 64
held-out synthetic rows, max_length 32) runs with ``resources.max_concurrent_trials`` set to
``--concurrent``, once for each layout given as ``WORKER:DRIVER`` (``resources.cpus_per_worker``
and ``resources.trial_driver_cpus``: a trial reserves its driver's CPUs plus one worker's).

For each layout the report gives where each trial's worker ran (its node), when each trial
ran (from Tune's result rows and the trial's wall), the most trials running at once on the
cluster and on each node, against what the reservations allow, and the sweep's wall:

  python benchmarks/packing.py --nodes 2 --cpus-per-node 2 --trials 8 --concurrent 4 \\
      --layouts 1.0:0.25 0.75:0.25 1.0:0 --json benchmarks/results/trial_cost/packing_multinode.json

Logical CPUs are scheduling slots: every node shares this machine's cores, so the walls show
the scheduling, not the speed of a real cluster.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=2, help="worker nodes (the head runs no trials)")
    p.add_argument("--cpus-per-node", type=int, default=2)
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--concurrent", type=int, default=4, help="resources.max_concurrent_trials")
    p.add_argument("--layouts", type=parse_layout, nargs="+", default=[(1.0, 0.25), (0.75, 0.25), (1.0, 0.0)],
                   metavar="WORKER:DRIVER", help="resources.cpus_per_worker:resources.trial_driver_cpus")
    p.add_argument("--json", help="write the whole report here")
    return p


def parse_layout(text: str) -> tuple[float, float]:
    try:
        worker, driver = (float(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WORKER:DRIVER CPUs such as 1.0:0.25, got {text!r}") from None
    if worker <= 0 or driver < 0:
        raise argparse.ArgumentTypeError(f"a worker needs more than 0 CPUs and a driver 0 or more, got {text!r}")
    return worker, driver


def count_allowed(a: argparse.Namespace, cpus_per_worker: float, driver_cpus: float) -> int:
    """Trials the reservations let run at once: every trial's driver and worker each on some
    node (a driver may share a node with another trial's worker; counted first fit, workers
    first), at most ``--concurrent``."""
    slots = [float(a.cpus_per_node)] * a.nodes
    placed = 0
    while placed < a.concurrent:
        # first fit, largest pieces first: a worker, then its driver
        for need in (cpus_per_worker, driver_cpus):
            node = next((i for i, free in enumerate(slots) if free + 1e-9 >= need), None)
            if node is None:
                return placed
            slots[node] -= need
        placed += 1
    return placed


#: The parts of a trial's timeline (``train_result.timeline_s``) before its training starts.
BEFORE_TRAINING = ("driver_setup", "train_startup", "worker_imports", "trainer_build")


def read_trial_windows(sweep_dir: Path, summary) -> list[dict]:
    """Each trial's worker node, its [start, end] in seconds since the sweep's first trial
    began (start from Tune's first result row: its timestamp less the trial's time so far; end:
    that start plus the trial's wall), and within it the window ``Trainer.train()`` ran
    (``train_start``, ``train_end``, from the trial's timeline): a trial whose workers wait for
    room has started but not yet trained."""
    rows = {}
    for path in glob.glob(str(sweep_dir / "*" / "result.json")):
        with open(path) as f:
            first = json.loads(f.readline())
        rows[first["trial_id"]] = first
    windows = []
    for t in summary.trials:
        first = rows[t.trial_id]
        start = first["timestamp"] - first["time_total_s"]
        parts = (t.train_result or {})["timeline_s"]
        train_start = start + sum(parts[name] for name in BEFORE_TRAINING)
        windows.append({"trial_id": t.trial_id, "node_id": (t.train_result or {}).get("node_id"),
                        "start": start, "end": start + t.cost["wall_s"], "train_start": train_start,
                        "train_end": train_start + parts["train"], "status": t.status})
    origin = min(w["start"] for w in windows)
    for w in windows:
        for key in ("start", "end", "train_start", "train_end"):
            w[key] = round(w[key] - origin, 1)
    return sorted(windows, key=lambda w: w["start"])


def count_most_at_once(windows: list[dict], start: str = "train_start", end: str = "train_end") -> int:
    """The most windows open at one moment (a window ending as another starts is not both)."""
    events = sorted([(w[start], 1) for w in windows] + [(w[end], -1) for w in windows])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def run_layout(a: argparse.Namespace, cpus_per_worker: float, driver_cpus: float, root: Path, model: Path,
               data: Path) -> dict:
    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    name = f"packing-{cpus_per_worker:g}-{driver_cpus:g}".replace(".", "_")
    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={model}", f"data.source={data}", f"storage.storage_path={root}/storage",
        f"storage.sweep_name={name}", "data.max_length=32", "data.eval_split=test", "data.test_split=null",
        "training.num_train_epochs=1.0", "tracking.enabled=false", f"search.num_samples={a.trials}",
        "search.seed=1", "search.algorithm=random", "search.scheduler={type: fifo}",
        f"resources.max_concurrent_trials={a.concurrent}", f"resources.cpus_per_worker={cpus_per_worker}",
        f"resources.trial_driver_cpus={driver_cpus}",
        "search.parameters={training.learning_rate: {type: loguniform, low: 1.0e-4, high: 3.0e-2}}"])
    start = time.perf_counter()
    summary = run_sweep(job, space)
    wall = time.perf_counter() - start
    windows = read_trial_windows(root / "storage" / name, summary)
    by_node: dict[str, list[dict]] = {}
    for w in windows:
        by_node.setdefault(w["node_id"], []).append(w)
    return {
        "cpus_per_worker": cpus_per_worker,
        "trial_driver_cpus": driver_cpus,
        "cpus_per_trial": driver_cpus + cpus_per_worker,
        "allowed_at_once": count_allowed(a, cpus_per_worker, driver_cpus),
        "most_training_at_once": count_most_at_once(windows),
        "most_started_at_once": count_most_at_once(windows, "start", "end"),
        "most_training_at_once_per_node": {node[:8]: count_most_at_once(ws) for node, ws in by_node.items()},
        "trials_per_node": {node[:8]: len(ws) for node, ws in by_node.items()},
        "status": sorted({w["status"] for w in windows}),
        "sweep_wall_s": round(wall, 1),
        "trial_wall_s_median": sorted(t.cost["wall_s"] for t in summary.trials)[len(summary.trials) // 2],
        "windows": windows,
    }


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.nodes < 1 or a.cpus_per_node < 1 or a.trials < 1 or a.concurrent < 1:
        build_parser().error("--nodes, --cpus-per-node, --trials and --concurrent must be at least 1")
    sys.path.insert(0, os.path.dirname(HERE))
    import ray
    from ray.cluster_utils import Cluster

    from _common import build_machine_record, write_report
    from tests.support.tiny_assets import write_sentiment_dataset, write_tiny_bert

    machine = build_machine_record()
    layouts = []
    with tempfile.TemporaryDirectory(prefix="packing-") as tmp:
        root = Path(tmp)
        model = write_tiny_bert(root / "model")
        data = write_sentiment_dataset(root / "data", 256, 64)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        try:
            for _ in range(a.nodes):
                cluster.add_node(num_cpus=a.cpus_per_node)
            cluster.wait_for_nodes()
            os.environ["RAY_ADDRESS"] = cluster.address
            for cpus_per_worker, driver_cpus in a.layouts:
                layout = run_layout(a, cpus_per_worker, driver_cpus, root, model, data)
                layouts.append(layout)
                print(f"cpus_per_worker {cpus_per_worker:g}, trial_driver_cpus {driver_cpus:g}: "
                      f"{layout['most_training_at_once']} trials training at once "
                      f"({layout['most_started_at_once']} started; reservations allow "
                      f"{layout['allowed_at_once']}), per node {layout['most_training_at_once_per_node']}, "
                      f"sweep {layout['sweep_wall_s']} s", flush=True)
                ray.shutdown()  # the sweep connected; the next one connects again
        finally:
            os.environ.pop("RAY_ADDRESS", None)
            ray.shutdown()
            cluster.shutdown()
    report = {"config": {**vars(a), "layouts": [f"{w:g}:{d:g}" for w, d in a.layouts]}, "machine": machine,
              "load_avg_at_end": [round(x, 2) for x in os.getloadavg()], "layouts": layouts,
              "aggregate": [{k: v for k, v in lay.items() if k != "windows"} for lay in layouts]}
    write_report(report, a.json)
    return 0 if all(lay["status"] == ["TERMINATED"] for lay in layouts) else 1


if __name__ == "__main__":
    sys.exit(main())
