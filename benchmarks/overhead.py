"""Cost of one trial inside ftplat versus plain ``Trainer.train()`` (issue #18: P1, P2, storage).

Both sides train the same model on the same tokenized data with the same TrainingArguments
(built by ftplat's one builder), the same collator and metrics, and the same thread count.
The ftplat side is a real one-trial sweep on a local Ray cluster (Tune trial -> Train V2 trainer
-> one Ray Train worker), started once before timing (a cluster serves many trials). The two
run in pairs, interleaved (plain, ftplat, plain, ftplat, ...), and the report gives each
ratio's median over the pairs with its spread, and the load average around every run.

Reported per pair, then as median [min, max]:
  P1 throughput ratio = ftplat train samples/s / plain train samples/s (HF's own train metrics;
                        train_runtime covers the whole train() call, evaluation and saves included)
  steady pace ratio   = plain's mean step time after the 20th step / ftplat's (both clocked by
                        ftplat's step clock): P1 without the first steps' start-up
  P2 per-trial overhead = (trial driver wall - ftplat train_runtime) - (plain wall - plain train_runtime):
                        what one trial costs beyond training, above what plain HF spends on
                        loading the model and building the Trainer; with ftplat's own timeline
                        of the trial (``timeline_s``: start-up, Trainer build, teardown, ...)
  storage             = the trial's folder in storage after retention / its model's bytes
                        (goal: a finished trial keeps <= 1.2x its model)
  sweep fixed overhead = sweep wall - trial driver wall (paid once per sweep, not per trial)

CPU (about 3 minutes a pair on 2 cores):
  python benchmarks/overhead.py --repeats 3 --json /tmp/overhead.json
GPU (issue #18's setting: a bert-base-sized model, random init, max_length 160, bf16, batch 32):
  python benchmarks/overhead.py --use-gpu --repeats 3 --json /tmp/overhead_gpu.json
  python benchmarks/overhead.py --use-gpu --repeats 3 --plain-process fresh --json /tmp/overhead_gpu_fresh.json
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import ray
import torch

from ftplat.config.loading import load_sweep_configs
from ftplat.data.preparation import build_tokenized_tables
from ftplat.ray_internals import run_init_private_cluster
from ftplat.train.modeling import build_model
from ftplat.train.step_time import StepTimeCallback
from ftplat.tune.sweep import run_sweep

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    DEFAULT_DATA, DEFAULT_MODEL, build_machine_record, build_plain_trainer, summarize, write_bert_base,
    write_report,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None,
                   help=f"model folder or hub id (default {DEFAULT_MODEL}; with --use-gpu a bert-base-sized "
                        "model with random weights and this model's tokenizer)")
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--train-size", type=int, default=None, help="default 512 (CPU), 8192 (GPU)")
    p.add_argument("--eval-size", type=int, default=None, help="default 128 (CPU), 1024 (GPU)")
    p.add_argument("--max-length", type=int, default=None, help="default 128 (CPU), 160 (GPU)")
    p.add_argument("--batch-size", type=int, default=None, help="default 16 (CPU), 32 (GPU)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=5.0e-5)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--use-gpu", action="store_true", help="one GPU per side, bf16")
    p.add_argument("--repeats", type=int, default=3, help="interleaved plain/ftplat pairs")
    p.add_argument("--plain-process", choices=("same", "fresh"), default="same",
                   help="same: every plain run in this process (on a GPU only its first run is cold); "
                        "fresh: each plain run in a new process, cold as each ftplat trial's worker is")
    p.add_argument("--storage-root", help="where the sweep's storage goes (default: the temp folder, which "
                                            "shares a filesystem with the workers' scratch: checkpoints are "
                                            "hard-linked; /dev/shm, an NFS mount or another disk: Ray copies them)")
    p.add_argument("--json", help="also write the results here")
    return p


def resolve_defaults(a: argparse.Namespace) -> argparse.Namespace:
    gpu = a.use_gpu
    for name, cpu, on_gpu in (("train_size", 512, 8192), ("eval_size", 128, 1024), ("max_length", 128, 160),
                              ("batch_size", 16, 32)):
        if getattr(a, name) is None:
            setattr(a, name, on_gpu if gpu else cpu)
    return a


def build_configs(a: argparse.Namespace, storage: str, model: str):
    overrides = [
        f"tracking.tracking_uri=sqlite:///{storage}/mlflow.db",
        f"model.name_or_path={model}", f"data.source={a.data}", f"data.max_length={a.max_length}",
        f"data.train_size={a.train_size}", f"data.eval_size={a.eval_size}",
        # No test split: scoring the winner on 25,000 test reviews is not a per-trial cost.
        "data.test_split=null",
        f"training.num_train_epochs={a.epochs}", "training.logging_steps=10",
        f"training.per_device_train_batch_size={a.batch_size}", "training.per_device_eval_batch_size=64",
        f"training.learning_rate={a.lr}",
        f"resources.cpus_per_worker={a.threads}", "resources.max_concurrent_trials=1",
        f"storage.storage_path={storage}", "storage.sweep_name=overhead-0",
        "search.num_samples=1",
        f"search.parameters={{training.learning_rate: {{type: choice, values: [{a.lr:.6e}]}}}}",
    ]
    if a.use_gpu:
        overrides += ["resources.use_gpu=true", "resources.gpus_per_worker=1", "training.bf16=true"]
    return load_sweep_configs(None, None, overrides)


def run_plain(job, data, callbacks=()) -> dict:
    torch.set_num_threads(int(job.resources.cpus_per_worker))
    # The step clock ftplat's worker runs, so that both sides' paces compare.
    clock = StepTimeCallback()
    with tempfile.TemporaryDirectory() as out:
        load = os.getloadavg()[0]
        start = time.perf_counter()
        trainer = build_plain_trainer(job, data, out, model=build_model(job), callbacks=[clock, *callbacks])
        output = trainer.train()
        wall = time.perf_counter() - start
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"wall_s": wall, "train_runtime_s": output.metrics["train_runtime"],
            "train_samples_per_s": output.metrics["train_samples_per_second"],
            "step_time": clock.to_dict(), "load_avg_at_start": round(load, 2)}


def run_plain_fresh(job, data) -> dict:
    """``run_plain`` in a new process. On a GPU the first training in a process runs slower
    (BENCHMARKS.md, "GPU: one H100"); every ftplat trial trains in a new worker process, so
    this compares cold with cold. Imports in the new process come before the timed part."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(run_plain, job, data).result()


def run_ftplat(job, space) -> dict:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    summary = run_sweep(job, space)
    wall = time.perf_counter() - start - summary.data["seconds"]
    trial = summary.trials[0]
    result = trial.train_result
    model_bytes = (result.get("checkpoint_bytes") or {}).get("model")
    stored = (trial.cost or {}).get("storage_bytes")
    return {"wall_s": wall, "trial_driver_wall_s": result["driver_wall_s"],
            "train_runtime_s": result["train_runtime"],
            "train_samples_per_s": result["train_samples_per_second"],
            "timeline_s": result.get("timeline_s"), "report_s": result.get("report_s"),
            "checkpoint_persist": result.get("checkpoint_persist"), "step_time": result.get("step_time"),
            "model_bytes": model_bytes, "trial_storage_bytes": stored,
            "storage_vs_model": round(stored / model_bytes, 3) if stored and model_bytes else None,
            "winner_score": summary.winner.score, "load_avg_at_start": round(load, 2)}


def build_steady_ratio(plain: dict, ours: dict) -> float | None:
    """Plain's mean step time after the 20th over ftplat's (``train/step_time.py``): P1 without
    the first steps' start-up (>= 1: ftplat's steps as fast)."""
    a, b = ((side.get("step_time") or {}).get("step_ms_mean") for side in (plain, ours))
    return round(a / b, 4) if a and b else None


def build_pair(plain: dict, ours: dict) -> dict:
    return {
        "throughput_ratio": round(ours["train_samples_per_s"] / plain["train_samples_per_s"], 4),
        "steady_step_ratio": build_steady_ratio(plain, ours),
        "per_trial_overhead_s": round((ours["trial_driver_wall_s"] - ours["train_runtime_s"])
                                      - (plain["wall_s"] - plain["train_runtime_s"]), 2),
        "sweep_fixed_overhead_s": round(ours["wall_s"] - ours["trial_driver_wall_s"], 2),
        "storage_vs_model": ours["storage_vs_model"],
        # Inside train_runtime: the training loop waits while each checkpoint is copied to storage.
        "report_s": ours.get("report_s"),
        "plain": plain, "ftplat": ours,
    }


def aggregate(pairs: list[dict]) -> dict:
    out = {key: summarize([p[key] for p in pairs])
           for key in ("throughput_ratio", "steady_step_ratio", "per_trial_overhead_s", "sweep_fixed_overhead_s",
                       "storage_vs_model", "report_s")}
    parts = sorted({k for p in pairs for k in (p["ftplat"].get("timeline_s") or {})})
    out["timeline_s"] = {k: summarize([(p["ftplat"].get("timeline_s") or {}).get(k) for p in pairs]) for k in parts}
    loads = [p[side]["load_avg_at_start"] for p in pairs for side in ("plain", "ftplat")]
    out["load_avg_min"], out["load_avg_max"] = min(loads), max(loads)
    return out


def format_report(agg: dict) -> str:
    def fmt(key: str, unit: str = "") -> str:
        s = agg[key]
        return "n/a" if s is None else f"{s['median']:g}{unit} [{s['min']:g}, {s['max']:g}] (n={s['n']})"

    lines = [f"P1 throughput ratio {fmt('throughput_ratio')} (goal >= 0.97)",
             f"steady pace ratio (plain's mean step after the 20th / ftplat's) {fmt('steady_step_ratio')}",
             f"P2 per-trial overhead {fmt('per_trial_overhead_s', ' s')} (goal <= 5 s)",
             f"storage of a finished trial / its model {fmt('storage_vs_model', 'x')} (goal <= 1.2x)",
             f"sweep fixed overhead {fmt('sweep_fixed_overhead_s', ' s')}",
             f"time in ray.train.report (checkpoint copies) {fmt('report_s', ' s')}",
             f"load average (1 min) at the runs' starts: {agg['load_avg_min']} .. {agg['load_avg_max']}"]
    if agg["timeline_s"]:
        lines.append("trial timeline, median s: " + ", ".join(
            f"{k} {v['median']:g}" for k, v in agg["timeline_s"].items() if v))
    return "\n".join(lines)


def main(argv=None) -> int:
    a = resolve_defaults(build_parser().parse_args(argv))
    if a.use_gpu and not torch.cuda.is_available():
        raise SystemExit("--use-gpu: torch sees no CUDA device here")
    machine = build_machine_record()
    pairs = []
    with tempfile.TemporaryDirectory(dir=a.storage_root) as storage:
        model = a.model or (write_bert_base(DEFAULT_MODEL, os.path.join(storage, "bert-base-random"))
                            if a.use_gpu else DEFAULT_MODEL)
        job, space = build_configs(a, storage, model)
        data = build_tokenized_tables(job)
        run_init_private_cluster(num_cpus=a.threads + 1, num_gpus=1 if a.use_gpu else 0,
                                 include_dashboard=False, logging_level="ERROR")
        try:
            for i in range(a.repeats):
                plain = (run_plain_fresh if a.plain_process == "fresh" else run_plain)(job, data)
                job = job.model_copy(update={"storage": job.storage.model_copy(update={"sweep_name": f"overhead-{i}"})})
                ours = run_ftplat(job, space)
                pairs.append(build_pair(plain, ours))
                print(f"pair {i + 1}/{a.repeats}: throughput ratio {pairs[-1]['throughput_ratio']}, "
                      f"per-trial overhead {pairs[-1]['per_trial_overhead_s']} s", flush=True)
        finally:
            ray.shutdown()
    report = {"config": vars(a), "machine": machine, "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
              "pairs": pairs, "aggregate": aggregate(pairs)}
    write_report(report, a.json)
    print(f"\nplain side: {a.plain_process} process\n" + format_report(report["aggregate"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
