"""``ftplat reproduce`` runs the new sweep beside the sweep folder it was given, wherever that
folder is now: a sweep copied or moved since it ran is not reproduced where it first ran."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_reproduce import recorded_config, summary, trial

import ftplat.tune.plan
from ftplat.cli.main import main as ftplat_main
from ftplat.errors import UserError
from ftplat.storage import write_json
from ftplat.tune.reproduce import build_reproduce_configs, read_recorded_sweep

VALUES = {"training.learning_rate": 3e-5, "training.warmup_steps": 0.05, "training.weight_decay": 0.01}


def write_ended_sweep(root: Path, recorded_root: str) -> Path:
    """A finished sweep ``orig`` under ``root`` whose records say it ran under ``recorded_root``."""
    sweep = root / "orig"
    write_json(str(sweep / "sweep_config.json"),
               recorded_config(f"storage.storage_path={recorded_root}", "storage.sweep_name=orig"))
    s = summary([trial("t1", VALUES, [0.5])], winner="t1")
    s.sweep_path = str(sweep)
    s.write()
    return sweep


@pytest.fixture
def planned_jobs(monkeypatch) -> list:
    """The jobs ``ftplat reproduce`` would start, stopped at its pre-flight (no Ray here)."""
    jobs = []

    def stop_at_preflight(job, space, *, resume):
        jobs.append(job)
        raise UserError("stopped before the sweep starts")

    monkeypatch.setattr(ftplat.tune.plan, "check_dry_run", stop_at_preflight)
    return jobs


def test_a_copied_sweep_is_reproduced_beside_the_copy(tmp_path, capsys, planned_jobs, monkeypatch):
    original_root, copy_root = tmp_path / "ran-here", tmp_path / "copied-here"
    shutil.copytree(write_ended_sweep(original_root, str(original_root)), copy_root / "orig")
    monkeypatch.chdir(tmp_path)
    for argv in ([str(copy_root / "orig")], ["orig", "--storage", str(copy_root)], ["./copied-here/orig/"]):
        assert ftplat_main(["reproduce", *argv]) == 2
        assert "stopped before the sweep starts" in capsys.readouterr().err
        job = planned_jobs.pop()
        assert (job.storage.storage_path, job.storage.sweep_name) == (str(copy_root.resolve()), "orig-reproduce-t1")


def test_an_override_of_the_storage_still_wins(tmp_path, capsys, planned_jobs):
    sweep = write_ended_sweep(tmp_path, "/where/it/ran")
    assert ftplat_main(["reproduce", str(sweep), f"storage.storage_path={tmp_path / 'other'}"]) == 2
    assert planned_jobs[0].storage.storage_path == str(tmp_path / "other")


def test_the_recorded_storage_is_replaced_by_the_sweeps_parent(tmp_path):
    from ftplat.tune.reproduce import build_parent_uri

    sweep = write_ended_sweep(tmp_path / "now", "/where/it/ran")
    config, original = read_recorded_sweep(str(sweep))
    job, _ = build_reproduce_configs(config, original.trials[0], sweep_name="r")
    assert job.storage.storage_path == str((tmp_path / "now").resolve())
    assert [build_parent_uri(u) for u in ("s3://bkt/prefix/orig", "s3://bkt/orig/", "file:///data/orig")] == [
        "s3://bkt/prefix", "s3://bkt", "file:///data"]
