"""``training.greater_is_better`` against its metric's direction: the wrong one would keep,
load and export each trial's worst checkpoint, so it is refused like a wrong objective.mode."""

import pytest

from ftplat.config.loading import ConfigError, load_sweep_configs


@pytest.mark.parametrize("overrides, expected", [
    (["training.greater_is_better=false"],
     "training.greater_is_better is false for eval_accuracy: that metric is maximised; "
     "set training.greater_is_better: true"),
    (["training.metric_for_best_model=eval_loss", "training.greater_is_better=true"],
     "training.greater_is_better is true for eval_loss: that metric is minimised"),
    (["task.type=regression", "model.num_labels=1", "model.id2label=null", "training.greater_is_better=true"],
     "for eval_mse: that metric is minimised"),
])
def test_a_direction_against_the_metric_is_refused(overrides, expected):
    with pytest.raises(ConfigError) as err:
        load_sweep_configs(None, None, overrides)
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("overrides, greater", [
    ([], True),
    (["training.greater_is_better=true"], True),
    (["training.metric_for_best_model=eval_loss"], False),
    (["training.metric_for_best_model=eval_loss", "training.greater_is_better=false"], False),
])
def test_the_natural_direction_is_accepted(overrides, greater):
    job, _ = load_sweep_configs(None, None, overrides)
    assert job.training.greater_is_better is greater
