"""The worker's step clock: time to the 10th step and the steady pace after the 20th."""

from __future__ import annotations

import itertools

import pytest
import torch
from tiny_assets import build_two_weight_classifier, build_two_weight_rows
from transformers import Trainer

from ftplat.config.schema import JobConfig
from ftplat.train.arguments import build_training_arguments
from ftplat.train.step_time import StepTimeCallback, build_step_time


def test_pace_leaves_out_the_first_steps_and_one_slow_evaluation():
    # 10 slow warm-up steps (1 s each), then 0.1 s a step, with one 5 s evaluation between.
    ends, t = [], 0.0
    for i in range(60):
        t += 1.0 if i < 10 else (5.1 if i == 40 else 0.1)
        ends.append(t)
    record = build_step_time(0.0, ends)
    assert record["steps"] == 60 and record["first_10_steps_s"] == pytest.approx(10.0)
    assert record["first_step_s"] == pytest.approx(1.0)
    assert record["step_ms_median"] == pytest.approx(100.0)
    # The mean over the span keeps the evaluation: (39 * 0.1 + 5.1) / 39 s.
    assert record["step_ms_mean"] == pytest.approx(1000 * (39 * 0.1 + 5.0) / 39, rel=1e-3)


def test_short_runs_say_what_they_cannot_measure():
    assert build_step_time(0.0, []) is None
    few = build_step_time(0.0, [0.5 * i for i in range(1, 6)])
    assert few == {"steps": 5, "first_step_s": 0.5, "first_10_steps_s": None, "step_ms_median": None, "step_ms_mean": None}


def test_a_real_trainer_is_clocked_once_per_optimizer_step(tmp_path):
    def accuracy(pred):
        return {"accuracy": float((pred.predictions.argmax(-1) == pred.label_ids).mean())}

    job = JobConfig.model_validate({"training": {"num_train_epochs": 3, "per_device_train_batch_size": 2,
                                                 "gradient_accumulation_steps": 2}})
    torch.manual_seed(0)
    trainer = Trainer(model=build_two_weight_classifier(), args=build_training_arguments(job, output_dir=str(tmp_path)),
                      train_dataset=build_two_weight_rows(64), eval_dataset=build_two_weight_rows(4), compute_metrics=accuracy)
    ticks = itertools.count()
    clock = StepTimeCallback(clock=lambda: float(next(ticks)))
    trainer.add_callback(clock)
    output = trainer.train()
    record = clock.to_dict()
    # 64 rows / (2 x 2) = 16 optimizer steps an epoch; one tick at train begin, one per step end.
    assert record["steps"] == output.global_step == 48
    assert record["first_10_steps_s"] == 10.0 and record["step_ms_median"] == 1000.0
