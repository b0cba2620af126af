"""DDP's unused-parameter search is off by default (frozen parameters never reach the reducer)
and ``training.hf_args.ddp_find_unused_parameters: true`` turns it on, for a model whose forward
skips trainable parameters (Longformer's masked LM leaves its global-attention weights unused)."""

from __future__ import annotations

from ftplat.config.loading import load_sweep_configs, set_dotted
from ftplat.config.schema import JobConfig
from ftplat.train.arguments import build_training_arguments


def test_off_unless_given(tmp_path):
    assert build_training_arguments(JobConfig(), output_dir=str(tmp_path)).ddp_find_unused_parameters is False


def test_hf_args_turn_it_on(tmp_path):
    job, _ = load_sweep_configs(None, None, ["training.hf_args.ddp_find_unused_parameters=true"])
    assert job.training.hf_args == {"ddp_find_unused_parameters": True}
    assert build_training_arguments(job, output_dir=str(tmp_path)).ddp_find_unused_parameters is True


def test_a_trial_can_draw_it(tmp_path):
    job, _ = load_sweep_configs(None, None, [
        "search.parameters.training.hf_args.ddp_find_unused_parameters={type: choice, values: [false, true]}"])
    drawn = {"training.hf_args.ddp_find_unused_parameters": True}
    trial = JobConfig.model_validate(set_dotted(job.model_dump(), drawn))
    assert build_training_arguments(trial, output_dir=str(tmp_path)).ddp_find_unused_parameters is True
