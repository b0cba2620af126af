"""The per-trial progress line that replaces the Trainer's printed log dicts."""

from __future__ import annotations

import contextlib
import io
import itertools
from types import SimpleNamespace

import pytest
import torch
from tiny_assets import build_two_weight_classifier, build_two_weight_rows
from transformers import PrinterCallback, Trainer

from ftplat.config.schema import JobConfig
from ftplat.train.arguments import build_training_arguments
from ftplat.train.progress import (ProgressLineCallback, build_eta, format_progress_line,
                                   run_replace_printer)
from ftplat.units import format_bytes, format_duration


def test_duration_and_eta():
    assert [format_duration(s) for s in (0, 9.6, 62, 3725, None)] == ["0s", "10s", "1m02s", "1h02m", "-"]
    # One byte spelling for the plan, sweeps show and the summary (the plan's was decimal).
    assert [format_bytes(n) for n in (512, 3 * 2**20, 1.5 * 2**30)] == ["512 B", "3.0 MiB", "1.5 GiB"]
    assert build_eta(step=40, max_steps=120, start_step=0, elapsed=60.0) == pytest.approx(120.0)
    # After a resume the pace counts only the steps this run made.
    assert build_eta(step=90, max_steps=120, start_step=80, elapsed=20.0) == pytest.approx(60.0)
    assert build_eta(step=80, max_steps=120, start_step=80, elapsed=5.0) is None


def test_a_train_log_an_eval_log_and_the_end():
    common = dict(trial="train-5e63fcb0", max_steps=120, num_epochs=3, metric="eval_accuracy", elapsed=62.0)
    train = format_progress_line(step=40, epoch=1.0, logs={"loss": 0.63124, "grad_norm": 3.2, "learning_rate": 2e-5,
                                                           "epoch": 1.0}, evaluations=[0.8125], eta=124.0, **common)
    assert train == ("train-5e63fcb0 step 40/120 epoch 1.00/3 | loss 0.6312 grad_norm 3.2 lr 2e-05 | "
                     "eval_accuracy 0.8125 (eval 1) | 1m02s, ETA 2m04s")
    evaluated = format_progress_line(step=40, epoch=1.0, evaluations=[0.8125], eta=None, logs={
        "eval_loss": 0.41, "eval_accuracy": 0.8125, "eval_runtime": 3.1, "eval_samples_per_second": 160.2}, **common)
    assert evaluated == "train-5e63fcb0 step 40/120 epoch 1.00/3 | eval_loss 0.41 eval_accuracy 0.8125 | 1m02s"
    end = format_progress_line(step=120, epoch=3.0, evaluations=[0.8, 0.81, 0.82], eta=0.0, logs={
        "train_runtime": 190.2, "train_loss": 0.4, "train_samples_per_second": 12.5}, **common)
    assert end == "train-5e63fcb0 step 120/120 epoch 3.00/3 | trained in 3m10s, train_loss 0.4, train_samples_per_second 12.5"
    assert "|" not in format_progress_line(step=0, epoch=None, logs={}, evaluations=[], eta=None,
                                           **{**common, "elapsed": 0.0}).replace("| 0s", "")


def test_a_real_trainer_prints_lines_not_dicts(tmp_path, capsys):
    """ftplat's TrainingArguments (disable_tqdm, so the Trainer adds its dict printer) on a
    two-weight model: every log becomes one line naming the trial, with steps and ETA."""

    def accuracy(pred):
        return {"accuracy": float((pred.predictions.argmax(-1) == pred.label_ids).mean())}

    job = JobConfig.model_validate({"training": {"num_train_epochs": 2, "logging_steps": 1,
                                                 "per_device_train_batch_size": 4}})
    rows = build_two_weight_rows(8)
    torch.manual_seed(0)
    trainer = Trainer(model=build_two_weight_classifier(), args=build_training_arguments(job, output_dir=str(tmp_path)),
                      train_dataset=rows, eval_dataset=rows[:4], compute_metrics=accuracy)
    assert any(isinstance(c, PrinterCallback) for c in trainer.callback_handler.callbacks)
    ticks = itertools.count()
    run_replace_printer(trainer, ProgressLineCallback(trial="train-aaaa0001", metric="eval_accuracy",
                                                      clock=lambda: float(next(ticks))))
    trainer.train()

    printed = capsys.readouterr().out.strip().splitlines()
    assert not any(line.startswith("{") for line in printed), printed
    lines = [line for line in printed if line.startswith("train-aaaa0001 step ")]
    steps = [line for line in lines if "| loss " in line]
    assert len(steps) == 4 and steps[0].startswith("train-aaaa0001 step 1/4 epoch 0.50/2 | loss ")
    assert "ETA" in steps[0] and steps[-1].endswith(", ETA 0s")
    evals = [line for line in lines if "eval_accuracy" in line and "(eval" not in line]
    assert [line.split(" | ")[0] for line in evals] == ["train-aaaa0001 step 2/4 epoch 1.00/2",
                                                         "train-aaaa0001 step 4/4 epoch 2.00/2"]
    # The train log after the first evaluation carries that evaluation forward.
    assert "eval_accuracy" in steps[2] and "(eval 1)" in steps[2]
    assert "trained in" in lines[-1]


def test_a_long_evaluation_prints_a_line_every_30_seconds():
    """The winner's test score on 5,000 reviews was 520 s without a line."""
    from ftplat.train.progress import EvalProgressCallback

    now = [0.0]
    callback = EvalProgressCallback(label="test score", clock=lambda: now[0])
    state = SimpleNamespace(is_world_process_zero=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for _ in range(100):  # 100 batches of 1 s each
            callback.on_prediction_step(None, state, None, eval_dataloader=list(range(100)))
            now[0] += 1.0
        callback.on_evaluate(None, state, None)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 30, 60 and 90 s
    assert lines[0] == "test score: evaluating, batch 31/100, 1 batches/s, ETA 1m07s"
