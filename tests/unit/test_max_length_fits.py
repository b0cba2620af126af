"""``data.max_length`` longer than the model reads is refused when the tokenizer loads (before
any cluster work), naming the limit: a model with learned positions failed in every trial on
blocks or texts that long. No fixed cap: a long-context model takes what it reads."""

from __future__ import annotations

import json
import re

import pytest
from tiny_assets import write_tiny_llama

from ftplat.config.schema import JobConfig
from ftplat.data.preparation import build_tokenized_tables
from ftplat.errors import UserError


def job_of(model_dir, data_dir, max_length: int, **task) -> JobConfig:
    return JobConfig.model_validate({
        "task": task or {"type": "text-classification"}, "model": {"name_or_path": str(model_dir)},
        "data": {"source": str(data_dir), "max_length": max_length, "train_size": 16, "eval_size": 8,
                 "test_split": None}})


def with_positions(model_dir, root, positions: int):
    """A copy of the tiny BERT whose config has ``positions`` position rows (its tokenizer
    states no limit); data preparation reads no weights."""
    import shutil

    shutil.copytree(model_dir, root)
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "max_position_embeddings": positions}))
    return root


def test_the_learned_positions_of_the_config_bound_max_length(tiny_model_dir, sentiment_data_dir, tmp_path):
    model = with_positions(tiny_model_dir, tmp_path / "model", 128)
    assert build_tokenized_tables(job_of(model, sentiment_data_dir, 128)).tables["train"].num_rows == 16
    message = (f"data.max_length is 160, but model.name_or_path {str(model)!r} reads at most 128 tokens "
               "(its config's max_position_embeddings); set data.max_length to 128 or less")
    with pytest.raises(UserError, match=f"^{re.escape(message)}$"):
        build_tokenized_tables(job_of(model, sentiment_data_dir, 160))
    with pytest.raises(UserError, match="reads at most 128 tokens"):
        build_tokenized_tables(job_of(model, sentiment_data_dir, 256, type="masked-lm"))


def test_the_tokenizers_stated_limit_comes_first(tiny_model_dir, sentiment_data_dir, tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 64}))
    with pytest.raises(UserError, match=r"reads at most 64 tokens \(its tokenizer's model_max_length\)"):
        build_tokenized_tables(job_of(model, sentiment_data_dir, 100))


def test_a_rotary_model_and_a_long_context_are_left_to_the_user(tmp_path, sentiment_data_dir):
    llama = write_tiny_llama(tmp_path / "llama")  # rotary, 128 max_position_embeddings
    job = job_of(llama, sentiment_data_dir, 16384, type="causal-lm")
    assert job.data.max_length == 16384  # no fixed cap in the schema (it was 8192)
    assert build_tokenized_tables(job).tables["train"].num_rows == 16


@pytest.mark.parametrize("config, kwargs, expected", [
    ("BertConfig", {"max_position_embeddings": 512}, (512, "its config's max_position_embeddings")),
    # position ids start after the padding index: 514 rows read 512 tokens
    ("RobertaConfig", {"max_position_embeddings": 514, "pad_token_id": 1},
     (512, "its config's max_position_embeddings less the padding offset")),
    ("GPT2Config", {"n_positions": 1024}, (1024, "its config's max_position_embeddings")),  # an alias
    ("DebertaV2Config", {"max_position_embeddings": 512, "position_biased_input": False}, None),  # relative
    # transformers 5 builds BERT's table whatever position_embedding_type says
    ("BertConfig", {"position_embedding_type": "relative_key"}, (512, "its config's max_position_embeddings")),
    # relative buckets beside a learned table that starts after the padding index
    ("MPNetConfig", {"max_position_embeddings": 514},
     (512, "its config's max_position_embeddings less the padding offset")),
    ("T5Config", {}, None),
    ("LlamaConfig", {}, None),  # rotary
])
def test_learned_position_limits(config, kwargs, expected):
    import transformers

    from ftplat.data.tokenizer import read_learned_position_limit

    assert read_learned_position_limit(getattr(transformers, config)(**kwargs)) == expected
