"""DeepSpeed configs: shipped presets, conflicts with the training settings explained before any
compute (and in agreement with what Hugging Face itself would refuse), and ``ds-estimate``."""

from __future__ import annotations

import contextlib
import gc
import io
import json

import pytest

from ftplat.config.loading import ConfigError, load_sweep_configs
from ftplat.config.schema import JobConfig
from ftplat.zero.config import (PRESETS, build_deepspeed_config, build_sweep_deepspeed_configs, load_deepspeed_json,
                                load_preset)
from ftplat.zero.conflicts import AUTO_FIELDS, build_conflicts, get_dotted


def build_job(**training) -> JobConfig:
    return JobConfig.model_validate({"training": training})


def write_json(tmp_path, payload, name="ds.json"):
    path = tmp_path / name
    path.write_text(json.dumps(payload, indent=2))
    return str(path)


@pytest.mark.parametrize("name", PRESETS)
def test_presets_leave_every_trainer_owned_value_to_auto(name):
    preset = load_preset(name)
    for key in [*AUTO_FIELDS, "train_batch_size"]:
        assert get_dotted(preset, key) == "auto", key
    assert preset["zero_optimization"]["stage"] == (2 if name == "zero2" else 3)
    if name != "zero2":  # so checkpoints hold whole weights that load without DeepSpeed
        assert preset["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True


def test_presets_are_package_data():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert "zero/presets/*.json" in pyproject["tool"]["setuptools"]["package-data"]["ftplat"]


def test_preset_gives_way_to_another_schedule_or_optimizer():
    config = build_deepspeed_config(build_job(deepspeed="zero3", lr_scheduler_type="cosine", optim="adamw_torch_fused"))
    assert "scheduler" not in config and "optimizer" not in config
    assert {"scheduler", "optimizer"} <= set(build_deepspeed_config(build_job(deepspeed="zero3")))


@pytest.mark.parametrize(
    "payload, training, expected",
    [
        ({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, {}, "optimizer.params.lr=0.001 differs from training.learning_rate=2e-05"),
        ({"train_micro_batch_size_per_gpu": 8}, {}, "train_micro_batch_size_per_gpu=8 differs from training.per_device_train_batch_size=16"),
        ({"gradient_accumulation_steps": 4}, {}, "gradient_accumulation_steps=4 differs from training.gradient_accumulation_steps=1"),
        ({"train_batch_size": 64}, {}, "train_batch_size=64 differs from resources.num_workers x"),
        ({"gradient_clipping": 0.5}, {}, "gradient_clipping=0.5 differs from training.max_grad_norm=1.0"),
        ({"optimizer": {"type": "AdamW", "params": {"weight_decay": 0.0}}}, {}, "optimizer.params.weight_decay=0.0 differs from training.weight_decay"),
        ({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10}}}, {"warmup_steps": 0.1}, "scheduler.params.warmup_num_steps=10 must be \"auto\""),
        ({"scheduler": {"type": "WarmupCosineLR", "params": {}}}, {}, "scheduler.type='WarmupCosineLR' (the shape of 'cosine') differs from training.lr_scheduler_type='linear'"),
        ({"optimizer": {"type": "AdamW", "params": {}}}, {"optim": "adafactor"}, "training.optim='adafactor' would be ignored"),
        ({"fp16": {"enabled": True}}, {}, "fp16.enabled=True differs from training.fp16=False"),
        ({"zero_optimization": {"stage": 4}}, {}, "zero_optimization.stage=4 must be 0, 1, 2 or 3"),
        ({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}, {}, "offload_param.device='nvme' needs GPU workers"),
        ({"bf16": {"enabled": True}}, {"bf16": True}, "DeepSpeed mixed precision needs GPU workers"),
    ],
)
def test_conflicts_name_both_fields(payload, training, expected, tmp_path):
    job = build_job(deepspeed=write_json(tmp_path, payload), **training)
    with pytest.raises(ValueError, match="training.deepspeed") as info:
        build_deepspeed_config(job)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_equal_explicit_values_and_gpu_only_settings_on_gpu_workers_pass(tmp_path):
    payload = {"train_micro_batch_size_per_gpu": 16, "gradient_clipping": 1.0, "train_batch_size": 32,
               "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "betas": [0.9, 0.999], "eps": 1e-8}},
               "bf16": {"enabled": True},
               "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/nvme"}}}
    job = JobConfig.model_validate({"training": {"deepspeed": write_json(tmp_path, payload), "bf16": True},
                                    "resources": {"use_gpu": True, "num_workers": 2}})
    assert build_deepspeed_config(job)["optimizer"]["params"]["lr"] == 2e-5


@pytest.mark.parametrize("warmup_steps, explicit, ok", [(0.0, 1, True), (0.0, 2, False), (10.0, 10, True),
                                                         (10.0, 12, False), (0.1, 5, False)])
def test_explicit_warmup_steps_must_be_what_hf_would_fill(warmup_steps, explicit, ok):
    # HF fills max(1, warmup steps); a fraction's step count depends on the data size.
    payload = {"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": explicit}}}
    assert (build_conflicts(payload, build_job(warmup_steps=warmup_steps)) == []) is ok


def test_a_searched_value_must_be_auto(tmp_path):
    job = build_job(deepspeed=write_json(tmp_path, {"optimizer": {"type": "AdamW", "params": {"lr": 2e-5}}}))
    assert build_deepspeed_config(job)  # the fixed value equals the job's
    with pytest.raises(ValueError, match="the search space varies training.learning_rate but the DeepSpeed "
                                         "config fixes optimizer.params.lr=2e-05"):
        build_deepspeed_config(job, {"training.learning_rate"})


def test_searching_over_presets_checks_each_choice():
    job, space = load_sweep_configs(None, None, ["search.parameters.training.deepspeed={type: choice, values: [zero2, zero3]}"])
    assert set(build_sweep_deepspeed_configs(job, space.parameters)) == {"zero2", "zero3"}
    with pytest.raises(ConfigError, match="preset 'zero3_offload'"):
        load_sweep_configs(None, None, ["search.parameters.training.deepspeed={type: choice, values: [zero2, zero3_offload]}"])


def test_malformed_json_is_one_line_with_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "zero_optimization": {\n    "stage": 3,\n  }\n}\n')
    with pytest.raises(ValueError) as info:
        load_deepspeed_json(str(path))
    message = str(info.value)
    assert message.startswith(f"training.deepspeed: {path} is not valid JSON: ") and "(line 4, column 3)" in message
    assert "\n" not in message
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object at the top level, got list"):
        load_deepspeed_json(str(path))


def test_relative_json_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_json(tmp_path, {"zero_optimization": {"stage": 2}}, "mine.json")
    job, _ = load_sweep_configs(None, None, ["training.deepspeed=mine.json"])
    assert job.training.deepspeed == str(tmp_path / "mine.json")


def read_hf_mismatch(payload: dict, job: JobConfig, tmp_path) -> bool:
    """Whether HF's own "auto" filling (inside the worker) flags ``payload`` against ``job``."""
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    from ftplat.train.arguments import build_training_arguments

    hf = HfTrainerDeepSpeedConfig(json.loads(json.dumps(payload)))
    hf.trainer_config_process(build_training_arguments(job, output_dir=str(tmp_path)))
    flagged = bool(hf.mismatches)
    del hf
    gc.collect()  # HF keeps a global weak reference; later tests must not see a DeepSpeed config
    return flagged


@pytest.mark.parametrize(
    "payload, training",
    [
        ({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": "auto"}}}, {}),
        ({"optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "weight_decay": 0.01}}}, {}),
        ({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2}, {"gradient_accumulation_steps": 2}),
        ({"train_batch_size": 16, "gradient_clipping": 1.0}, {}),
        ({"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-5}}}, {"lr_scheduler_type": "constant_with_warmup"}),
        ({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 0.98], "eps": 1e-8}}}, {}),
    ],
)
def test_conflicts_agree_with_hugging_face(payload, training, tmp_path):
    """Whatever HF's own "auto" filling flags as a mismatch, ftplat flags before the sweep."""
    job = build_job(**training)
    assert bool(build_conflicts(payload, job)) == read_hf_mismatch(payload, job, tmp_path)


def test_ds_estimate_prints_both_tables_for_a_local_model(tmp_path, capsys):
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_live
    from transformers import BertConfig, BertForSequenceClassification

    from ftplat.cli.main import main as ftplat_main

    config = BertConfig(vocab_size=5000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=1024)
    config.save_pretrained(tmp_path)
    real = BertForSequenceClassification(config)
    params = sum(p.numel() for p in real.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in real.modules())
    assert ftplat_main(["ds-estimate", "--model", str(tmp_path), "--num-gpus", "4", "--num-nodes", "2"]) == 0
    out = capsys.readouterr().out
    assert f"BertForSequenceClassification, {params:,} parameters, largest layer {largest:,}" in out
    assert f"SW: Model with {int(params / 1e6)}M total params, {int(largest / 1e6)}M largest layer params." in out
    assert "== ZeRO-2 ==" in out and "== ZeRO-3 ==" in out and out.count("HW: Setup with 2 nodes, 4 GPUs per node.") == 2
    # ZeRO-2 without offload: 16-bit params on every GPU plus 18 bytes a parameter spread over the 8 GPUs.
    assert f"{(2 * params + int(18 * params / 8)) / 2**30:6.2f}GB | offload_optimizer=none" in out
    # The very table DeepSpeed's own estimator prints from the real, allocated model.
    live = io.StringIO()
    with contextlib.redirect_stdout(live):
        estimate_zero3_model_states_mem_needs_all_live(real, num_gpus_per_node=4, num_nodes=2)
    assert live.getvalue() in out


def test_ds_estimate_refuses_bad_input(tmp_path, capsys):
    from ftplat.cli.main import main as ftplat_main

    assert ftplat_main(["ds-estimate", "--model", str(tmp_path / "none"), "--num-gpus", "1"]) == 2
    assert ftplat_main(["ds-estimate", "--model", str(tmp_path), "--num-gpus", "0"]) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert "--model" in errors[0] and "--num-gpus must be at least 1" in errors[1]
