"""A trial that trained to its end before the sweep driver died, while Tune's saved state still
calls it running: on ``--resume`` its driver reports its last evaluation again and returns,
training nothing and touching nothing in storage or MLflow."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
import ray.tune
from ray_runs import METRIC, RayRun

from ftplat.config.loading import load_sweep_configs
from ftplat.records import OBJECTIVE_KEY
from ftplat.scoring import build_report_metrics, compute_scope_scores
from ftplat.tune import trial as trial_module
from ftplat.tune.summary import build_history_row, build_trial_history

ACCURACIES = [0.6, 0.9, 0.8]
OBJECTIVE = {"metric": METRIC, "mode": "max", "scope": "avg"}


def build_log_history(upto: int) -> list[dict]:
    log = []
    for n, acc in enumerate(ACCURACIES[:upto], start=1):
        log.append({"loss": 1.0 / n, "learning_rate": 1e-5, "epoch": float(n), "step": 10 * n})
        log.append({METRIC: acc, "eval_loss": 1 - acc, "epoch": float(n), "step": 10 * n})
    return log


def report(upto: int) -> dict:
    return build_report_metrics(build_log_history(upto), metric=METRIC, mode="max", scope="avg", step=10 * upto)


@pytest.fixture
def finished_run(tmp_path):
    """A Train run whose three reports Ray registered and whose driver wrote its record."""
    sweep = tmp_path / "sweep"
    run = RayRun(sweep, "t1")
    for n in range(1, len(ACCURACIES) + 1):
        run.report(report(n), build_log_history(n))
    (run.run_dir / "trial_result.json").write_text(json.dumps({"global_step": 30}))
    return sweep, run.run_dir


def test_the_report_is_the_last_evaluation_as_the_worker_made_it(finished_run):
    _, run_dir = finished_run
    assert trial_module.read_finished_report(str(run_dir.parent), "t1", OBJECTIVE) == report(3)
    assert report(3)[OBJECTIVE_KEY] == pytest.approx(compute_scope_scores(ACCURACIES, "max")["avg"])


def test_history_json_stands_in_for_checkpoints_retention_deleted(finished_run):
    _, run_dir = finished_run
    rows = build_trial_history([build_history_row(report(n)) for n in range(1, 4)])
    (run_dir / "history.json").write_text(json.dumps(rows))
    for name in ("checkpoint-20", "checkpoint-30"):
        shutil.rmtree(run_dir / name)
    # the one checkpoint left stops at the first evaluation: only history.json knows the rest
    got = trial_module.read_finished_report(str(run_dir.parent), "t1", OBJECTIVE)
    expected = report(3)
    assert {k: got[k] for k in expected} == expected


def test_a_trial_without_its_record_trains_on(finished_run):
    _, run_dir = finished_run
    (run_dir / "trial_result.json").unlink()
    assert trial_module.read_finished_report(str(run_dir.parent), "t1", OBJECTIVE) is None


@pytest.mark.parametrize("damage", ["torn", "missing"])
def test_a_finished_trial_whose_history_cannot_be_read_is_restored_instead(finished_run, damage):
    _, run_dir = finished_run
    for state in run_dir.glob("checkpoint-*/trainer_state.json"):
        if damage == "torn":
            state.write_text('{"log_hist')
        else:
            state.unlink()
    assert trial_module.read_finished_report(str(run_dir.parent), "t1", OBJECTIVE) is None


class NoCalls:
    def __getattr__(self, name):
        raise AssertionError(f"the finished trial's driver used {name}")


def test_the_driver_reports_and_returns_without_training(finished_run, monkeypatch):
    sweep, run_dir = finished_run
    before = {p.relative_to(run_dir): p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    reports = []
    monkeypatch.setattr(ray.tune, "get_context", lambda: SimpleNamespace(get_trial_id=lambda: "t1"))
    monkeypatch.setattr(ray.tune, "report", reports.append)
    monkeypatch.setattr(trial_module, "build_trainer", lambda *a, **k: NoCalls().build_trainer)
    job, _ = load_sweep_configs(None, None, [])
    trial_module.train_driver_fn({"training.learning_rate": 1e-3}, job=job.model_dump(), objective=OBJECTIVE,
                                 sweep_path=str(sweep), data_ref=[None], trial_runs=NoCalls())
    assert reports == [report(3)]
    assert {p.relative_to(run_dir): p.stat().st_mtime_ns for p in run_dir.rglob("*")} == before
