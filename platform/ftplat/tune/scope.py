"""ray_scope semantics: turning a trial's metric history into one score, and picking a winner.

These functions reproduce Ray Tune's ``Trial.run_metadata.update_metric`` and
``ExperimentAnalysis.get_best_trial(metric, mode, scope)`` exactly (same arithmetic, same
NaN and tie behaviour; the unit tests compare them with Ray's own classes), so the score a
trial reports while it runs, the score Optuna and ASHA learn from, and the score the winner is
chosen by are one and the same.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

SCOPES = ("last", "avg", "last-5-avg", "last-10-avg", "all")
_WINDOWS = (5, 10)


def compute_scope_stats(history: Iterable[tuple[int | None, float]]) -> dict[str, float]:
    """Fold ``(training_iteration, value)`` pairs the way Ray's trial metadata does.

    Returns ``max``, ``min``, ``avg``, ``last``, ``last-5-avg`` and ``last-10-avg``; empty
    when there is no value.
    """
    stats: dict[str, float] = {}
    windows: dict[int, deque] = {}
    for step, value in history:
        if not stats:
            stats = {"max": value, "min": value, "avg": value, "last": value}
            for n in _WINDOWS:
                windows[n] = deque([value], maxlen=n)
                stats[f"last-{n}-avg"] = value
            continue
        step = step or 1
        # Same expressions as Ray, argument order included: it decides what NaN does.
        stats["max"] = max(value, stats["max"])
        stats["min"] = min(value, stats["min"])
        stats["avg"] = 1 / step * (value + (step - 1) * stats["avg"])
        stats["last"] = value
        for n in _WINDOWS:
            windows[n].append(value)
            stats[f"last-{n}-avg"] = sum(windows[n]) / len(windows[n])
    return stats


def scope_score(stats: dict[str, float], scope: str, mode: str) -> float | None:
    """The score of one trial under ``scope`` (``all`` means its best value under ``mode``)."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    if not stats:
        return None
    return stats[mode] if scope == "all" else stats[scope]


def compute_scope_scores(values: Sequence[float], mode: str) -> dict[str, float | None]:
    """Scores under every scope of a history reported once per training iteration."""
    stats = compute_scope_stats(enumerate(values, start=1))
    return {scope: scope_score(stats, scope, mode) for scope in SCOPES}


def _is_nan_or_inf(value: float) -> bool:
    return math.isnan(value) or math.isinf(value)


def select_best(
    candidates: Sequence[tuple[Any, dict[str, float]]],
    scope: str,
    mode: str,
    filter_nan_and_inf: bool = True,
) -> Any | None:
    """Pick the key of the best ``(key, stats)`` candidate, as ``get_best_trial`` does.

    The first of equal scores wins (pass candidates in creation order, see
    ``sort_trials_by_creation``). NaN and infinite scores are skipped. Like Ray, a lone
    candidate is returned whatever its score.
    """
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    if len(candidates) == 1:
        return candidates[0][0]
    best_key, best_score = None, None
    for key, stats in candidates:
        score = scope_score(stats, scope, mode)
        if score is None or (filter_nan_and_inf and _is_nan_or_inf(score)):
            continue
        if best_score is None or (mode == "max" and best_score < score) or (mode == "min" and best_score > score):
            best_key, best_score = key, score
    return best_key


def _creation_index(experiment_tag: str | None) -> int | None:
    head = (experiment_tag or "").split("_", 1)[0]
    return int(head) if head.isdigit() else None


def sort_trials_by_creation(trials: Iterable[Any]) -> list[Any]:
    """Tune trials in the order their search algorithm created them.

    Ties between equal scores go to the earlier trial, so every place that ranks trials (the
    summary's winner, retention during and after the sweep) must see one order. Neither of
    Tune's lists gives it: the experiment state stores trials in the iteration order of a
    set of trials waiting to be saved, so ``ExperimentAnalysis.trials`` (and a resumed
    controller's list) can swap trials created together. Both of Tune's proposers start every
    ``experiment_tag`` with their running count; trials without one keep their given order, last.
    """

    def key(item: tuple[int, Any]) -> tuple[bool, int, int]:
        given, trial = item
        created = _creation_index(getattr(trial, "experiment_tag", None))
        return (created is None, created or 0, given)

    return [trial for _, trial in sorted(enumerate(trials), key=key)]
