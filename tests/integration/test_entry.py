"""jobs/imdb_sweep.py's real main on a tiny config, with 2 data-parallel workers per trial."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_imdb_sweep_entry_script(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path, monkeypatch, capsys):
    argv = [
        "jobs/imdb_sweep.py",
        "--model", str(tiny_model_dir),
        "--dataset", str(sentiment_data_dir),
        "--storage", str(tmp_path),
        "--name", "entry",
        "--search-space", str(REPO / "search_spaces" / "smoke.yaml"),
        "data.max_length=48",
        "data.train_size=512",
        "data.eval_size=128",
        "training.num_train_epochs=1.0",
        "training.per_device_train_batch_size=8",
        "resources.num_workers=2",
        "resources.cpus_per_worker=1",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(REPO / "jobs" / "imdb_sweep.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "Winner (scope=last): trial " in out

    summary = json.loads((tmp_path / "entry" / "summary.json").read_text())
    assert summary["num_trials"] == 2 and summary["status_counts"] == {"TERMINATED": 2}
    for trial in summary["trials"]:
        # two workers, one report per evaluation (rank 0 reports; rank 1 only joins the barrier)
        assert trial["num_evaluations"] == 1 and len(trial["history"]) == 1
        # 512 examples / (8 per device x 2 workers) = 32 optimizer steps in the epoch
        assert trial["history"][0]["step"] == 32
        ckpt = Path(trial["best_checkpoint"]["path"])
        assert (ckpt / "model.safetensors").is_file() and (ckpt / "trainer_state.json").is_file()
        # each rank's RNG state lands in the one merged checkpoint
        assert {p.name for p in ckpt.glob("rng_state_*.pth")} == {"rng_state_0.pth", "rng_state_1.pth"}
