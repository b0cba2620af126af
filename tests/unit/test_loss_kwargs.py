"""A head that accepts ``**kwargs`` but returns a mean loss (BERT's classifier) trains with
its loss divided by gradient accumulation, as one without loss kwargs: the Trainer took it
for a token-summing loss and logged (and clipped) it x gradient_accumulation_steps, and x the
workers under a process group (huggingface/transformers#47688). A causal LM that sums over
``num_items_in_batch`` keeps HF's exact token weighting. In-process, no cluster."""

from __future__ import annotations

import math

import pytest
import transformers
from tiny_assets import write_tiny_llama

from ftplat.config.schema import JobConfig
from ftplat.data.preparation import build_tokenized_tables
from ftplat.train.loss_kwargs import uses_items_count
from ftplat.train.worker import build_trainer


def _config(name: str, **kw):
    small = dict(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20,
                 max_position_embeddings=32, num_key_value_heads=2)
    return getattr(transformers, name)(**{**small, **kw})


@pytest.mark.parametrize("config, head, expected", [
    ("BertConfig", "AutoModelForSequenceClassification", False),
    ("BertConfig", "AutoModelForTokenClassification", False),
    ("BertConfig", "AutoModelForMaskedLM", False),
    ("RobertaConfig", "AutoModelForMaskedLM", False),
    ("LlamaConfig", "AutoModelForSequenceClassification", False),
    ("LlamaConfig", "AutoModelForCausalLM", True),
    ("Qwen2Config", "AutoModelForCausalLM", True),
])
def test_which_heads_sum_over_the_items_count(config, head, expected):
    """Read from the head's forward; checked here against what the loss does with the count."""
    import torch

    model = getattr(transformers, head).from_config(_config(config, pad_token_id=0, num_labels=3))
    ids = torch.randint(1, 64, (2, 8))
    labels = torch.tensor([0, 2]) if "Sequence" in head else ids % 3 if "Token" in head else ids
    model.eval()
    with torch.no_grad():
        losses = [model(input_ids=ids, labels=labels, num_items_in_batch=torch.tensor(n)).loss for n in (3, 6)]
    assert (not torch.allclose(*losses)) is expected
    assert uses_items_count(model) is expected


def test_a_peft_wrapped_model_is_read_through_its_wrapper():
    import peft

    for head, expected in (("AutoModelForSequenceClassification", False), ("AutoModelForCausalLM", True)):
        model = getattr(transformers, head).from_config(_config("LlamaConfig", pad_token_id=0))
        task_type = "SEQ_CLS" if expected is False else "CAUSAL_LM"
        wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj"], task_type=task_type))
        assert uses_items_count(wrapped) is expected


def _first_logged(tiny_model_dir, sentiment_data_dir, tmp_path, *, batch: int, accumulation: int) -> dict:
    job = JobConfig.model_validate({
        "model": {"name_or_path": str(tiny_model_dir)},
        "data": {"source": str(sentiment_data_dir), "max_length": 24, "train_size": 32, "eval_size": 16,
                 "test_split": None},
        "training": {"per_device_train_batch_size": batch, "gradient_accumulation_steps": accumulation,
                     "num_train_epochs": 1, "learning_rate": 1.0e-9, "logging_steps": 1,
                     "max_steps": 1}})
    tables = build_tokenized_tables(job).tables
    trainer = build_trainer(job, train_table=tables["train"], eval_table=tables["eval"],
                            output_dir=str(tmp_path / f"b{batch}"))
    trainer.model.config.hidden_dropout_prob = 0.0
    for module in trainer.model.modules():  # the same loss for the same rows in both runs
        if isinstance(module, __import__("torch").nn.Dropout):
            module.p = 0.0
    trainer.train()
    return next(e for e in trainer.state.log_history if "loss" in e)


def test_gradient_accumulation_logs_and_clips_the_loss_of_the_global_batch(
        tiny_model_dir, sentiment_data_dir, tmp_path):
    """16 rows as one batch, or as two of 8 accumulated: the same loss and gradient norm
    (before: the accumulated run logged 2x both, and clipped at half max_grad_norm)."""
    whole = _first_logged(tiny_model_dir, sentiment_data_dir, tmp_path, batch=16, accumulation=1)
    accumulated = _first_logged(tiny_model_dir, sentiment_data_dir, tmp_path, batch=8, accumulation=2)
    assert math.isclose(accumulated["loss"], whole["loss"], rel_tol=1e-3), (accumulated, whole)
    assert math.isclose(accumulated["grad_norm"], whole["grad_norm"], rel_tol=1e-3), (accumulated, whole)


def test_a_causal_lm_keeps_the_trainers_token_weighting(tmp_path):
    llama = write_tiny_llama(tmp_path / "llama")
    model = transformers.AutoModelForCausalLM.from_pretrained(llama)
    trainer = transformers.Trainer(model=model, args=transformers.TrainingArguments(str(tmp_path / "o"),
                                                                                  report_to=[]))
    from ftplat.train.loss_kwargs import set_loss_kwargs_path

    assert set_loss_kwargs_path(trainer).model_accepts_loss_kwargs is True
