"""A job's own metrics (``task.metric_fn`` and ``task.metric_modes``): importing the function and
checking the names, for the config validation (before any work) and the task's evaluation."""

from __future__ import annotations

import importlib


def build_user_metric_fn(spec: str):
    """The function ``module:function`` names; ValueError when it does not import."""
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"{spec!r} is not 'module:function' (e.g. my_metrics:compute)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{spec!r}: module {module_name!r} does not import ({exc}); put it on PYTHONPATH "
                         "(and in the Ray job's working_dir so workers find it)") from None
    except Exception as exc:  # noqa: BLE001 - the user's module runs here: any error of its code is theirs
        raise ValueError(f"task.metric_fn {spec!r}: importing module {module_name!r} raised "
                         f"{type(exc).__name__}: {exc}; fix the module") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{spec!r}: {module_name} has no function {name!r}")
    return fn


def check_metric_modes(metric_modes: dict[str, str], built_in: dict[str, str], *, task_type: str) -> None:
    """``task.metric_modes`` names the user's metrics: not the task's own (``built_in``, whose
    modes are fixed), nor with the ``eval_`` prefix the Trainer adds; ValueError naming it."""
    for name in metric_modes:
        bare = name.removeprefix("eval_")
        if bare in built_in:
            raise ValueError(f"task.metric_modes.{name}: {bare} (eval_{bare}) is a built-in metric of task.type "
                             f"{task_type}, always {built_in[bare]}imised; remove it from task.metric_modes "
                             "(task.metric_fn adds metrics under names of its own)")
        if bare != name:
            raise ValueError(f"task.metric_modes.{name}: name the metric without eval_ (the Trainer adds it): "
                             f"task.metric_modes.{bare}, with task.metric_fn returning {bare!r}")
