"""``hf_args`` that would break the pairing of each checkpoint save with the evaluation that
scores it are refused when the config is read, with the reason: ``eval_delay`` (a save with no
evaluation before it) and ``eval_on_start`` (an evaluation of the untrained model, counted in the
scope objective though no checkpoint holds it)."""

from __future__ import annotations

import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.errors import ConfigError


@pytest.mark.parametrize("override, reason", [
    ("training.hf_args.eval_delay=3", "every checkpoint save must follow an evaluation"),
    ("training.hf_args.eval_on_start=true", "the untrained model's evaluation would count in the trial's scope "
                                            "objective"),
])
def test_refused_naming_the_field_and_the_reason(override, reason):
    name = override.split("=")[0].rsplit(".", 1)[1]
    with pytest.raises(ConfigError) as info:
        load_sweep_configs(None, None, [override])
    message = str(info.value)
    assert f"training.hf_args: {name!r} is set by ftplat and cannot be passed through" in message
    assert reason in message and "\n" not in message


@pytest.mark.parametrize("parameter", [
    "eval_delay={type: uniform, low: 0.0, high: 2.0}",
    "eval_on_start={type: choice, values: [false, true]}",
])
def test_a_search_over_them_is_refused(parameter):
    with pytest.raises(ConfigError, match=r"is set by ftplat and cannot be passed through"):
        load_sweep_configs(None, None, [f"search.parameters.training.hf_args.{parameter}"])
