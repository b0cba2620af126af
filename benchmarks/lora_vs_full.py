"""Full fine-tuning against LoRA at an equal trial budget: MiniLM on IMDB, the CPU profile.

Runs the two shipped example sweeps one after the other in this process, on the same rows
(the same seeded subsets: 800 train reviews, 500 held out for selection, 5,000 test reviews),
the same number of one-epoch trials and the same resources:

- full: ``jobs/configs/imdb_cpu.yaml`` + ``search_spaces/imdb_cpu.yaml`` (every weight trains);
- lora: ``jobs/configs/lora_imdb_cpu.yaml`` + ``search_spaces/lora_imdb_cpu.yaml`` (a LoRA adapter
  on the frozen model, its rank and the learning rate searched in LoRA's range).

For each: the winner's validation and test accuracy, train samples/s per trial (the Trainer's
own figure), what a checkpoint weighs (all of it, and the model part without optimizer state),
the bytes each trial keeps in storage after retention, the peak resident memory of a trial's
worker, and the sweep's wall time.

Throughput inside sweeps run minutes apart is at the mercy of the machine's load, so first the
two arms' training steps are also timed side by side in this process: full, LoRA, full, LoRA...
(``--repeats`` pairs of ``--steps`` steps each, the first steps of each run not timed), with the
median and spread of samples/s.

  python benchmarks/lora_vs_full.py                       # both sweeps, about 25 min on 2 cores
  python benchmarks/lora_vs_full.py --only lora search.num_samples=2 --repeats 0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS, build_machine_record  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ARMS = {
    "full": (REPO / "jobs/configs/imdb_cpu.yaml", REPO / "search_spaces/imdb_cpu.yaml"),
    "lora": (REPO / "jobs/configs/lora_imdb_cpu.yaml", REPO / "search_spaces/lora_imdb_cpu.yaml"),
}


def build_folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def build_arm_report(summary, sweep_dir: Path, wall: float) -> dict:
    """What one sweep cost and reached, per trial and as medians."""
    trials = []
    for t in summary.trials:
        result = t.train_result or {}
        run = Path(t.train_run_path) if t.train_run_path else None
        trials.append({
            "trial_id": t.trial_id, "hyperparameters": t.hyperparameters, "validation_accuracy": t.scores.get("last"),
            "train_samples_per_second": result.get("train_samples_per_second"),
            "trainable_parameters": result.get("trainable_parameters"),
            "trainable_fraction": result.get("trainable_fraction"),
            "checkpoint_bytes": result.get("checkpoint_bytes"),
            "stored_bytes": build_folder_bytes(run) if run and run.is_dir() else None,
            "peak_memory_bytes": result.get("peak_memory_bytes"),
        })

    def median(key, sub=None):
        values = [(t[key] or {}).get(sub) if sub else t[key] for t in trials]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    test = (summary.test or {}).get("metrics") or {}
    return {
        "sweep_wall_s": round(wall, 1),
        "winner": {"trial_id": summary.winner.trial_id, "hyperparameters": summary.winner.hyperparameters,
                   "validation_accuracy": summary.winner.score} if summary.winner else None,
        "test_accuracy": test.get("test_accuracy"),
        "median": {"train_samples_per_second": median("train_samples_per_second"),
                   "checkpoint_total_bytes": median("checkpoint_bytes", "total"),
                   "checkpoint_model_bytes": median("checkpoint_bytes", "model"),
                   "stored_bytes_per_trial": median("stored_bytes"),
                   "peak_memory_bytes": median("peak_memory_bytes"),
                   "trainable_fraction": median("trainable_fraction")},
        "spread": {"train_samples_per_second": [min(v) if (v := [t["train_samples_per_second"] for t in trials
                                                                 if t["train_samples_per_second"]]) else None,
                                                max(v) if v else None]},
        "sweep_stored_bytes": build_folder_bytes(sweep_dir),
        "trials": trials,
    }


class StepClock:
    """A TrainerCallback timing the steps after the first ``skip`` (allocation, warm-up)."""

    def __init__(self, skip: int):
        from transformers import TrainerCallback

        clock = self

        class _Callback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == skip:
                    clock.start = time.perf_counter()
                clock.end, clock.steps = time.perf_counter(), state.global_step - skip

        self.callback = _Callback()
        self.start = self.end = None
        self.steps = 0


def run_throughput_pairs(repeats: int, steps: int, overrides: list[str]) -> dict:
    """Train samples/s of each arm's model on its config, the arms alternating in this process."""
    import torch

    from ftplat.config.loading import load_sweep_configs
    from ftplat.data.preparation import build_tokenized_tables
    from ftplat.train.worker import build_trainer

    skip = 5
    jobs, tables = {}, {}
    for arm, (job_file, space_file) in ARMS.items():
        job, _ = load_sweep_configs(job_file, space_file, ["tracking.enabled=false", f"training.max_steps={steps}",
                                                           "data.test_size=null", *overrides])
        jobs[arm], tables[arm] = job, build_tokenized_tables(job)
    torch.set_num_threads(int(jobs["full"].resources.cpus_per_worker))
    runs: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(repeats):
        for arm in ARMS:
            clock = StepClock(skip)
            with tempfile.TemporaryDirectory(prefix="ftplat-peft-steps-") as out:
                trainer = build_trainer(jobs[arm], train_table=tables[arm].train, eval_table=tables[arm].eval,
                                        output_dir=out, callbacks=[clock.callback])
                trainer.args.eval_strategy = trainer.args.save_strategy = "no"  # time training only
                trainer.train()
            batch = jobs[arm].training.per_device_train_batch_size
            runs[arm].append(round(clock.steps * batch / (clock.end - clock.start), 2))
            print(f"throughput {arm}: {runs[arm][-1]} samples/s", flush=True)
    return {arm: {"samples_per_second": v, "median": statistics.median(v) if v else None,
                  "spread": [min(v), max(v)] if v else None} for arm, v in runs.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("overrides", nargs="*", help="key=value overrides applied to both sweeps")
    p.add_argument("--only", choices=sorted(ARMS), action="append", help="run only this arm (repeatable)")
    p.add_argument("--repeats", type=int, default=3, help="full/LoRA pairs of the side-by-side step timing")
    p.add_argument("--steps", type=int, default=30, help="training steps per timed run")
    p.add_argument("--results", default=os.path.join(RESULTS, "lora_vs_full"))
    a = p.parse_args(argv)
    os.makedirs(a.results, exist_ok=True)

    from ftplat.config.loading import load_sweep_configs
    from ftplat.tune.sweep import run_sweep

    report = {"machine": build_machine_record(), "arms": {}}
    if a.repeats:
        report["throughput"] = run_throughput_pairs(a.repeats, a.steps, a.overrides)
    for arm in a.only or list(ARMS):
        job_file, space_file = ARMS[arm]
        with tempfile.TemporaryDirectory(prefix=f"ftplat-peft-{arm}-") as storage:
            job, space = load_sweep_configs(job_file, space_file, [
                f"storage.storage_path={storage}", f"storage.sweep_name={arm}", "tracking.enabled=false",
                *a.overrides])
            start = time.perf_counter()
            summary = run_sweep(job, space)
            report["arms"][arm] = build_arm_report(summary, Path(storage) / arm, time.perf_counter() - start)
        r = report["arms"][arm]
        print(f"{arm}: validation {r['winner'] and r['winner']['validation_accuracy']}, test {r['test_accuracy']}, "
              f"{json.dumps(r['median'])}, sweep {r['sweep_wall_s']} s", flush=True)
    report["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    with open(os.path.join(a.results, "summary.json"), "w") as f:
        json.dump(report, f, indent=2)
    return 0 if all(r["test_accuracy"] is not None for r in report["arms"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
