"""Every rule that turns metric values into a choice, in one pure module (no I/O, no Ray).

* **Scope statistics** (ray_scope): a trial's history of evaluations folded into ``max``,
  ``min``, ``avg``, ``last``, ``last-5-avg`` and ``last-10-avg`` exactly as Ray Tune's
  ``Trial.run_metadata.update_metric`` does (same arithmetic, same NaN behaviour), so the
  score a worker reports while it trains, the score Optuna and ASHA learn from, and the score
  the winner is chosen by are one and the same.
* **The winner** among trials, as ``ExperimentAnalysis.get_best_trial(metric, mode, scope)``.
* **The ranking** of trials that retention uses: best first, non-finite scores last.
* **A trial's best checkpoint**, Hugging Face's rule (``Trainer._determine_best_metric``).
* **A report**: what each evaluation reports to Ray (its metrics and the running scope
  objective); the trial driver of a trial that had already finished reports its last again.

Ties always go to the earlier item in the order given; callers pass trials in creation order
(``ray_internals.sort_trials_by_creation``), so the winner and retention agree on ties.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ftplat.errors import UserError
from ftplat.layout import build_checkpoint_name
from ftplat.records import CHECKPOINT_NAME_KEY, OBJECTIVE_KEY

SCOPES = ("last", "avg", "last-5-avg", "last-10-avg", "all")
MODES = ("max", "min")
_WINDOWS = (5, 10)

T = TypeVar("T")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise UserError(f"mode must be 'max' or 'min', got {mode!r}")


def check_scope(scope: str) -> None:
    if scope not in SCOPES:
        raise UserError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")


def is_finite_score(value: float | None) -> bool:
    """A score that can win or rank: present, not NaN, not infinite."""
    return value is not None and math.isfinite(value)


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


def compute_history_stats(rows: Sequence[dict[str, Any]], metric: str) -> dict[str, float]:
    """Scope statistics of evaluation rows (``training_iteration`` and ``metric``); a missing
    value counts as NaN, as Ray counts a NaN report."""
    return compute_scope_stats((r["training_iteration"], math.nan if r.get(metric) is None else r[metric])
                               for r in rows)


def scope_score(stats: dict[str, float], scope: str, mode: str) -> float | None:
    """The score of one trial under ``scope`` (``all`` means its best value under ``mode``)."""
    check_scope(scope)
    if not stats:
        return None
    return stats[mode] if scope == "all" else stats[scope]


def compute_scope_scores(values: Sequence[float], mode: str) -> dict[str, float | None]:
    """Scores under every scope of a history reported once per training iteration."""
    stats = compute_scope_stats(enumerate(values, start=1))
    return {scope: scope_score(stats, scope, mode) for scope in SCOPES}


def select_best(candidates: Sequence[tuple[Any, dict[str, float]]], scope: str, mode: str) -> Any | None:
    """The key of the best ``(key, stats)`` candidate, as Ray's ``get_best_trial`` picks it.

    The first of equal scores wins; NaN and infinite scores are skipped. Like Ray, a lone
    candidate is returned whatever its score.
    """
    check_mode(mode)
    check_scope(scope)
    if len(candidates) == 1:
        return candidates[0][0]
    best_key, best_score = None, None
    for key, stats in candidates:
        score = scope_score(stats, scope, mode)
        if not is_finite_score(score):
            continue
        if best_score is None or (mode == "max" and best_score < score) or (mode == "min" and best_score > score):
            best_key, best_score = key, score
    return best_key


def rank_by_score(scores: Sequence[float | None], mode: str, completed: Sequence[bool] | None = None) -> list[int]:
    """Indices of ``scores`` best first under ``mode``; non-finite or missing scores last. Of
    equal scores, a trial that ``completed`` (Tune's TERMINATED) comes before one that did not,
    as the summary's winner is chosen; then the given order."""
    check_mode(mode)
    assert completed is None or len(completed) == len(scores)

    def key(i: int) -> tuple[int, float, bool, int]:
        unfinished = completed is not None and not completed[i]
        score = scores[i]
        if not is_finite_score(score):
            return (1, 0.0, unfinished, i)
        return (0, -score if mode == "max" else score, unfinished, i)

    return sorted(range(len(scores)), key=key)


def select_hf_best(items: Iterable[T], value_of: Callable[[T], float | None], greater_is_better: bool) -> T | None:
    """The item HF records as ``best_model_checkpoint``, scanning ``items`` in training order.

    From a bound of -inf (``greater_is_better``) or +inf, an item becomes the best when its
    value is strictly better than the bound so far: the earliest of equal values wins; NaN,
    a missing value or one equal to the starting bound is never best; no such value, no best.
    """
    bound = -math.inf if greater_is_better else math.inf
    best = None
    for item in items:
        value = value_of(item)
        if value is None or math.isnan(value):
            continue
        if (value > bound) if greater_is_better else (value < bound):
            best, bound = item, value
    return best


def build_report_metrics(log_history: list[dict], *, metric: str, mode: str, scope: str, step: int) -> dict:
    """Metrics of the latest evaluation plus the running scope objective and the last train loss."""
    evals = [entry for entry in log_history if metric in entry]
    assert evals, f"on_save without a preceding evaluation logging {metric}"
    losses = [entry["loss"] for entry in log_history if "loss" in entry]
    return build_evaluation_report(evals, train_loss=losses[-1] if losses else None, metric=metric, mode=mode,
                                   scope=scope, step=step)


def build_evaluation_report(evals: list[dict], *, train_loss: float | None, metric: str, mode: str, scope: str,
                            step: int) -> dict:
    """What is reported of the last of ``evals`` (each logging ``metric``, in order)."""
    latest = evals[-1]
    stats = compute_scope_stats(enumerate((e[metric] for e in evals), start=1))
    metrics = {k: v for k, v in latest.items() if k.startswith("eval_") or k == "epoch"}
    if train_loss is not None:
        metrics["train_loss"] = train_loss
    metrics.update(
        {
            "step": step,
            "num_evaluations": len(evals),
            OBJECTIVE_KEY: scope_score(stats, scope, mode),
            CHECKPOINT_NAME_KEY: build_checkpoint_name(step),
        }
    )
    return metrics
