"""A user metric function (``task.metric_fn: module:function``) beside the task's built-ins."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import ValidationError

from ftplat.config.loading import load_sweep_configs
from ftplat.config.schema import JobConfig
from ftplat.errors import UserError
from ftplat.tasks import build_task

MODULE = '''
import numpy as np

def compute(eval_pred):
    preds = np.asarray(eval_pred.predictions).argmax(-1)
    labels = np.asarray(eval_pred.label_ids)
    return {"errors": float((preds != labels).sum()), "positives": float((preds == 1).sum())}

def incomplete(eval_pred):
    return {"errors": 0.0}

def replaces_accuracy(eval_pred):
    return {"errors": 0.0, "accuracy": 0.0}
'''


@pytest.fixture()
def metrics_module(tmp_path, monkeypatch):
    (tmp_path / "my_metrics.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_metrics"
    sys.modules.pop("my_metrics", None)


def test_user_metrics_join_the_built_ins_and_can_rank_checkpoints_and_trials(metrics_module, tmp_path):
    job = JobConfig.model_validate({"task": {"metric_fn": "my_metrics:compute",
                                             "metric_modes": {"errors": "min", "positives": "max"}},
                                    "training": {"metric_for_best_model": "errors"}})
    assert job.training.metric_for_best_model == "eval_errors" and job.training.greater_is_better is False
    logits = np.asarray([[2.0, 0.0], [0.0, 2.0], [0.0, 2.0], [2.0, 0.0]])
    labels = np.asarray([0, 1, 0, 1])  # two right, two wrong
    metrics = build_task(job).compute_metrics(SimpleNamespace(predictions=logits, label_ids=labels))
    assert metrics == {"accuracy": 0.5, "f1": 0.5, "errors": 2.0, "positives": 2.0}
    space_file = tmp_path / "space.yaml"
    space_file.write_text("parameters: {training.learning_rate: {type: loguniform, low: 1.0e-5, high: 1.0e-4}}\n"
                          "objective: {metric: errors}\n")
    config = tmp_path / "job.yaml"
    config.write_text("task: {metric_fn: 'my_metrics:compute', metric_modes: {errors: min, positives: max}}\n")
    _, space = load_sweep_configs(config, space_file)
    assert space.objective.metric == "eval_errors" and space.objective.mode == "min"


def test_a_metric_function_that_does_not_import_or_return_its_names_is_refused(metrics_module):
    with pytest.raises(ValidationError, match="module 'no_such_module' does not import"):
        JobConfig.model_validate({"task": {"metric_fn": "no_such_module:f", "metric_modes": {"x": "max"}}})
    with pytest.raises(ValidationError, match="has no function 'nope'"):
        JobConfig.model_validate({"task": {"metric_fn": "my_metrics:nope", "metric_modes": {"x": "max"}}})
    with pytest.raises(ValidationError, match="metric_fn and metric_modes go together"):
        JobConfig.model_validate({"task": {"metric_fn": "my_metrics:compute"}})
    job = JobConfig.model_validate({"task": {"metric_fn": "my_metrics:incomplete",
                                             "metric_modes": {"errors": "min", "positives": "max"}}})
    with pytest.raises(UserError, match=r"returned no \['positives'\]"):
        build_task(job).compute_metrics(SimpleNamespace(predictions=np.zeros((2, 2)), label_ids=np.asarray([0, 1])))
    # A built-in's name returned: it would replace the built-in that ranks checkpoints and trials
    job = JobConfig.model_validate({"task": {"metric_fn": "my_metrics:replaces_accuracy",
                                             "metric_modes": {"errors": "min"}}})
    with pytest.raises(UserError, match=r"returned \['accuracy'\], built-in metrics of task.type "
                                        r"text-classification; return them under names of your own"):
        build_task(job).compute_metrics(SimpleNamespace(predictions=np.eye(2), label_ids=np.asarray([0, 1])))


@pytest.mark.parametrize("task, modes, expected", [
    ({}, {"accuracy": "min"}, "task.metric_modes.accuracy: accuracy (eval_accuracy) is a built-in metric of "
                              "task.type text-classification, always maximised; remove it from task.metric_modes"),
    ({}, {"loss": "max"}, "task.metric_modes.loss: loss (eval_loss) is a built-in metric of task.type "
                          "text-classification, always minimised"),
    ({}, {"eval_f1": "max"}, "task.metric_modes.eval_f1: f1 (eval_f1) is a built-in metric"),
    ({}, {"eval_errors": "min"}, "task.metric_modes.eval_errors: name the metric without eval_ (the Trainer adds "
                                 "it): task.metric_modes.errors, with task.metric_fn returning 'errors'"),
    ({"type": "regression"}, {"mse": "max"}, "task.metric_modes.mse: mse (eval_mse) is a built-in metric of "
                                             "task.type regression, always minimised"),
    ({"type": "masked-lm"}, {"perplexity": "max"}, "task.metric_modes.perplexity: perplexity (eval_perplexity)"),
])
def test_metric_modes_name_only_the_users_own_metrics(metrics_module, task, modes, expected):
    """The task's metrics keep their modes: flipping one would make the objective and
    greater_is_better rank trials and checkpoints backwards."""
    with pytest.raises(ValidationError) as info:
        JobConfig.model_validate({"task": {**task, "metric_fn": "my_metrics:compute",
                                           "metric_modes": {"positives": "max", **modes}}})
    assert expected in str(info.value)


BROKEN_MODULES = {
    "syntax_metrics": ("def compute(eval_pred:\n    return {}\n", "SyntaxError: '(' was never closed"),
    "raising_metrics": ("raise RuntimeError('no GPU found')\n", "RuntimeError: no GPU found"),
}


@pytest.mark.parametrize("module", sorted(BROKEN_MODULES))
def test_a_metric_module_that_fails_at_import_is_refused_before_any_work(module, tmp_path, monkeypatch, capsys):
    from ftplat.cli.sweep import main

    source, expected = BROKEN_MODULES[module]
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "job.yaml"
    config.write_text(f"task: {{metric_fn: '{module}:compute', metric_modes: {{errors: min}}}}\n")
    storage = tmp_path / "storage"
    code = main(["--dry-run", "--config", str(config), "--storage", str(storage)])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(errors) == 1
    assert f"task.metric_fn '{module}:compute': importing module '{module}' raised {expected}" in errors[0]
    assert not storage.exists()
    sys.modules.pop(module, None)


def test_a_flipped_built_in_metric_is_refused_before_any_work(metrics_module, tmp_path, capsys):
    from ftplat.cli.sweep import main

    config = tmp_path / "job.yaml"
    config.write_text("task: {metric_fn: 'my_metrics:compute', metric_modes: {accuracy: min}}\n")
    code = main(["--dry-run", "--config", str(config), "--storage", str(tmp_path / "storage")])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(errors) == 1 and "task.metric_modes.accuracy" in errors[0]
