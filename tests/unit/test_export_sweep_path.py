"""``ftplat export SWEEP OUT_DIR`` reads the winner's checkpoint under SWEEP as given (the path
summary.json records is where the driver saw the sweep), and refuses bad input with one
``error:`` line and exit 2 before writing anything: a best checkpoint that is gone, an OUT_DIR
that is a file, a --push-to-hub that is no repo id."""

from __future__ import annotations

import json
import shutil

import pytest
from test_export_tasks import write_sweep

from ftplat.cli.main import main as ftplat_main


def test_a_sweep_seen_at_another_path_exports_from_there(tmp_path, capsys):
    sweep = write_sweep(tmp_path / "cluster", "regression", sweep_config=None, task="regression")
    capsys.readouterr()  # the tiny checkpoint's save logs
    moved = tmp_path / "laptop" / "sweep"
    moved.parent.mkdir()
    shutil.move(str(sweep), str(moved))  # another mount, or a copied folder
    out = tmp_path / "out"
    assert ftplat_main(["export", str(moved), str(out)]) == 0
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    source = json.loads((out / "ftplat_export.json").read_text())["trial"]["best_checkpoint"]["path"]
    assert source == str(moved / "train-t1" / "checkpoint-20")
    assert f"from {moved / 'train-t1' / 'checkpoint-20'}" in capsys.readouterr().out


def test_a_deleted_best_checkpoint_is_a_user_error(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    capsys.readouterr()  # the tiny checkpoint's save logs
    shutil.rmtree(sweep / "train-t1" / "checkpoint-20")
    assert ftplat_main(["export", str(sweep), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the winner's best checkpoint checkpoint-20 (trial t1) is not in") and \
        len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_out_dir_that_is_a_file_is_a_user_error(tmp_path, capsys):
    sweep = write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    capsys.readouterr()  # the tiny checkpoint's save logs
    (tmp_path / "out").write_text("not a folder")
    assert ftplat_main(["export", str(sweep), str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(f"error: OUT_DIR {str(tmp_path / 'out')!r} is a file")


@pytest.mark.parametrize("repo_id", ["not a valid/repo id", "a/b/c", "me/model-"])
def test_an_invalid_repo_id_is_refused_before_exporting(tmp_path, capsys, repo_id):
    sweep = write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    capsys.readouterr()  # the tiny checkpoint's save logs
    assert ftplat_main(["export", str(sweep), str(tmp_path / "out"), "--push-to-hub", repo_id]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --push-to-hub {repo_id!r} is not a Hugging Face repo id") and \
        len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
