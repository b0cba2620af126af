"""A trial's ``history.json`` is one input among others: a trial that failed (and got one) and
that ``--resume`` runs again evaluates past it. Live retention, the summary and a finished
trial's driver merge it with Tune's rows and the Trainer state, and a folder Ray's snapshot
tracks is never deleted because a history misses it."""

from __future__ import annotations

import json
from pathlib import Path

from ray.tune.experiment import Trial
from ray_runs import METRIC, RayRun, write_checkpoint_files
from test_retention_resume import STEP, SweepSim

from ftplat.checkpoints.gc import DELETE, KEEP, read_gc_plan
from ftplat.checkpoints.retention import RetentionPolicy
from ftplat.records import SweepSummary
from ftplat.tune.run_history import read_finished_evaluations


def history_steps(sim: SweepSim, trial_id: str) -> list[int]:
    return [r["step"] for r in json.loads((sim.root / f"train-{trial_id}" / "history.json").read_text())]


def test_a_failed_trial_run_again_keeps_the_best_its_old_history_json_does_not_name(tmp_path):
    sim = SweepSim(tmp_path / "sweep", ["training.save_total_limit=1", "search.scope=last"])
    sim.add_trial("b")
    sim.report("b", 0.6)
    sim.report("b", 0.7)
    sim.callback.on_trial_error(0, list(sim.trials.values()), sim.trials["b"])  # b fails: history.json 10, 20
    sim.trials["b"].set_status(Trial.ERROR)
    assert history_steps(sim, "b") == [10, 20]
    sim.save_state()
    sim.resume(with_state=True)  # --resume runs the failed trial again from its registered latest
    sim.trials["b"].set_status(Trial.RUNNING)
    sim.runs["b"].restore()
    sim.report("b", 0.95)  # its best
    sim.report("b", 0.8)
    sim.resume(with_state=True)  # the driver dies before Tune saves again; --resume
    sim.report("b", 0.5)
    sim.report("b", 0.5)
    assert sim.exists("b", f"checkpoint-{3 * STEP}")
    sim.complete("b")
    assert sim.exists("b", f"checkpoint-{3 * STEP}")
    # rewritten now that the finished trial's record has more rows than the file
    assert history_steps(sim, "b") == [STEP * n for n in range(1, 7)]
    summary = sim.end()
    assert summary.winner.trial_id == "b"
    best = summary.winner.best_checkpoint
    assert best.name == f"checkpoint-{3 * STEP}" and best.value == 0.95
    assert sim.exists("b", f"checkpoint-{3 * STEP}")


def test_a_trial_that_runs_again_in_the_same_driver_is_running_again(tmp_path):
    sim = SweepSim(tmp_path / "sweep", ["training.save_total_limit=1", "search.scope=last"])
    sim.add_trial("b")
    sim.report("b", 0.6)
    sim.report("b", 0.7)
    sim.callback.on_trial_error(0, list(sim.trials.values()), sim.trials["b"])
    sim.trials["b"].set_status(Trial.ERROR)
    sim.trials["b"].set_status(Trial.RUNNING)  # Tune tries it again
    sim.runs["b"].restore()
    sim.report("b", 0.95)
    record, known = sim.callback._record(sim.trials["b"], Trial.RUNNING)
    assert known and not record.finished
    assert [r["step"] for r in record.history] == [STEP, 2 * STEP, 3 * STEP]


def test_a_finished_trials_driver_reports_the_trainer_state_over_an_older_history_json(tmp_path):
    run = RayRun(tmp_path, "b")
    values = [0.6, 0.7, 0.95, 0.8]
    log = [{"step": STEP * (i + 1), "epoch": float(i + 1), METRIC: v} for i, v in enumerate(values)]
    for i in range(len(values)):
        run.report({"step": STEP * (i + 1), "checkpoint_name": f"checkpoint-{STEP * (i + 1)}", METRIC: values[i]},
                   log[: i + 1])
    # written when an earlier run of the trial failed after two evaluations
    (tmp_path / "train-b" / "history.json").write_text(json.dumps(
        [{"step": STEP, "checkpoint_name": f"checkpoint-{STEP}", METRIC: 0.6, "train_loss": 0.9},
         {"step": 2 * STEP, "checkpoint_name": f"checkpoint-{2 * STEP}", METRIC: 0.7, "train_loss": 0.8}]))
    evals, _ = read_finished_evaluations(str(tmp_path / "train-b"), METRIC)
    assert [e["step"] for e in evals] == [STEP * n for n in range(1, 5)] and evals[-1][METRIC] == 0.8


def test_gc_keeps_a_folder_the_snapshot_tracks_and_no_history_names(tmp_path):
    root = tmp_path / "sweep"
    run = RayRun(root, "b")
    rows = [{"step": STEP * n, "checkpoint_name": f"checkpoint-{STEP * n}", METRIC: v}
            for n, v in ((1, 0.5), (2, 0.6), (3, 0.95))]
    for row in rows:
        run.report(row)
    write_checkpoint_files(root / "train-b" / f"checkpoint-{4 * STEP}")  # an upload nobody registered
    summary = SweepSummary.from_dict({
        "scope": "last", "objective": {"metric": METRIC, "mode": "max"}, "metric_for_best_model": METRIC,
        "winner": {"trial_id": "b", "score": 0.6},
        "trials": [{"trial_id": "b", "status": "TERMINATED", "scores": {"last": 0.6}, "history": rows[:2]}]})
    plan = {Path(a.path).name: a for a in read_gc_plan(str(root), RetentionPolicy(1), True, summary=summary)}
    assert plan[f"checkpoint-{3 * STEP}"].action == KEEP
    assert "tracked in the run's snapshot" in plan[f"checkpoint-{3 * STEP}"].reason
    unregistered = plan[f"checkpoint-{4 * STEP}"]
    assert (unregistered.action, unregistered.reason) == (DELETE, "orphan, not tracked")


def test_evaluations_rebuilt_from_the_trainer_state_keep_their_train_loss(tmp_path):
    """After a resume the summary rebuilt the evaluation reported at the interruption from the
    Trainer state, with train_loss null (the uninterrupted run had it)."""
    from ftplat.tune.run_history import read_trainer_state_evals

    log = [{"loss": 0.9, "step": 5}, {"loss": 0.7, "step": 10}, {METRIC: 0.6, "step": 10},
           {"loss": 0.5, "step": 15}, {METRIC: 0.7, "step": 20}]
    folder = tmp_path / "train-a" / "checkpoint-20"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": log}))
    evals = read_trainer_state_evals(str(tmp_path / "train-a"), METRIC)
    assert [(e["step"], e["train_loss"]) for e in evals] == [(10, 0.7), (20, 0.5)]


def test_the_trainer_state_fills_in_before_tunes_last_report_never_after_it():
    """A trial ASHA stopped at its first evaluation trained on until it was killed: the newer
    checkpoint's Trainer state gave it evaluations the scheduler and the searcher never saw,
    for some stopped trials and not others (by timing), and its summary score came from them."""
    from ftplat.tune.summary import build_trial_history

    def row(step, value):
        return {"step": step, METRIC: value, "num_evaluations": step // 2}

    stopped = build_trial_history([row(2, 0.5)], [row(2, 0.5), row(4, 0.9)])
    assert [r["step"] for r in stopped] == [2]
    # A resumed trial's rows start where it resumed: the Trainer state fills in the earlier ones
    resumed = build_trial_history([row(6, 0.7), row(8, 0.8)], [row(2, 0.5), row(4, 0.6), row(6, 0.7)])
    assert [r["step"] for r in resumed] == [2, 4, 6, 8]
