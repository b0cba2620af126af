"""``ftplat sweeps show`` and ``list`` over sweep folders written as a sweep writes them: the
sweep config, Tune's experiment state (written with Tune's own Trial serialisation), each
trial's ``result.json``, ftplat's per-trial history and training record, and the summary."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest
from ray.train._internal.storage import StorageContext
from ray.tune.execution.placement_groups import PlacementGroupFactory
from ray.tune.experiment import Trial

from ftplat.cli.main import main as ftplat_main
from ftplat.config.loading import load_sweep_configs
from ftplat.records import Objective, SweepSummary, TrialRecord, Winner
from ftplat.tune.status import (
    COMPLETED,
    STOPPED,
    TRIAL_FAILED,
    TrialProgress,
    build_leader,
    build_remaining_s,
    read_sweep_status,
)

LR = "training.learning_rate"


def write_sweep(root: Path, name: str, trials: list[dict], *, overrides: tuple[str, ...] = (),
                stored_order: list[int] | None = None) -> Path:
    """A sweep folder holding ``trials``: each a dict with ``id``, ``status``, ``lr``, ``values``
    (its evaluations), ``time_total_s`` (at its last), ``started`` (seconds ago), and optionally
    ``completed`` (it wrote its training record), ``history_file`` (live retention wrote its
    history) and ``tune_from`` (Tune's results begin at this evaluation, as after a resume)."""
    sweep, now = root / name, time.time()
    job, space = load_sweep_configs(None, None, [
        f"storage.storage_path={root}", f"storage.sweep_name={name}", "search.num_samples=4",
        "resources.max_concurrent_trials=1",
        "search.parameters={training.learning_rate: {type: loguniform, low: 1.0e-5, high: 1.0e-3}}", *overrides])
    sweep.mkdir(parents=True)
    (sweep / "sweep_config.json").write_text(json.dumps(
        {"job": job.model_dump(mode="json"), "search_space": space.model_dump(mode="json")}))
    tune_trials = []
    for n, spec in enumerate(trials, start=1):
        storage = StorageContext(storage_path=str(root), experiment_dir_name=name)
        trial = Trial("fn", trial_id=spec["id"], experiment_tag=f"{n}_lr={spec['lr']}", stub=True, storage=storage,
                      config={LR: spec["lr"]})
        trial.placement_group_factory = PlacementGroupFactory([{"CPU": 1}])  # what Tune sets when it runs
        trial.storage.trial_dir_name = f"train_driver_fn_{spec['id']}_{n}"
        trial.set_status(spec["status"])
        rows = [{"training_iteration": i, "step": 10 * i, "epoch": float(i), "num_evaluations": i,
                 "eval_accuracy": v, "objective": v, "checkpoint_name": f"checkpoint-{10 * i}",
                 "time_total_s": spec["time_total_s"] * i / len(spec["values"]),
                 "timestamp": now - spec["started"] + spec["time_total_s"] * i / len(spec["values"]),
                 "trial_id": spec["id"]}
                for i, v in enumerate(spec["values"], start=1)]
        tune_trials.append(trial)
        if spec["status"] == Trial.PENDING:  # not started: no folder of its own yet
            continue
        trial_dir = sweep / trial.storage.trial_dir_name
        trial_dir.mkdir()
        (trial_dir / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows[spec.get("tune_from", 0):]))
        run = sweep / f"train-{spec['id']}"
        run.mkdir()
        if spec.get("completed"):
            (run / "trial_result.json").write_text(json.dumps({"global_step": 10 * len(rows), "train_runtime": 1.0}))
        if spec.get("history_file"):
            history = [{k: v for k, v in r.items() if k not in ("time_total_s", "timestamp")} for r in rows]
            (run / "history.json").write_text(json.dumps(history))
    order = stored_order or list(range(len(tune_trials)))
    state = {"trial_data": [tune_trials[i].get_json_state() for i in order], "runner_data": {},
             "stats": {"start_time": now - 300}}
    (sweep / "experiment_state-2026-01-01_00-00-00.json").write_text(json.dumps(state))
    return sweep


RUNNING_SWEEP = [
    # Leads under scope "last" (0.8), though the next trial had the best single evaluation; its
    # first evaluation is in the history live retention wrote only.
    {"id": "aaaa0001", "status": Trial.TERMINATED, "lr": 1e-4, "values": [0.6, 0.8], "time_total_s": 100.0,
     "started": 250.0, "completed": True, "history_file": True, "tune_from": 1},
    # Stopped by the scheduler: it ended without its training record.
    {"id": "aaaa0002", "status": Trial.TERMINATED, "lr": 2e-4, "values": [0.9, 0.5], "time_total_s": 50.0,
     "started": 140.0},
    # Tune's saved state reads a running trial back as PENDING: its folders say it started.
    {"id": "aaaa0003", "status": Trial.RUNNING, "lr": 3e-4, "values": [0.7], "time_total_s": 20.0, "started": 30.0},
    {"id": "aaaa0004", "status": Trial.PENDING, "lr": 4e-4, "values": [], "time_total_s": 0.0, "started": 0.0},
]


def show_json(capsys, *args: str) -> dict:
    assert ftplat_main(["sweeps", "show", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_show_running_sweep_reports_trials_leader_time_and_storage(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "live", RUNNING_SWEEP)
    shown = show_json(capsys, str(sweep))
    assert shown["status"] == "running"
    assert (shown["num_samples"], shown["trials_done"], shown["trials_running"]) == (4, 2, 1)
    assert shown["objective"] == {"metric": "eval_accuracy", "mode": "max"} and shown["scope"] == "last"
    trials = {t["trial_id"]: t for t in shown["trials"]}
    assert [t["trial_id"] for t in shown["trials"]] == ["aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"]
    assert {tid: (t["status"], t["ended"], t["num_evaluations"], t["score"], t["best"])
            for tid, t in trials.items()} == {
        "aaaa0001": ("TERMINATED", COMPLETED, 2, 0.8, 0.8),
        "aaaa0002": ("TERMINATED", STOPPED, 2, 0.5, 0.9),
        "aaaa0003": ("RUNNING", None, 1, 0.7, 0.7),
        "aaaa0004": ("PENDING", None, 0, None, None)}
    assert trials["aaaa0002"]["hyperparameters"] == {LR: 2e-4}
    assert shown["leader"]["trial_id"] == "aaaa0001" and shown["leader"]["score"] == 0.8
    # The running trial has run 30 s of a mean 75 s; one trial is still to run; one at a time.
    assert trials["aaaa0003"]["duration_s"] == pytest.approx(30.0, abs=5)
    assert shown["remaining_s"] == pytest.approx(45.0 + 75.0, abs=5)
    assert shown["elapsed_s"] == pytest.approx(250.0, abs=5)  # from the first trial's start
    files = [p for p in sweep.rglob("*") if p.is_file()]
    assert shown["storage_bytes"] == sum(p.stat().st_size for p in files) > 0
    assert shown["storage_files"] == len(files)


def test_scope_decides_the_leader_and_ties_go_to_the_trial_created_first(tmp_path, capsys):
    trials = [
        {"id": "bbbb0001", "status": Trial.TERMINATED, "lr": 1e-4, "values": [0.5, 0.7], "time_total_s": 10.0,
         "started": 60.0},
        {"id": "bbbb0002", "status": Trial.TERMINATED, "lr": 2e-4, "values": [0.9, 0.5], "time_total_s": 10.0,
         "started": 40.0},
        {"id": "bbbb0003", "status": Trial.TERMINATED, "lr": 3e-4, "values": [0.9, 0.1], "time_total_s": 10.0,
         "started": 20.0},
    ]
    # Tune stores trials in a set's order: the later of the two tied trials comes first.
    sweep = write_sweep(tmp_path, "scoped", trials, overrides=("search.scope=all",), stored_order=[2, 1, 0])
    shown = show_json(capsys, str(sweep))
    assert [t["score"] for t in shown["trials"]] == [0.7, 0.9, 0.9]
    assert shown["leader"]["trial_id"] == "bbbb0002"
    last = read_sweep_status(str(write_sweep(tmp_path, "last", trials)))
    assert last.leader == "bbbb0001"


def test_a_sweep_whose_folder_stopped_changing_is_interrupted(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "dead", RUNNING_SWEEP)
    old = time.time() - 3600
    for p in sweep.rglob("*"):
        os.utime(p, (old, old))
    shown = show_json(capsys, str(sweep))
    assert shown["status"] == "interrupted" and shown["remaining_s"] is None
    assert shown["last_change"] == pytest.approx(old, abs=1)
    assert shown["leader"]["trial_id"] == "aaaa0001"
    assert show_json(capsys, str(sweep), "--stale-after", "7200")["status"] == "running"


def _summary(sweep: Path, winner: str | None) -> SweepSummary:
    trials = [TrialRecord(trial_id="aaaa0001", status="TERMINATED", hyperparameters={LR: 1e-4},
                          scores={"last": 0.8, "all": 0.8}, train_result={"train_runtime": 95.0},
                          history=[{"training_iteration": 1, "eval_accuracy": 0.6},
                                   {"training_iteration": 2, "eval_accuracy": 0.8}]),
              TrialRecord(trial_id="aaaa0002", status="ERROR", hyperparameters={LR: 2e-4}, scores={"last": None},
                          error="RuntimeError: boom")]
    return SweepSummary(sweep_name=sweep.name, sweep_path=str(sweep), objective=Objective("eval_accuracy", "max"),
                        scope="last", metric_for_best_model="eval_accuracy", greater_is_better=True, trials=trials,
                        winner=Winner("aaaa0001", 0.8, {LR: 1e-4}, None) if winner else None, wall_seconds=321.0,
                        tracking_error="MLflow down")


def test_show_finished_and_failed_sweeps_from_their_summary(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "done", RUNNING_SWEEP[:2])
    _summary(sweep, "aaaa0001").write()
    shown = show_json(capsys, str(sweep))
    assert shown["status"] == "finished" and shown["remaining_s"] == 0.0 and shown["elapsed_s"] == 321.0
    assert shown["leader"]["trial_id"] == "aaaa0001"
    assert [(t["trial_id"], t["status"], t["ended"], t["error"]) for t in shown["trials"]] == [
        ("aaaa0001", "TERMINATED", COMPLETED, None), ("aaaa0002", "ERROR", "failed", "RuntimeError: boom")]
    assert shown["errors"] == ["tracking: MLflow down"]
    _summary(sweep, None).write()
    shown = show_json(capsys, str(sweep))
    assert shown["status"] == "failed" and shown["leader"] is None


def test_a_resume_running_after_the_summary_is_shown_live_not_finished(tmp_path, capsys):
    """The summary of the first run says aaaa0002 failed; --resume runs it again, and Tune's
    state, saved since, is what the sweep is now (as ``checkpoints gc`` reads it)."""
    resumed = [RUNNING_SWEEP[0], {**RUNNING_SWEEP[1], "status": Trial.RUNNING, "started": 20.0}]
    sweep = write_sweep(tmp_path, "resumed", resumed)
    _summary(sweep, "aaaa0001").write()
    [state] = sweep.glob("experiment_state-*.json")
    os.utime(sweep / "summary.json", (time.time() - 60, time.time() - 60))
    os.utime(state, (time.time(), time.time()))
    shown = show_json(capsys, str(sweep))
    assert shown["status"] == "running"
    assert [(t["trial_id"], t["status"]) for t in shown["trials"]] == [("aaaa0001", "TERMINATED"),
                                                                       ("aaaa0002", "RUNNING")]


def test_show_text_names_the_leader_and_marks_it(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "live", RUNNING_SWEEP)
    assert ftplat_main(["sweeps", "show", "live", "--storage", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Sweep live: running") and str(sweep) in out[0]
    assert "trials 2 done of 4, 1 running" in out[1]
    assert out[3].startswith("leader: trial aaaa0001 eval_accuracy[last]=0.8000 [training.learning_rate=0.0001]")
    marked = [ln for ln in out if ln.startswith("*")]
    assert len(marked) == 1 and "aaaa0001" in marked[0] and "completed" in marked[0]
    assert any("aaaa0002" in ln and "stopped" in ln for ln in out)


def test_list_gives_one_line_per_sweep(tmp_path, capsys):
    write_sweep(tmp_path, "live", RUNNING_SWEEP)
    done = write_sweep(tmp_path, "done", RUNNING_SWEEP[:2])
    _summary(done, "aaaa0001").write()
    (tmp_path / "not-a-sweep").mkdir()
    assert ftplat_main(["sweeps", "list", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["status"], s["trials_done"], s["num_samples"], s["leader"]["score"])
            for s in listed["sweeps"]] == [("done", "finished", 2, 4, 0.8), ("live", "running", 2, 4, 0.8)]
    assert ftplat_main(["sweeps", "list", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["sweep", "status", "trials"] and len(lines) == 3
    assert lines[2].split()[:4] == ["live", "running", "2/4", "0.8000"]


def test_not_a_sweep_exits_2_with_one_line(tmp_path, capsys):
    assert ftplat_main(["sweeps", "show", str(tmp_path / "nothing")]) == 2
    assert ftplat_main(["sweeps", "list", str(tmp_path / "nothing")]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and "is not an ftplat sweep folder" in errors[0] and "does not exist" in errors[1]


def test_a_sweep_before_its_first_tune_state_has_no_trials_yet(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "new", [])
    (sweep / "experiment_state-2026-01-01_00-00-00.json").unlink()
    shown = show_json(capsys, str(sweep))
    assert (shown["status"], shown["trials"], shown["leader"], shown["remaining_s"]) == ("running", [], None, None)


def _trial(tid: str, score: float | None, ended: str | None, duration: float | None) -> TrialProgress:
    return TrialProgress(trial_id=tid, status="TERMINATED" if ended else "RUNNING", hyperparameters={},
                         num_evaluations=1, score=score, best=score, duration_s=duration, ended=ended, error=None)


def test_remaining_time_shares_the_work_among_concurrent_trials():
    trials = [_trial("a", 0.5, COMPLETED, 100.0), _trial("b", 0.6, STOPPED, 60.0), _trial("c", 0.4, None, 20.0),
              _trial("d", None, None, 70.0)]
    # mean 80: c has 60 left, d 10, and 6 trials of 10 have not started
    assert build_remaining_s(trials, 10, 2) == pytest.approx((60 + 10 + 6 * 80) / 2)
    assert build_remaining_s(trials, 10, None) == pytest.approx((60 + 10 + 6 * 80) / 2)  # as many as run now
    assert build_remaining_s(trials[2:], 10, 2) is None  # nothing done: no estimate
    assert build_leader(trials, "max") == "b" and build_leader(trials, "min") == "c"
    assert build_leader([_trial("nan", float("nan"), None, 1.0)], "max") is None
    failed = dataclasses.replace(_trial("failed", 0.6, TRIAL_FAILED, 10.0), status="ERROR")
    assert build_leader([failed, trials[1]], "max") == "b"  # of equal scores, the one the summary would choose


def test_a_line_says_how_each_trial_ended(tmp_path, caplog):
    from ftplat.tune.console import TrialEndLogCallback

    caplog.set_level("INFO", logger="ftplat")
    sweep = write_sweep(tmp_path, "ends", RUNNING_SWEEP[:2])
    callback = TrialEndLogCallback(sweep_path=str(sweep), metric="eval_accuracy", scope="last")
    finished, stopped, failed = (Trial("fn", trial_id=tid, stub=True, storage=StorageContext(
        storage_path=str(tmp_path), experiment_dir_name="ends")) for tid in ("aaaa0001", "aaaa0002", "aaaa0009"))
    finished.update_last_result({"num_evaluations": 2, "objective": 0.8})
    stopped.update_last_result({"num_evaluations": 1, "objective": 0.5})
    callback.on_trial_complete(0, [], finished)
    callback.on_trial_complete(0, [], stopped)
    failed.storage.trial_dir_name = "train_driver_fn_aaaa0009"
    failed.run_metadata.error_filename = "error.txt"  # what Trial.handle_error records
    callback.on_trial_error(0, [], failed)
    # Once Tune has copied its error file to storage, the line says why.
    (sweep / "train_driver_fn_aaaa0009").mkdir()
    (sweep / "train_driver_fn_aaaa0009" / "error.txt").write_text(
        "Failure # 1 (occurred at 2026-01-01_00-00-00)\nTraceback (most recent call last):\n"
        "  File \"worker.py\", line 1, in train\nRuntimeError: out of memory\n")
    callback.on_trial_error(0, [], failed)
    assert [r.getMessage() for r in caplog.records] == [
        "Trial aaaa0001 finished: 2 evaluation(s), eval_accuracy[last]=0.8",
        "Trial aaaa0002 stopped by the scheduler: 1 evaluation(s), eval_accuracy[last]=0.5",
        "Trial aaaa0009 failed after 0 evaluation(s), eval_accuracy[last]=-: error (details in the trial folder)",
        "Trial aaaa0009 failed after 0 evaluation(s), eval_accuracy[last]=-: RuntimeError: out of memory"]


def test_tunes_table_shows_the_searched_values_and_the_scope_score():
    from ftplat.tune.console import build_progress_reporter

    _, space = load_sweep_configs(None, None, ["search.scope=last-5-avg"])
    reporter = build_progress_reporter(space)
    # Ray 2.60 (the release ftplat verifies) keeps a reporter's columns in these attributes.
    assert reporter._parameter_columns == {p: p.rsplit(".", 1)[-1] for p in space.parameters}
    assert reporter._parameter_columns[LR] == "learning_rate"
    assert reporter._metric_columns["objective"] == "eval_accuracy[last-5-avg]"
    assert reporter._metric_columns["num_evaluations"] == "evals" and reporter._sort_by_metric


def test_a_failed_trials_line_says_why_before_storage_has_the_error_file(tmp_path, caplog):
    """Tune writes the error file on the driver at once and copies it to storage later: the
    line reads the driver's copy (Trial.error_file)."""
    from types import SimpleNamespace

    from ftplat.tune.console import TrialEndLogCallback

    caplog.set_level("INFO", logger="ftplat")
    local = tmp_path / "staging" / "error.txt"
    local.parent.mkdir()
    local.write_text("Failure # 1 (occurred at 2026-01-01_00-00-00)\nTraceback (most recent call last):\n"
                     "ValueError: labels out of range\n\n")
    failed = SimpleNamespace(trial_id="aaaa0011", last_result={}, error_file=str(local),
                             run_metadata=SimpleNamespace(error_filename="error.txt"),
                             storage=SimpleNamespace(storage_filesystem=None, trial_fs_path="/nowhere"))
    TrialEndLogCallback(sweep_path=str(tmp_path), metric="eval_loss", scope="avg").on_trial_error(0, [], failed)
    assert [r.getMessage() for r in caplog.records] == [
        "Trial aaaa0011 failed after 0 evaluation(s), eval_loss[avg]=-: ValueError: labels out of range"]


def test_a_trial_run_again_after_its_failure_shows_the_evaluations_past_its_history_json(tmp_path, capsys):
    """A failed trial gets a history.json; --resume runs it again and it evaluates past the file."""
    trial = {"id": "bbbb0001", "status": Trial.RUNNING, "lr": 1e-4, "values": [0.6, 0.7, 0.95], "time_total_s": 30.0,
             "started": 60.0, "history_file": True}
    sweep = write_sweep(tmp_path, "rerun", [trial])
    history = sweep / "train-bbbb0001" / "history.json"
    history.write_text(json.dumps(json.loads(history.read_text())[:2]))  # as the failure left it
    shown = {t["trial_id"]: t for t in show_json(capsys, str(sweep))["trials"]}["bbbb0001"]
    assert (shown["num_evaluations"], shown["score"], shown["best"]) == (3, 0.95, 0.95)


def test_the_end_line_of_a_trial_survives_storage_unreadable_for_a_moment(tmp_path, caplog, monkeypatch):
    """A log-only callback: an exception from it would reach Tune, which ends the whole sweep."""
    from ftplat.tune import console
    from ftplat.tune.console import TrialEndLogCallback

    def unreadable(*args, **kwargs):
        raise OSError("storage timed out")

    monkeypatch.setattr(console, "read_trial_finished", unreadable)
    caplog.set_level("INFO", logger="ftplat")
    trial = Trial("fn", trial_id="aaaa0001", stub=True)
    trial.update_last_result({"num_evaluations": 2, "objective": 0.8})
    TrialEndLogCallback(sweep_path=str(tmp_path), metric="eval_accuracy", scope="last").on_trial_complete(0, [], trial)
    assert [r.getMessage() for r in caplog.records] == ["Trial aaaa0001 ended: 2 evaluation(s), eval_accuracy[last]=0.8"]
