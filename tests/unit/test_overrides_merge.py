"""A ``search.parameters.<path>=...`` override changes that parameter and keeps the others,
whether the search space is the embedded default or a file."""

import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.config.search_space import SearchSpaceConfig

LR_OVERRIDE = "search.parameters.training.learning_rate={type: loguniform, low: 3.0e-5, high: 5.0e-5}"
DEFAULT_PATHS = {"training.learning_rate", "training.warmup_steps", "training.weight_decay"}


def test_the_embedded_default_space_keeps_its_other_parameters():
    _, space = load_sweep_configs(None, None, [LR_OVERRIDE])
    assert set(space.parameters) == DEFAULT_PATHS
    lr = space.parameters["training.learning_rate"]
    assert (lr.low, lr.high) == (3.0e-5, 5.0e-5)
    # The untouched ones are exactly the defaults.
    defaults = SearchSpaceConfig().parameters
    assert space.parameters["training.warmup_steps"] == defaults["training.warmup_steps"]
    assert space.parameters["training.weight_decay"] == defaults["training.weight_decay"]


def test_a_file_space_keeps_its_other_parameters(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("parameters:\n"
                    "  training.learning_rate: {type: loguniform, low: 1.0e-5, high: 1.0e-4}\n"
                    "  training.weight_decay: {type: uniform, low: 0.0, high: 0.05}\n"
                    "num_samples: 3\n")
    _, space = load_sweep_configs(None, path, [LR_OVERRIDE])
    assert set(space.parameters) == {"training.learning_rate", "training.weight_decay"}
    assert space.parameters["training.learning_rate"].low == 3.0e-5
    assert space.parameters["training.weight_decay"].high == 0.05
    assert space.num_samples == 3


def test_a_file_without_parameters_merges_into_the_default_ones(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("num_samples: 2\n")
    _, space = load_sweep_configs(None, path, [LR_OVERRIDE])
    assert set(space.parameters) == DEFAULT_PATHS
    assert space.parameters["training.learning_rate"].low == 3.0e-5


def test_both_paths_give_the_same_space(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("parameters:\n"
                    "  training.learning_rate: {type: loguniform, low: 1.0e-5, high: 1.0e-4}\n"
                    "  training.warmup_steps: {type: uniform, low: 0.0, high: 0.2}\n"
                    "  training.weight_decay: {type: uniform, low: 0.0, high: 0.1}\n")
    overrides = [LR_OVERRIDE, "search.parameters.training.num_train_epochs={type: choice, values: [1, 2]}"]
    _, embedded = load_sweep_configs(None, None, overrides)
    _, from_file = load_sweep_configs(None, path, overrides)
    assert embedded == from_file
    assert set(embedded.parameters) == DEFAULT_PATHS | {"training.num_train_epochs"}


def test_without_overrides_the_default_space_is_unchanged():
    _, space = load_sweep_configs(None, None, [])
    assert space.parameters == SearchSpaceConfig().parameters


@pytest.mark.parametrize("override", ["search.num_samples=2", "search.scope=last-5-avg"])
def test_other_search_overrides_leave_the_parameters_alone(override):
    _, space = load_sweep_configs(None, None, [override])
    assert set(space.parameters) == DEFAULT_PATHS
