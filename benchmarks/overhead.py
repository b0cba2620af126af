"""Overhead of running one trial inside ftplat versus plain ``Trainer.train()``.

Both sides train the same model on the same tokenized data with the same TrainingArguments
(built by ftplat's one builder), the same collator and metrics, and the same thread count.
The ftplat side is a real one-trial sweep on a local Ray cluster (Tune trial -> TorchTrainer
-> one Ray Train worker), started before timing (a cluster serves many trials).

Reported:
  throughput ratio    = ftplat train samples/s / plain train samples/s (HF's own train metrics;
                        train_runtime covers the whole train() call, evaluation and saves included)
  per-trial overhead  = (trial driver wall - ftplat train_runtime) - (plain wall - plain train_runtime):
                        what one trial costs beyond training (Train controller and worker start,
                        imports, process group, model load, checkpoint upload, MLflow run, teardown),
                        above what plain HF spends on loading the model and building the Trainer
  sweep fixed overhead = sweep wall - trial driver wall: Tune setup, starting the trial's actor,
                        summary, MLflow parent run, report plot and model registration, retention
                        (paid once per sweep, not per trial; tokenization is excluded on both sides)

Usage (about 3 minutes on 2 CPU cores):
  python benchmarks/overhead.py --model ../shared/models/all-MiniLM-L6-v2 --data ../shared/data/imdb
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import ray
import torch

from ftplat.config.loading import load_sweep_configs
from ftplat.data.preparation import build_tokenized_tables
from ftplat.ray_internals import run_init_private_cluster
from ftplat.train.modeling import build_model
from ftplat.tune.sweep import run_sweep

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import build_plain_trainer  # noqa: E402


def build_configs(a: argparse.Namespace, storage: str):
    return load_sweep_configs(None, None, [
        f"tracking.tracking_uri=sqlite:///{storage}/mlflow.db",
        f"model.name_or_path={a.model}", f"data.source={a.data}", f"data.max_length={a.max_length}",
        f"data.train_size={a.train_size}", f"data.eval_size={a.eval_size}",
        f"training.num_train_epochs={a.epochs}", "training.logging_steps=10",
        "training.per_device_eval_batch_size=64", f"training.learning_rate={a.lr}",
        f"resources.cpus_per_worker={a.threads}", "resources.max_concurrent_trials=1",
        f"storage.storage_path={storage}", "storage.sweep_name=overhead",
        "search.num_samples=1",
        f"search.parameters={{training.learning_rate: {{type: choice, values: [{a.lr:.6e}]}}}}",
    ])


def run_plain(job, data) -> dict:
    torch.set_num_threads(int(job.resources.cpus_per_worker))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        trainer = build_plain_trainer(job, data, out, model=build_model(job))
        output = trainer.train()
        wall = time.perf_counter() - start
    return {"wall_s": wall, "train_runtime_s": output.metrics["train_runtime"],
            "train_samples_per_s": output.metrics["train_samples_per_second"]}


def run_ftplat(job, space) -> dict:
    start = time.perf_counter()
    summary = run_sweep(job, space)
    wall = time.perf_counter() - start - summary.data["seconds"]
    result = summary.trials[0].train_result
    return {"wall_s": wall, "trial_driver_wall_s": result["driver_wall_s"],
            "train_runtime_s": result["train_runtime"],
            "train_samples_per_s": result["train_samples_per_second"],
            "winner_accuracy": summary.winner.score}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="../shared/models/all-MiniLM-L6-v2")
    p.add_argument("--data", default="../shared/data/imdb")
    p.add_argument("--train-size", type=int, default=512)
    p.add_argument("--eval-size", type=int, default=128)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=5.0e-5)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as storage:
        job, space = build_configs(a, storage)
        data = build_tokenized_tables(job)
        plain = run_plain(job, data)
        run_init_private_cluster(num_cpus=a.threads + 1, include_dashboard=False, logging_level="ERROR")
        try:
            ours = run_ftplat(job, space)
        finally:
            ray.shutdown()

    ratio = ours["train_samples_per_s"] / plain["train_samples_per_s"]
    overhead = (ours["trial_driver_wall_s"] - ours["train_runtime_s"]) - (plain["wall_s"] - plain["train_runtime_s"])
    fixed = ours["wall_s"] - ours["trial_driver_wall_s"]
    report = {"config": vars(a), "plain": plain, "ftplat": ours,
              "throughput_ratio": round(ratio, 4), "per_trial_overhead_s": round(overhead, 2),
              "sweep_fixed_overhead_s": round(fixed, 2),
              "torch": torch.__version__, "ray": ray.__version__, "cpus": os.cpu_count()}
    print(json.dumps(report, indent=2))
    print(f"\nthroughput ratio {ratio:.3f} (goal >= 0.97); per-trial overhead {overhead:.1f} s (goal <= 5 s); "
          f"sweep fixed overhead {fixed:.1f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
