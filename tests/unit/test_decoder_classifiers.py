"""A sequence-level task on a decoder-only model (Llama, GPT-2, Qwen; usually with LoRA): its
tokenizer pads with EOS when it has no padding token, and the model gets the padding id its
config lacks (the head finds each row's last token by it). Both used to fail in every trial:
"Asking to pad but the tokenizer does not have a padding token", and "Cannot handle batch
sizes > 1 if no padding token is defined". In-process, no cluster: the data preparation and
the Trainer the worker builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_assets import write_tiny_llama

from ftplat.checkpoints.model_dir import run_write_model_dir
from ftplat.config.schema import JobConfig
from ftplat.data.preparation import build_tokenized_tables
from ftplat.tasks import TASK_FILE, build_task_for_model_dir
from ftplat.train.worker import build_trainer


@pytest.fixture(scope="module", params=["no padding token", "padding token, no config pad id"])
def decoder_dir(request, tmp_path_factory) -> Path:
    root = write_tiny_llama(tmp_path_factory.mktemp("llama") / "model", pad_token=request.param != "no padding token")
    config = json.loads((root / "config.json").read_text())
    config.pop("pad_token_id", None)  # as Llama and Qwen checkpoints ship
    (root / "config.json").write_text(json.dumps(config))
    return root


def test_a_decoder_model_classifies_in_batches(decoder_dir, sentiment_data_dir, tmp_path):
    job = JobConfig.model_validate({
        "model": {"name_or_path": str(decoder_dir), "peft": {"method": "lora", "r": 4}},
        "data": {"source": str(sentiment_data_dir), "max_length": 24, "train_size": 32, "eval_size": 16,
                 "test_split": None},
        "training": {"per_device_train_batch_size": 8, "per_device_eval_batch_size": 8, "num_train_epochs": 1}})
    tables = build_tokenized_tables(job).tables
    trainer = build_trainer(job, train_table=tables["train"], eval_table=tables["eval"], output_dir=str(tmp_path))
    tokenizer = trainer.processing_class
    assert tokenizer.pad_token == tokenizer.eos_token or tokenizer.pad_token_id is not None
    assert trainer.model.config.pad_token_id == tokenizer.pad_token_id is not None
    trainer.train()
    metrics = trainer.evaluate()
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0

    # Exported (the adapter merged into a base rebuilt with the checkpoint's padding id) and
    # served in batches, as predict and the MLflow model do.
    checkpoint, export = tmp_path / "checkpoint", tmp_path / "export"
    trainer.save_model(str(checkpoint))
    assert run_write_model_dir(str(checkpoint), str(export), job.model_dump(mode="json"))["weights"] == "merged"
    assert json.loads((export / "config.json").read_text())["pad_token_id"] == tokenizer.pad_token_id
    (export / TASK_FILE).write_text(json.dumps({"type": "text-classification"}))
    task = build_task_for_model_dir(str(export))
    rows = task.run_predict(task.build_pipeline(str(export)), ["great movie", "a dull and tedious film", "ok"],
                            batch_size=3)
    assert len(rows) == 3 and all(set(r) == {"label", "score"} for r in rows)
