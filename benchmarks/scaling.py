"""Scaling of one trial: 1 vs 2 Ray Train workers, the same global batch.

A one-trial ftplat sweep (run_sweep, fixed learning rate) with
  --workers 1: one worker with --cpus CPUs (torch threads = CPUs), per-device batch 16
  --workers 2: two workers with --cpus/2 CPUs each (DDP over gloo), per-device batch 8
so the global batch (16) and the optimizer steps are the same. Reported per piece: HF's
train samples/s and train_runtime (one evaluation and one checkpoint save included), the
trial driver's wall time (worker start to teardown) and the whole sweep's wall time.

Pieces (a few minutes each on 2 CPU cores), then the aggregate + plot:
  python benchmarks/scaling.py --workers 1
  python benchmarks/scaling.py --workers 2
  python benchmarks/scaling.py --aggregate      # benchmarks/results/scaling/summary.json + scaling.png
  python benchmarks/scaling.py --full           # both, 1024 training reviews instead of 256
On a GPU machine (not measured here: no GPU was available), one GPU per worker:
  python benchmarks/scaling.py --full --use-gpu --cpus 8 --results benchmarks/results/scaling-gpu
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    DEFAULT_DATA, DEFAULT_MODEL, RESULTS, build_machine_record, read_pieces, write_validation_split,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--workers", type=int, choices=(1, 2), help="run one piece")
    what.add_argument("--full", action="store_true", help="both pieces with --train-size 1024, then aggregate")
    what.add_argument("--aggregate", action="store_true")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--train-size", type=int, default=256)
    p.add_argument("--eval-size", type=int, default=128)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--cpus", type=int, default=2, help="CPUs of one trial, split over its workers")
    p.add_argument("--use-gpu", action="store_true", help="one GPU per worker")
    p.add_argument("--lr", type=float, default=5.0e-5)
    p.add_argument("--results", default=os.path.join(RESULTS, "scaling"))
    return p


def build_overrides(a: argparse.Namespace, workers: int, storage: str, data_dir: str) -> list[str]:
    if a.global_batch % workers or a.cpus % workers:
        raise ValueError(f"--global-batch {a.global_batch} and --cpus {a.cpus} must divide by {workers} workers")
    out = [
        "tracking.enabled=false",
        f"model.name_or_path={a.model}", f"data.source={data_dir}", "data.eval_split=validation",
        # The data folder has a test split: scoring the winner on its 25,000 reviews (since
        # the validation protocol of #16) is not part of what these benchmarks compare.
        "data.test_split=null",
        f"data.max_length={a.max_length}", f"data.train_size={a.train_size}", f"data.eval_size={a.eval_size}",
        "training.num_train_epochs=1", "training.logging_steps=10", "training.save_total_limit=1",
        f"training.per_device_train_batch_size={a.global_batch // workers}",
        "training.per_device_eval_batch_size=64", f"training.learning_rate={a.lr:.6e}",
        f"resources.num_workers={workers}", f"resources.cpus_per_worker={a.cpus // workers}",
        "resources.max_concurrent_trials=1",
        f"storage.storage_path={storage}", f"storage.sweep_name=scaling-{workers}w",
        "search.num_samples=1",
        f"search.parameters={{training.learning_rate: {{type: choice, values: [{a.lr:.6e}]}}}}",
    ]
    if a.use_gpu:
        out += ["resources.use_gpu=true", "resources.gpus_per_worker=1"]
    return out


def run_piece(a, workers: int) -> dict:
    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    data_dir = write_validation_split(a.data, os.path.join(tempfile.gettempdir(), "ftplat-bench-imdb"),
                                      validation_rows=2000, seed=0)
    machine = build_machine_record()
    with tempfile.TemporaryDirectory(prefix="ftplat-scaling-") as storage:
        job, space = load_sweep_configs(None, None, build_overrides(a, workers, storage, data_dir))
        start = time.perf_counter()
        summary = run_sweep(job, space)
        wall = time.perf_counter() - start
    trial = summary.trials[0]
    r = trial.train_result
    piece = {"workers": workers, "machine": machine,
             "config": {k: v for k, v in vars(a).items() if k not in ("full", "aggregate")},
             "train_samples_per_s": r["train_samples_per_second"], "train_runtime_s": r["train_runtime"],
             "trial_driver_wall_s": r["driver_wall_s"], "sweep_wall_s": round(wall, 1),
             "tokenize_s": summary.data["seconds"], "world_size": r.get("world_size"),
             "global_step": r.get("global_step"), "eval_accuracy": trial.scores["last"],
             "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}
    os.makedirs(a.results, exist_ok=True)
    with open(os.path.join(a.results, f"workers{workers}.json"), "w") as f:
        json.dump(piece, f, indent=2)
    print(f"{workers} worker(s): {piece['train_samples_per_s']:.2f} samples/s, train {piece['train_runtime_s']:.1f} s, "
          f"trial {piece['trial_driver_wall_s']:.1f} s, sweep {piece['sweep_wall_s']:.1f} s", flush=True)
    return piece


def aggregate(pieces: list[dict]) -> dict:
    by = {p["workers"]: p for p in pieces}
    loads = [x for w in by for x in (by[w]["machine"]["load_avg_at_start"][0], by[w]["load_avg_at_end"][0])]
    out = {"cpus": by[min(by)]["machine"]["cpus"], "load_avg_min": min(loads), "load_avg_max": max(loads),
           "pieces": {w: {k: by[w][k] for k in ("train_samples_per_s", "train_runtime_s", "trial_driver_wall_s",
                                                  "sweep_wall_s", "global_step", "eval_accuracy")} for w in sorted(by)}}
    if 1 in by and 2 in by:
        out["speedup_samples_per_s"] = by[2]["train_samples_per_s"] / by[1]["train_samples_per_s"]
        out["trial_wall_ratio_2_over_1"] = by[2]["trial_driver_wall_s"] / by[1]["trial_driver_wall_s"]
    return out


def write_plot(agg: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = sorted(agg["pieces"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 3.6))
    ax1.bar([str(w) for w in ws], [agg["pieces"][w]["train_samples_per_s"] for w in ws], color="tab:blue")
    ax1.set_xlabel("workers per trial")
    ax1.set_ylabel("train samples/s (HF)")
    ax1.set_title("throughput")
    x = range(len(ws))
    ax2.bar([i - 0.2 for i in x], [agg["pieces"][w]["train_runtime_s"] for w in ws], 0.4, label="train() runtime")
    ax2.bar([i + 0.2 for i in x], [agg["pieces"][w]["trial_driver_wall_s"] for w in ws], 0.4, label="trial wall")
    ax2.set_xticks(list(x), [str(w) for w in ws])
    ax2.set_xlabel("workers per trial")
    ax2.set_ylabel("seconds")
    ax2.set_title("one trial")
    ax2.set_ylim(top=max(agg["pieces"][w]["trial_driver_wall_s"] for w in ws) * 1.3)
    ax2.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"One trial, 1 vs 2 workers, same global batch, {agg['cpus']} CPU cores, "
                 f"1-min load average {agg['load_avg_min']}-{agg['load_avg_max']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_aggregate(results: str) -> dict:
    pieces = read_pieces(results, "workers*.json", "run --workers 1 / --workers 2 first")
    agg = aggregate(pieces)
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump(agg, f, indent=2)
    write_plot(agg, os.path.join(results, "scaling.png"))
    print(json.dumps(agg, indent=2))
    return agg


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.workers:
        run_piece(a, a.workers)
    elif a.full:
        if a.train_size == 256:
            a.train_size = 1024
        for w in (1, 2):
            run_piece(a, w)
        run_aggregate(a.results)
    else:
        run_aggregate(a.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
