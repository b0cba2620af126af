"""``ftplat ds-estimate --model``: a value written as a path (``/``, ``./``, ``../``, ``~``) is a
local model folder, never a hub id, as for the sweep's ``model.name_or_path``; a missing one is
named as missing instead of transformers' "Repo id must be in the form" message."""

from __future__ import annotations

import pytest

from ftplat.cli.main import main as ftplat_main


@pytest.mark.parametrize("model", ["{tmp}/none", "./none", "../none-{name}", "~/none-{name}"])
def test_a_missing_local_path_is_named_as_missing(model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = model.format(tmp=tmp_path, name=tmp_path.name)
    assert ftplat_main(["ds-estimate", "--model", model, "--num-gpus", "1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: --model {model!r} does not exist; give a local model directory or a hub id"]


def test_a_home_path_is_expanded(tmp_path, capsys, monkeypatch):
    pytest.importorskip("deepspeed")
    from transformers import BertConfig

    BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64).save_pretrained(tmp_path / "tiny")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ftplat_main(["ds-estimate", "--model", "~/tiny", "--num-gpus", "1"]) == 0
    assert "BertForSequenceClassification" in capsys.readouterr().out
