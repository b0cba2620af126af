"""One progress line per Trainer log, in place of the Trainer's raw log dicts.

With ``disable_tqdm`` (bars make no sense in Ray's logs) the Trainer prints each log as a
Python dict. Several trials' workers write into one job log, so each line here names its
trial and says where the trial is (step, epoch), what it last logged, its latest evaluation of
the sweep's metric and how long it still needs, in a form that needs no column alignment (the
dashboard's log viewer collapses spaces).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from transformers import PrinterCallback, Trainer, TrainerCallback

from ftplat.units import format_duration

#: The train-log keys worth a glance, in this order; the rest stay in MLflow and Tune.
TRAIN_KEYS = ("loss", "grad_norm", "learning_rate")


def format_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def build_eta(*, step: int, max_steps: int, start_step: int, elapsed: float) -> float | None:
    """Seconds left at this run's own pace (steps since it began, a resume included), or None
    before a step is timed."""
    done = step - start_step
    if done <= 0 or max_steps <= 0 or elapsed <= 0:
        return None
    return max(0.0, (max_steps - step) * elapsed / done)


def format_progress_line(*, trial: str, step: int, max_steps: int, epoch: float | None, num_epochs: float,
                         logs: dict, metric: str, evaluations: list[float], eta: float | None,
                         elapsed: float) -> str:
    """``<trial> step 40/120 epoch 1.00/3 | loss 0.63 lr 2e-05 | eval_accuracy 0.81 (eval 1) | 1m02s, ETA 2m04s``."""
    where = f"{trial} step {step}/{max_steps}"
    if epoch is not None:
        where += f" epoch {epoch:.2f}/{num_epochs:g}"
    if "train_runtime" in logs:
        done = [f"trained in {format_duration(logs['train_runtime'])}"]
        done += [f"{k} {format_value(logs[k])}" for k in ("train_loss", "train_samples_per_second") if k in logs]
        return f"{where} | {', '.join(done)}"
    parts = [where]
    if metric in logs:
        parts.append(" ".join(f"{k} {format_value(v)}" for k, v in logs.items()
                              if k.startswith("eval_") and not k.endswith(("_runtime", "_per_second"))))
    else:
        shown = [f"{'lr' if k == 'learning_rate' else k} {format_value(logs[k])}" for k in TRAIN_KEYS if k in logs]
        if shown:
            parts.append(" ".join(shown))
        if evaluations:
            parts.append(f"{metric} {format_value(evaluations[-1])} (eval {len(evaluations)})")
    timing = format_duration(elapsed)
    if eta is not None:
        timing += f", ETA {format_duration(eta)}"
    parts.append(timing)
    return " | ".join(parts)


class ProgressLineCallback(TrainerCallback):
    """Prints :func:`format_progress_line` on the world's rank 0 at each Trainer log."""

    def __init__(self, *, trial: str, metric: str, clock: Callable[[], float] = time.monotonic):
        self.trial, self.metric, self.clock = trial, metric, clock
        self.started: float | None = None
        self.start_step = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.started, self.start_step = self.clock(), state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        elapsed = self.clock() - self.started if self.started is not None else 0.0
        evaluations = [e[self.metric] for e in state.log_history if self.metric in e]
        print(format_progress_line(
            trial=self.trial, step=state.global_step, max_steps=state.max_steps, epoch=state.epoch,
            num_epochs=state.num_train_epochs,
            logs=logs, metric=self.metric, evaluations=evaluations, elapsed=elapsed,
            eta=build_eta(step=state.global_step, max_steps=state.max_steps, start_step=self.start_step,
                          elapsed=elapsed)), flush=True)


#: Seconds between the lines of a long evaluation.
EVAL_PROGRESS_EVERY_S = 30.0


class EvalProgressCallback(TrainerCallback):
    """A line every ``EVAL_PROGRESS_EVERY_S`` of an evaluation, on the world's rank 0:
    ``<label>: evaluating, batch 120/400, 3.1 batches/s, ETA 1m30s``. An evaluation of a
    large split (the winner's test score: 25,000 reviews) was minutes without a line."""

    def __init__(self, *, label: str, every_s: float = EVAL_PROGRESS_EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.label, self.every_s, self.clock = label, every_s, clock
        self.started: float | None = None
        self.shown = 0.0
        self.batches = 0

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        now = self.clock()
        if self.started is None:
            self.started, self.shown, self.batches = now, now, 0
        self.batches += 1
        if not state.is_world_process_zero or now - self.shown < self.every_s:
            return
        self.shown = now
        total = len(eval_dataloader) if eval_dataloader is not None and hasattr(eval_dataloader, "__len__") else None
        rate = self.batches / max(now - self.started, 1e-9)
        line = f"{self.label}: evaluating, batch {self.batches}" + (f"/{total}" if total else "")
        line += f", {rate:.2g} batches/s"
        if total:
            line += f", ETA {format_duration(max(0, total - self.batches) / rate)}"
        print(line, flush=True)

    def on_evaluate(self, args, state, control, **kwargs):
        self.started = None


def run_replace_printer(trainer: Trainer, progress: ProgressLineCallback) -> None:
    """Swap the Trainer's dict printer (added because ``disable_tqdm`` is on) for the line."""
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(progress)
    trainer.add_callback(EvalProgressCallback(label=progress.trial))
