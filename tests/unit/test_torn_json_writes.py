"""A JSON file that a write cut short (a full disk, a killed driver) is never left torn:
``write_json`` writes aside and moves over. A ``history.json`` torn by an older writer is read
as "history unknown": retention keeps the trial's checkpoints and the summary is still built."""

from __future__ import annotations

import errno
import json
import logging

import pytest
from ray.tune.experiment import Trial
from test_retention_resume import SweepSim

import ftplat.storage as storage
import ftplat.tune.live_retention as live_retention
from ftplat.records import SweepSummary
from ftplat.storage import read_json, write_json
from ftplat.tune.run_history import read_finished_evaluations, read_stored_history, read_trial_history_file


class _StreamCutShort:
    """An output stream that writes ``limit`` bytes of the first write, then fails (ENOSPC)."""

    def __init__(self, real, limit: int):
        self.real, self.limit = real, limit

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()

    def write(self, data: bytes) -> None:
        self.real.write(data[: self.limit])
        raise OSError(errno.ENOSPC, "No space left on device")


class _FullDisk:
    """The local filesystem, on a disk that fills up in the middle of each write."""

    type_name = "local"

    def __init__(self, fs):
        self.fs = fs

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open_output_stream(self, path):
        return _StreamCutShort(self.fs.open_output_stream(path), limit=20)


@pytest.fixture
def full_disk(monkeypatch):
    real = storage.resolve_storage

    def resolve(uri):
        fs, path = real(uri)
        return _FullDisk(fs), path

    return lambda: monkeypatch.setattr(storage, "resolve_storage", resolve)


def test_a_write_cut_short_leaves_the_previous_file_whole(tmp_path, full_disk):
    target = tmp_path / "run" / "history.json"
    write_json(str(target), [{"step": 10}])
    full_disk()
    rows = [{"step": 10 * i, "checkpoint_name": f"checkpoint-{10 * i}", "eval_accuracy": 0.5} for i in range(1, 400)]
    with pytest.raises(OSError):
        write_json(str(target), rows)
    assert read_json(str(target)) == [{"step": 10}]
    assert [p.name for p in target.parent.iterdir()] == ["history.json"]  # nothing left aside


def test_a_summary_write_cut_short_leaves_the_previous_summary(tmp_path, full_disk):
    summary = SweepSummary.from_dict({"sweep_name": "s", "sweep_path": str(tmp_path), "scope": "last",
                                      "objective": {"metric": "eval_accuracy", "mode": "max"},
                                      "metric_for_best_model": "eval_accuracy", "trials": []})
    summary.write()
    full_disk()
    summary.sweep_name = "a longer name, so the write is cut short"
    with pytest.raises(OSError):
        summary.write()
    assert SweepSummary.read(str(tmp_path)).sweep_name == "s"


@pytest.mark.parametrize("content", ['[{"step": 10, "chec', "", '{"step": 10}'])
def test_an_unreadable_history_json_is_history_unknown(tmp_path, content):
    run = tmp_path / "train-b"
    run.mkdir()
    (run / "history.json").write_text(content)
    assert read_trial_history_file(str(run)) is None
    assert read_stored_history(str(run)).unreadable
    assert read_finished_evaluations(str(run), "eval_accuracy") is None  # and no checkpoint either


def test_a_torn_history_json_keeps_the_trials_checkpoints_and_the_sweep_its_summary(tmp_path, monkeypatch, caplog):
    sim = SweepSim(tmp_path / "sweep", ["training.save_total_limit=1", "search.scope=last"])
    sim.add_trial("b")
    sim.add_trial("c")
    sim.trials["c"].set_status(Trial.PENDING)
    for value in (0.6, 0.9, 0.89, 0.89):
        sim.report("b", value)

    def torn_write(uri, payload):  # what a writer in place left when the disk filled up
        with open(uri.replace("file://", ""), "w") as f:
            f.write('[{"step": 10, "chec')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(live_retention, "write_json", torn_write)
    sim.complete("b")
    monkeypatch.undo()
    kept = {p.name for p in (sim.root / "train-b").iterdir() if p.is_dir()}
    sim.save_state()
    sim.resume(with_state=True)
    sim.trials["c"].set_status(Trial.RUNNING)
    caplog.set_level(logging.WARNING)
    for _ in range(4):
        sim.report("c", 0.5)
    sim.complete("c")
    assert not [r for r in caplog.records if "JSONDecodeError" in r.getMessage()]
    assert {p.name for p in (sim.root / "train-b").iterdir() if p.is_dir()} == kept  # history unknown: kept
    summary = sim.end()
    assert summary.winner.trial_id == "b" and sim.exists("b", summary.winner.best_checkpoint.name)
    assert json.loads(json.dumps(summary.to_dict()))["winner"]["trial_id"] == "b"
