"""model.dtype: the weights train in float32 whatever dtype the checkpoint was saved in (most
hub LLMs ship bfloat16, and transformers 5 loads a checkpoint in its own dtype: a full
fine-tune then ran AdamW on bfloat16 weights, where 70% of a layer's small updates rounded
away in a reviewer's 8 steps at lr 2e-5); bfloat16 and auto are the user's choice."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from ftplat.config.schema import JobConfig
from ftplat.train.modeling import build_model
from tiny_assets import write_tiny_bert, write_tiny_llama


@pytest.fixture(scope="module")
def bf16_llama(tmp_path_factory):
    root = write_tiny_llama(tmp_path_factory.mktemp("llama"))
    AutoModelForCausalLM.from_pretrained(root, dtype=torch.float32).to(torch.bfloat16).save_pretrained(root)
    assert AutoModelForCausalLM.from_pretrained(root).dtype == torch.bfloat16  # transformers' own default
    return root


def job(root, **model) -> JobConfig:
    return JobConfig.model_validate({"task": {"type": "causal-lm"}, "model": {"name_or_path": str(root), **model}})


def dtypes(model, trainable: bool) -> set[torch.dtype]:
    return {p.dtype for p in model.parameters() if p.requires_grad == trainable}


def test_a_bfloat16_checkpoint_trains_in_float32_by_default(bf16_llama):
    assert dtypes(build_model(job(bf16_llama)), True) == {torch.float32}
    assert dtypes(build_model(job(bf16_llama, dtype="auto")), True) == {torch.bfloat16}
    assert dtypes(build_model(job(bf16_llama, dtype="bfloat16")), True) == {torch.bfloat16}


def test_an_adapter_on_a_bfloat16_base_trains_in_float32(bf16_llama):
    model = build_model(job(bf16_llama, dtype="bfloat16", peft={"method": "lora", "r": 4}))
    assert dtypes(model, True) == {torch.float32} and dtypes(model, False) == {torch.bfloat16}


def test_the_dtype_is_set_in_one_place(bf16_llama):
    with pytest.raises(ValueError, match=r"(?s)model.config_overrides.*dtype is set by ftplat from model.dtype"):
        job(bf16_llama, config_overrides={"dtype": "bfloat16"})
    with pytest.raises(ValueError, match=r"training.fp16 is true with model.dtype bfloat16"):
        JobConfig.model_validate({"model": {"dtype": "bfloat16"}, "training": {"fp16": True},
                                  "resources": {"use_gpu": True}})
    with pytest.raises(ValueError, match=r"model.dtype"):
        job(bf16_llama, dtype="float16")


def test_the_head_trained_beside_an_adapter_on_a_bfloat16_base_trains_in_float32(tmp_path):
    """peft casts only its adapter to float32; the head's trained copy (modules_to_save) kept
    bfloat16, and 70% of its weights did not move in 8 AdamW steps at lr 2e-5."""
    root = write_tiny_bert(tmp_path / "bert")
    model = build_model(JobConfig.model_validate({"model": {"name_or_path": str(root), "dtype": "bfloat16",
                                                            "peft": {"method": "lora", "r": 4}}}))
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert any("modules_to_save" in n for n in trainable) and dtypes(model, True) == {torch.float32}
    assert dtypes(model, False) == {torch.bfloat16}
    head = next(p for n, p in trainable.items() if "modules_to_save" in n and n.endswith("weight"))
    before = head.detach().clone()
    optimizer = torch.optim.AdamW(trainable.values(), lr=2e-5)
    ids = torch.randint(5, 100, (4, 12))
    for _ in range(8):
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.tensor([0, 1, 0, 1]))
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert out.logits.dtype == torch.bfloat16  # the modules after the head see the base's dtype
    assert (head.detach() != before).float().mean() > 0.99


def test_half_precision_whole_model_training_is_warned_about(bf16_llama, tmp_path):
    from ftplat.config.model_files import build_dtype_warnings

    def warned(**model) -> bool:
        return bool(build_dtype_warnings(job(model.pop("root", bf16_llama), **model).model))

    assert warned(dtype="bfloat16") and warned(dtype="auto")  # the checkpoint's own bfloat16
    assert not warned(dtype="float32") and not warned(dtype="bfloat16", peft={"method": "lora", "r": 4})
    assert not warned(root=write_tiny_llama(tmp_path / "fp32"), dtype="auto")
