"""A DeepSpeed config under a search space: each trial's preset is fitted to the schedule and
optimizer the trial drew, and every combination of the searched values that decide the fit or
the hardware checks is checked before any cluster work, the refusal naming the values drawn."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import ray.tune

from ftplat.config.loading import load_sweep_configs
from ftplat.errors import ConfigError
from ftplat.ray_internals import PREEMPTION_WATCHER_ENV, TRAIN_POLL_INTERVAL_ENV
from ftplat.tune import trial as trial_module
from ftplat.zero.config import build_sweep_deepspeed_configs

OBJECTIVE = {"metric": "eval_accuracy", "mode": "max", "scope": "last"}
SCHEDULES = "search.parameters.training.lr_scheduler_type={type: choice, values: [linear, cosine]}"
OPTIMIZERS = "search.parameters.training.optim={type: choice, values: [adamw_torch, adafactor]}"


class Stop(Exception):
    pass


def trial_deepspeed(monkeypatch, tmp_path, job, configs, drawn: dict) -> dict | None:
    """The DeepSpeed config a trial's driver hands its workers for the values ``drawn``."""
    for name in (TRAIN_POLL_INTERVAL_ENV, PREEMPTION_WATCHER_ENV):
        monkeypatch.setenv(name, "0.25")  # restored after the test: the driver only sets defaults
    monkeypatch.setattr(ray.tune, "get_context", lambda: SimpleNamespace(get_trial_id=lambda: "t1"))
    built = {}

    def build_trainer(trial_job, *, train_loop_config, **_):
        built.update(train_loop_config)
        raise Stop

    monkeypatch.setattr(trial_module, "build_trainer", build_trainer)
    with pytest.raises(Stop):
        trial_module.train_driver_fn(drawn, job=job.model_dump(), objective=OBJECTIVE, sweep_path=str(tmp_path),
                                     data_ref=[None], deepspeed_configs=configs, track_state=False)
    return built["deepspeed"]


@pytest.mark.parametrize("preset", ["zero2", "zero3"])
def test_each_trial_gets_the_preset_fitted_to_the_values_it_drew(preset, monkeypatch, tmp_path):
    job, space = load_sweep_configs(None, None, [f"training.deepspeed={preset}", SCHEDULES, OPTIMIZERS])
    configs = build_sweep_deepspeed_configs(job, space.parameters)
    shipped = trial_deepspeed(monkeypatch, tmp_path, job, configs,
                              {"training.lr_scheduler_type": "linear", "training.optim": "adamw_torch"})
    assert shipped["scheduler"]["type"] == "WarmupDecayLR" and shipped["optimizer"]["type"] == "AdamW"
    cosine = trial_deepspeed(monkeypatch, tmp_path, job, configs,
                             {"training.lr_scheduler_type": "cosine", "training.optim": "adamw_torch"})
    assert "scheduler" not in cosine and cosine["optimizer"]["type"] == "AdamW"
    adafactor = trial_deepspeed(monkeypatch, tmp_path, job, configs,
                                {"training.lr_scheduler_type": "linear", "training.optim": "adafactor"})
    assert "optimizer" not in adafactor and adafactor["scheduler"]["type"] == "WarmupDecayLR"
    # each trial fits its own copy: the sweep's shipped preset is left whole for the next one
    assert {"scheduler", "optimizer"} <= set(configs[preset])


def test_a_searched_use_gpu_checks_offload_for_the_cpu_choice():
    with pytest.raises(ConfigError) as info:
        load_sweep_configs(None, None, ["training.deepspeed=zero3_offload", "resources.use_gpu=true",
                                        "search.parameters.resources.use_gpu={type: choice, values: [true, false]}"])
    message = str(info.value)
    assert "preset 'zero3_offload', in trials where the search space draws resources.use_gpu=False" in message
    assert "offload_optimizer.device='cpu' offloads GPU memory to CPU RAM" in message and "\n" not in message
    load_sweep_configs(None, None, ["training.deepspeed=zero3_offload", "resources.use_gpu=true",
                                    "search.parameters.resources.use_gpu={type: choice, values: [true]}"])


def test_a_searched_optimizer_that_offload_would_ignore_is_refused():
    # ZeRO-Offload keeps DeepSpeed's CPU Adam, so an adafactor trial would silently train with it.
    with pytest.raises(ConfigError, match=r"in trials where the search space draws training.optim='adafactor'.*"
                                          r"training.optim='adafactor' would be ignored"):
        load_sweep_configs(None, None, ["training.deepspeed=zero3_offload", "resources.use_gpu=true", OPTIMIZERS])


def test_a_searched_schedule_is_checked_against_a_json_scheduler(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 2},
                                "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_max_lr": "auto"}}}))
    load_sweep_configs(None, None, [f"training.deepspeed={path}"])
    with pytest.raises(ConfigError, match=r"in trials where the search space draws "
                                          r"training.lr_scheduler_type='cosine'.*scheduler.type='WarmupDecayLR'"):
        load_sweep_configs(None, None, [f"training.deepspeed={path}", SCHEDULES])


def test_a_searched_mixed_precision_is_checked_on_cpu_workers():
    with pytest.raises(ConfigError, match=r"draws training.bf16=True\): .*DeepSpeed mixed precision needs GPU workers"):
        load_sweep_configs(None, None, ["training.deepspeed=zero2",
                                        "search.parameters.training.bf16={type: choice, values: [false, true]}"])


def test_every_searched_preset_and_schedule_combination_is_checked():
    job, space = load_sweep_configs(None, None, [
        "search.parameters.training.deepspeed={type: choice, values: [null, zero2, zero3]}", SCHEDULES])
    configs = build_sweep_deepspeed_configs(job, space.parameters)
    assert set(configs) == {"zero2", "zero3"}
    with pytest.raises(ConfigError, match="preset 'zero3_offload', in trials where the search space draws "
                                          "training.deepspeed='zero3_offload'"):
        load_sweep_configs(None, None, [
            "search.parameters.training.deepspeed={type: choice, values: [zero2, zero3_offload]}"])
