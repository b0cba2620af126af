"""``ftplat checkpoints gc`` run by hand while a ``--resume`` runs: ``summary.json`` is the
previous run's, so a trial it lists as failed may be running again. Nothing of such a sweep is
applied (every action deferred), and a folder Ray's snapshot tracks is never an "orphan".
Its flags are checked as the config's are (``--save-total-limit 0`` is refused, not ignored)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ray_runs import METRIC, RayRun

from ftplat.cli.checkpoints import main as gc_main


def row(step: int, value: float) -> dict:
    return {"step": step, "checkpoint_name": f"checkpoint-{step}", METRIC: value}


def folders(root: Path, trial_id: str) -> list[str]:
    return sorted(p.name for p in (root / f"train-{trial_id}").iterdir() if p.is_dir())


@pytest.fixture
def resumed(tmp_path) -> Path:
    """a finished; b failed in the first run (so summary.json says ERROR) and ``--resume`` runs
    it again: its controller has registered two more checkpoints since (b now leads)."""
    root = tmp_path / "sweep"
    a, b = RayRun(root, "a"), RayRun(root, "b")
    for step, value in ((10, 0.5), (20, 0.6)):
        a.report(row(step, value))
        b.report(row(step, value - 0.2))
    summary = {"scope": "last", "objective": {"metric": METRIC, "mode": "max"}, "metric_for_best_model": METRIC,
               "greater_is_better": True, "save_total_limit": 2, "retention": {},
               "winner": {"trial_id": "a", "score": .6},
               "trials": [{"trial_id": "a", "status": "TERMINATED", "scores": {"last": .6},
                           "history": [row(10, .5), row(20, .6)]},
                          {"trial_id": "b", "status": "ERROR", "scores": {"last": .4},
                           "history": [row(10, .3), row(20, .4)]}]}
    (root / "summary.json").write_text(json.dumps(summary))
    b.report(row(30, 0.95))
    b.report(row(40, 0.7))
    assert b.latest_registered() == "checkpoint-40"
    return root


def write_experiment_state(root: Path, *, newer_than_summary: bool) -> None:
    from ray.tune.execution.tune_controller import TuneController

    state = root / TuneController.CKPT_FILE_TMPL.format("2026-11-29_10-00-00")
    state.write_text("{}")
    summary_mtime = (root / "summary.json").stat().st_mtime
    when = summary_mtime + (60 if newer_than_summary else -60)
    os.utime(state, (when, when))


def test_gc_keeps_what_the_snapshot_tracks_and_the_stale_summary_does_not_name(resumed, capsys):
    assert gc_main(["gc", str(resumed)]) == 0
    assert folders(resumed, "b") == ["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"]
    out = capsys.readouterr().out
    assert "orphan, not tracked" not in out


def test_gc_defers_everything_while_tune_has_saved_after_the_summary(resumed, capsys):
    write_experiment_state(resumed, newer_than_summary=True)
    before = {str(p): p.stat().st_mtime_ns for p in resumed.rglob("*")}
    assert gc_main(["gc", str(resumed), "--save-total-limit", "1"]) == 0
    assert {str(p): p.stat().st_mtime_ns for p in resumed.rglob("*")} == before
    captured = capsys.readouterr()
    actions = {line.split()[0] for line in captured.out.splitlines()[:-2]}
    assert actions == {"keep", "defer"}
    assert "deferred: the sweep ran after summary.json was written" in captured.out
    assert "nothing applied" in captured.err


def test_gc_applies_when_the_summary_is_newer_than_tunes_state(resumed):
    write_experiment_state(resumed, newer_than_summary=False)
    assert gc_main(["gc", str(resumed), "--save-total-limit", "1", "--keep-top-k-trials", "0",
                    "--no-trial-latest"]) == 0
    assert folders(resumed, "a") == ["checkpoint-20"]


@pytest.mark.parametrize("flag, value", [("--save-total-limit", "0"), ("--save-total-limit", "-1"),
                                         ("--keep-top-k-trials", "-1")])
def test_limits_the_config_refuses_are_refused(resumed, capsys, flag, value):
    before = {str(p) for p in resumed.rglob("*")}
    assert gc_main(["gc", str(resumed), flag, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag} must be") and len(err.strip().splitlines()) == 1
    assert {str(p) for p in resumed.rglob("*")} == before


def test_a_copied_sweep_whose_summary_names_its_state_file_is_not_taken_for_resumed(resumed, capsys):
    """`cp -r` gives every file a new mtime in directory order: the state file came out newer
    than the summary, and gc deferred forever (sweeps show said "running"). The summary names
    the state file it followed; a resume saves under a new name."""
    from ftplat.checkpoints.gc import read_resumed_since_summary

    write_experiment_state(resumed, newer_than_summary=True)
    summary = json.loads((resumed / "summary.json").read_text())
    (resumed / "summary.json").write_text(json.dumps({**summary, "tune_state_file":
                                                      "experiment_state-2026-11-29_10-00-00.json"}))
    write_experiment_state(resumed, newer_than_summary=True)  # the copy's order: state after summary
    assert not read_resumed_since_summary(str(resumed))
    (resumed / "experiment_state-2026-11-29_11-00-00.json").write_text("{}")  # a --resume saved
    assert read_resumed_since_summary(str(resumed))
