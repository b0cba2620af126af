"""The winner's test score: when it is taken, and how the winner lines show it beside the
validation score that selected the winner."""

from __future__ import annotations

import dataclasses

import pytest

from ftplat import runtime
from ftplat.config.schema import JobConfig
from ftplat.records import SweepSummary
from ftplat.tune.summary import format_winner_line
from ftplat.tune.test_score import build_test_score_cpus, build_test_score_request, build_test_skip_reason

STATS = {"selection": "held out of the train split", "train": {"split": "train", "rows": 90},
         "eval": {"split": "train (held out)", "rows": 10}, "test": {"split": "test", "rows": 40}}


def _summary(*, test=None, exists=True, winner=True) -> SweepSummary:
    ckpt = {"path": "/s/train-a/checkpoint-4", "exists": exists, "step": 4, "epoch": 1.0, "eval_accuracy": 0.8}
    trial = {"trial_id": "a", "status": "TERMINATED", "hyperparameters": {"training.learning_rate": 1e-4},
             "scores": {"last": 0.8}, "history": [{"step": 4, "epoch": 1.0, "eval_accuracy": 0.8}],
             "best_checkpoint": ckpt, "num_evaluations": 1}
    return SweepSummary.from_dict({
        "sweep_name": "s", "sweep_path": "/s", "objective": {"metric": "eval_accuracy", "mode": "max"},
        "scope": "last", "metric_for_best_model": "eval_accuracy", "greater_is_better": True,
        "trials": [trial], "data": STATS, "test": test,
        "winner": {"trial_id": "a", "score": 0.8, "hyperparameters": trial["hyperparameters"],
                   "best_checkpoint": ckpt} if winner else None,
    })


@pytest.mark.parametrize("data, stats, winner, exists, reason", [
    ({}, STATS, True, True, None),
    ({"test_split": None}, STATS, True, True, "data.test_split is null"),
    ({"eval_split": "test"}, STATS, True, True, "selected on 'test' itself"),
    ({"validation": {"split": "test"}}, STATS, True, True, "selected on 'test' itself"),
    ({}, {k: v for k, v in STATS.items() if k != "test"}, True, True, "the data has no split 'test'"),
    ({}, STATS, False, True, "no winner"),
    ({}, STATS, True, False, "is gone"),
])
def test_when_the_test_score_is_taken(data, stats, winner, exists, reason):
    job = JobConfig.model_validate({"data": data})
    got = build_test_skip_reason(job, _summary(winner=winner, exists=exists), stats)
    assert (got is None) if reason is None else (reason in got), got


def test_the_winner_lines_show_validation_and_test_side_by_side():
    metrics = {"test_accuracy": 0.7402, "test_f1": 0.71, "test_loss": 0.63}
    lines = format_winner_line(_summary(test={"split": "test", "rows": 40, "trial_id": "a",
                                              "checkpoint": "/s/train-a/checkpoint-4", "metrics": metrics}))
    winner, validation, test = lines.splitlines()
    assert winner.startswith("Winner (scope=last): trial a eval_accuracy=0.8000")
    assert validation == ("  validation: train (held out), 10 rows (held out of the train split) -> "
                          "eval_accuracy[last]=0.8000, best checkpoint eval_accuracy=0.8000")
    # the objective's test metric only (metric_for_best_model is the same one here)
    assert test == "  test: test, 40 rows (scored once after the sweep) -> test_accuracy=0.7402"
    skipped = format_winner_line(_summary(test={"skipped": "data.test_split is null"})).splitlines()
    assert skipped[-1] == "  test: data.test_split is null"
    failed = format_winner_line(_summary(test={"error": "RayTaskError: boom"})).splitlines()
    assert failed[-1] == "  test: failed: RayTaskError: boom"


@pytest.mark.parametrize("resources, node_cpus, cpus", [
    ({"cpus_per_worker": 2}, 3, 2),                                  # one trial at a time: its worker's CPUs
    ({"cpus_per_worker": 1, "max_concurrent_trials": 2}, 3, 2),      # two packed one-thread trials' CPUs
    ({"cpus_per_worker": 1, "num_workers": 2, "max_concurrent_trials": 4}, 4, 4),  # one node's worth at most
    ({"cpus_per_worker": 1.5, "max_concurrent_trials": 3}, 16, 4),   # whole CPUs (threads)
    ({"cpus_per_worker": 4}, 2, 4),                                   # never fewer than one worker's
    ({"cpus_per_worker": 0.5}, 8, 1),
])
def test_the_test_score_takes_the_cpus_the_finished_trials_held(resources, node_cpus, cpus):
    job = JobConfig.model_validate({"resources": resources})
    assert build_test_score_cpus(job, [{"CPU": float(node_cpus)}]) == cpus


def test_a_gpu_test_score_fits_the_cpus_of_a_gpu_node(monkeypatch):
    nodes = [{"Alive": True, "Resources": {"CPU": 64.0}},                 # a CPU-only head
             {"Alive": True, "Resources": {"CPU": 8.0, "GPU": 1.0}},
             {"Alive": False, "Resources": {"CPU": 16.0, "GPU": 4.0}},    # gone
             {"Alive": True, "Resources": {"CPU": 12.0, "GPU": 0.5}}]     # less than a whole GPU left
    monkeypatch.setattr(runtime.ray, "nodes", lambda: nodes)
    alive = runtime.read_alive_node_resources()
    assert alive == [nodes[0]["Resources"], nodes[1]["Resources"], nodes[3]["Resources"]]

    def cpus(**resources):  # trials that held 4 x 32 CPUs: only the node bounds the task
        return build_test_score_cpus(JobConfig.model_validate(
            {"resources": {"cpus_per_worker": 4, "max_concurrent_trials": 32, **resources}}), alive)

    assert cpus() == 64
    assert cpus(use_gpu=True) == 8
    assert cpus(use_gpu=True, gpus_per_worker=0.5) == 12


def test_the_test_score_uses_the_winners_own_values():
    """The winner trained and was selected with its searched values (a masking rate, label
    smoothing): the test split is scored with them, not with the sweep's base job."""
    job = JobConfig.model_validate({"task": {"type": "masked-lm", "mlm_probability": 0.15},
                                    "training": {"learning_rate": 2.0e-5}})
    winner = dataclasses.replace(_summary().winner, hyperparameters={
        "task.mlm_probability": 0.6, "training.hf_args.label_smoothing_factor": 0.1, "training.learning_rate": 1e-4})
    request = build_test_score_request(job, winner, data_ref=None, cpus=2)
    scored = JobConfig.model_validate(request["job"])
    assert scored.task.mlm_probability == 0.6 and scored.training.learning_rate == 1e-4
    assert scored.training.hf_args == {"label_smoothing_factor": 0.1}
    assert request["checkpoint"] == "/s/train-a/checkpoint-4" and request["threads"] == 2
    assert job.task.mlm_probability == 0.15  # the sweep's job is left as it was
