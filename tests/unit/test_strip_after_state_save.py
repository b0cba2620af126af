"""Live retention strips a completed trial's optimizer state only once Tune can have saved
the trial as ended. Tune calls ``on_trial_complete`` before it marks the trial TERMINATED and
saves its state at the end of that step; a strip in that call leaves a window in which a
driver death makes ``--resume`` restart the trial from a checkpoint without optimizer and
scheduler, which HF's Trainer accepts silently (fresh Adam, schedule back at its start)."""

from __future__ import annotations

from pathlib import Path

from ray_runs import METRIC, write_ray_run

from ftplat.checkpoints.retention import RetentionPolicy

STATE_FILES = ("optimizer.pt", "scheduler.pt")


def rows(values: list[float]) -> list[dict]:
    return [{"step": 10 * (i + 1), "checkpoint_name": f"checkpoint-{10 * (i + 1)}", METRIC: v,
             "training_iteration": i + 1, "num_evaluations": i + 1} for i, v in enumerate(values)]


def holds_state(root: Path, trial_id: str) -> dict[str, bool]:
    return {c.name: all((c / f).exists() for f in STATE_FILES) for c in sorted((root / f"train-{trial_id}").glob("checkpoint-*"))}


def test_a_completing_trial_keeps_its_optimizer_state_until_the_next_event(tmp_path):
    from ray.tune.experiment import Trial

    from ftplat.tune.live_retention import LiveRetentionCallback

    root = tmp_path / "sweep"
    history = {"first": rows([0.5, 0.7]), "second": rows([0.4, 0.6])}
    for tid, trial_rows in history.items():
        write_ray_run(root, tid, trial_rows)
        for ckpt in (root / f"train-{tid}").glob("checkpoint-*"):
            for name in STATE_FILES:
                (ckpt / name).write_bytes(b"s" * 32)
    trials = [Trial("fn", trial_id=tid, experiment_tag=f"{i}_lr=0.1", stub=True) for i, tid in enumerate(history)]
    callback = LiveRetentionCallback(
        sweep_path=str(root), policy=RetentionPolicy(2), objective={"metric": METRIC, "mode": "max", "scope": "last"},
        metric_for_best_model=METRIC, greater_is_better=True)
    first, second = trials
    for trial in trials:
        trial.set_status(Trial.RUNNING)
    for row in history["first"]:
        callback.on_trial_result(0, trials, first, dict(row))
    callback.on_trial_result(0, trials, second, dict(history["second"][0]))

    callback.on_trial_complete(0, trials, first)  # Tune has not marked or saved it TERMINATED yet
    assert holds_state(root, "first") == {"checkpoint-10": True, "checkpoint-20": True}
    first.set_status(Trial.TERMINATED)  # and saves its state at the end of the step

    callback.on_trial_result(0, trials, second, dict(history["second"][1]))
    assert holds_state(root, "first") == {"checkpoint-10": False, "checkpoint-20": False}
    assert all(holds_state(root, "second").values())  # still running: its state stays

    callback.on_trial_complete(0, trials, second)
    second.set_status(Trial.TERMINATED)
    assert all(holds_state(root, "second").values())  # the sweep's final gc strips the last one
