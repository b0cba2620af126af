"""A DeepSpeed JSON's explicit Adam betas and epsilon are checked against the values the
Trainer will pass (``training.hf_args.adam_beta1``/``adam_beta2``/``adam_epsilon``, else Hugging
Face's defaults), as Hugging Face itself compares them inside the worker."""

from __future__ import annotations

import json

import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.config.schema import JobConfig
from ftplat.errors import ConfigError
from ftplat.zero.config import build_deepspeed_config
from ftplat.zero.conflicts import build_conflicts


def adam_json(tmp_path, **params) -> str:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": params}}))
    return str(path)


def job_with(path: str, **hf_args) -> JobConfig:
    return JobConfig.model_validate({"training": {"deepspeed": path, "hf_args": hf_args}})


def test_betas_equal_to_the_hf_args_are_accepted(tmp_path):
    path = adam_json(tmp_path, betas=[0.95, 0.98], eps=1e-6)
    assert build_deepspeed_config(job_with(path, adam_beta1=0.95, adam_beta2=0.98, adam_epsilon=1e-6))


@pytest.mark.parametrize("params, hf_args, expected", [
    ({"betas": [0.9, 0.999]}, {"adam_beta1": 0.95},
     "optimizer.params.betas=[0.9, 0.999] differs from training.hf_args.adam_beta1=0.95, "
     "training.hf_args.adam_beta2=0.999"),
    ({"betas": [0.95, 0.999]}, {},
     "optimizer.params.betas=[0.95, 0.999] differs from training.hf_args.adam_beta1=0.9"),
    ({"eps": 1e-6}, {"adam_epsilon": 1e-7},
     "optimizer.params.eps=1e-06 differs from training.hf_args.adam_epsilon=1e-07"),
])
def test_betas_or_eps_that_differ_from_the_hf_args_are_refused(tmp_path, params, hf_args, expected):
    with pytest.raises(ValueError) as info:
        build_deepspeed_config(job_with(adam_json(tmp_path, **params), **hf_args))
    assert expected in str(info.value) and '"auto"' in str(info.value)


@pytest.mark.parametrize("params, hf_args", [
    ({"betas": [0.95, 0.999]}, {"adam_beta1": 0.95}),
    ({"betas": [0.9, 0.999]}, {"adam_beta1": 0.95}),
    ({"betas": [0.9, 0.999], "eps": 1e-8}, {}),
    ({"eps": 1e-6}, {"adam_epsilon": 1e-6}),
    ({"eps": 1e-8}, {"adam_epsilon": 1e-6}),
])
def test_the_check_agrees_with_hugging_face(tmp_path, params, hf_args):
    from test_deepspeed_config import read_hf_mismatch

    payload = {"optimizer": {"type": "AdamW", "params": params}}
    job = JobConfig.model_validate({"training": {"hf_args": hf_args}})
    assert bool(build_conflicts(payload, job)) == read_hf_mismatch(payload, job, tmp_path)


def test_a_searched_beta_needs_auto_betas(tmp_path):
    search = "search.parameters.training.hf_args.adam_beta2={type: uniform, low: 0.98, high: 0.999}"
    with pytest.raises(ConfigError, match=r"the search space varies training.hf_args.adam_beta2 but the DeepSpeed "
                                          r"config fixes optimizer.params.betas=\[0.9, 0.999\]"):
        load_sweep_configs(None, None, [f"training.deepspeed={adam_json(tmp_path, betas=[0.9, 0.999])}", search])
    load_sweep_configs(None, None, [f"training.deepspeed={adam_json(tmp_path, betas='auto')}", search])
