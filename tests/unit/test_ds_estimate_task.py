"""``ftplat ds-estimate --task``: the model counted is the one the job's task trains, so a
causal LM's untied output layer (vocabulary x hidden, often the largest layer) is in the
estimate; a sequence-classification head in its place undercounted it."""

from __future__ import annotations

import re

import pytest

from ftplat.cli.main import main as ftplat_main

pytest.importorskip("deepspeed")


@pytest.fixture
def untied_gpt2(tmp_path):
    from transformers import GPT2Config

    GPT2Config(vocab_size=5000, n_embd=32, n_layer=1, n_head=2, n_positions=64,
               tie_word_embeddings=False).save_pretrained(tmp_path / "gpt2")
    return str(tmp_path / "gpt2")


def read_counts(out: str) -> tuple[str, int, int]:
    found = re.search(r"Model: (\w+), ([\d,]+) parameters, largest layer ([\d,]+);", out)
    assert found, out
    return found[1], int(found[2].replace(",", "")), int(found[3].replace(",", ""))


def test_causal_lm_counts_its_untied_output_layer(untied_gpt2, capsys):
    assert ftplat_main(["ds-estimate", "--model", untied_gpt2, "--num-gpus", "1", "--task", "causal-lm"]) == 0
    name, total, largest = read_counts(capsys.readouterr().out)
    assert name == "GPT2LMHeadModel"
    assert largest == 5000 * 32  # the output layer, the embedding's size again
    assert ftplat_main(["ds-estimate", "--model", untied_gpt2, "--num-gpus", "1"]) == 0
    name, seq_cls_total, _ = read_counts(capsys.readouterr().out)
    assert name == "GPT2ForSequenceClassification"
    assert total - seq_cls_total == 5000 * 32 - 2 * 32  # lm_head replaces the 2-class score head


def test_a_task_the_model_has_no_class_for_is_named(tmp_path, capsys):
    from transformers import ViTConfig

    ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32).save_pretrained(
        tmp_path / "vit")
    model = str(tmp_path / "vit")
    assert ftplat_main(["ds-estimate", "--model", model, "--num-gpus", "1", "--task", "causal-lm"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --model {model!r} has no AutoModelForCausalLM model for --task causal-lm ("), err
    assert len(err.splitlines()) == 1


def test_an_unknown_task_is_refused(untied_gpt2, capsys):
    with pytest.raises(SystemExit) as exc:
        ftplat_main(["ds-estimate", "--model", untied_gpt2, "--num-gpus", "1", "--task", "summarization"])
    assert exc.value.code == 2
    assert "--task: invalid choice: 'summarization'" in capsys.readouterr().err
