"""Which checkpoints of a sweep to keep, and why. Pure functions, no I/O (``gc`` does that).

Per trial: HF ``save_total_limit`` rotation
-------------------------------------------
``select_trial_keep`` keeps exactly what ``transformers.trainer_utils.rotate_checkpoints``
(transformers 5.23) leaves when the Trainer calls it after every save, with
``best_model_checkpoint`` set the way ``Trainer._determine_best_metric`` sets it:

* checkpoints are ordered by step; *latest* is the one with the highest step;
* *best*: scanning in step order from a bound of -inf (``greater_is_better``) or +inf, a
  checkpoint becomes the best when its metric is strictly better than the current bound. So
  the earliest of equal values wins, NaN (or a missing value) is never best, and neither is a
  value equal to the starting bound; a trial with no such value has no best;
* protected = {latest, best}; the newest other checkpoints are added until
  ``max(save_total_limit, len(protected))`` are kept.

Put differently, with N = ``save_total_limit``: when the best is among the N newest (or there
is no best) the N newest are kept, otherwise the best plus the ``max(N - 1, 1)`` newest. N=1
keeps the latest and the best when they differ. HF's extra clean-up at the end of ``train()``
for N=1, which deletes the latest too, is deliberately not reproduced: the latest is what a
resume needs.

Sweep-wide policy
-----------------
``select_sweep_keep`` applies a ``RetentionPolicy``. ``R(t)`` is trial t's HF set above.
Trials are ranked by scope score under ``mode``; NaN, infinite and missing scores rank last
(the winner rule skips them), ties go to the earlier trial in the given order, which callers
make creation order (``ftplat.ray_internals.sort_trials_by_creation``), as for the winner.
The rules themselves (HF's best, the ranking) are ``ftplat.scoring``'s. A
finished trial is *in the top K* when fewer than K **finished** trials rank above it. Once
every trial has finished this is the plain top K; before that, a finished trial leaves the
top K only when K finished trials beat it, because a running trial may still end below it and
a deleted checkpoint cannot come back.

Kept, for each trial t:

1. t running, or finished with a history that could not be read completely (``history_known``
   false, e.g. after a resume when its Trainer state is unreadable): ``R(t)``, ranked as if
   running. Its score is not final (or not known), and ``R(t)`` is what its own Trainer keeps;
   ``gc`` goes further and deletes nothing of a trial whose history is not known.
2. t finished and ``keep_top_k_trials`` is None or t is in the top K: ``R(t)``.
3. t finished outside the top K: best(t) if ``keep_trial_best``, latest(t) if
   ``keep_trial_latest``, nothing else.
4. Whatever the flags: the best of ``winner_trial_id`` and of the leading finished trial (the
   first finished trial of the ranking: the winner, were the sweep to end now), or their
   latest when they have no best; the latest of every running trial (already in rule 1).

All other checkpoints are deletable (``select_deletions``). The default policy
(``keep_top_k_trials=None``) keeps every trial's ``R(t)``: HF's own retention, trial by trial.

Applying the policy after every trial event leaves the same checkpoints as applying it once at
the end, because a checkpoint in the final kept set was kept at every earlier moment it
existed: HF rotation never wants back what it rotated out (a new best is always the newest
checkpoint), a finished trial's score and rank among finished trials never change, and the
final winner was running or the leading finished trial all along. The unit tests check this.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ftplat.errors import UserError
from ftplat.scoring import rank_by_score, select_hf_best

Key = tuple[str, str]
"""(trial_id, checkpoint name)"""


@dataclass(frozen=True)
class RetentionPolicy:
    """Sweep-wide retention; see the module docstring for what each field keeps.

    Args:
        save_total_limit: HF's per-trial limit (>= 1); the best is kept even outside it.
        keep_top_k_trials: finished trials outside the top K by scope score lose everything
            but their best/latest (per the flags below); None keeps every trial's HF set.
        keep_trial_best: keep the best checkpoint of trials outside the top K.
        keep_trial_latest: keep the latest checkpoint of trials outside the top K.
        keep_optimizer_state: completed trials keep the optimizer state of their kept
            checkpoints (false: ``gc`` strips it, see ``checkpoints/strip.py``).
    """

    save_total_limit: int
    keep_top_k_trials: int | None = None
    keep_trial_best: bool = True
    keep_trial_latest: bool = True
    keep_optimizer_state: bool = False

    def __post_init__(self) -> None:
        _check_limit(self.save_total_limit)
        k = self.keep_top_k_trials
        if k is not None and (not _is_int(k) or k < 0):
            raise UserError(f"keep_top_k_trials must be None (every trial) or an integer >= 0, got {k!r}")
        for flag in ("keep_trial_best", "keep_trial_latest", "keep_optimizer_state"):
            if not isinstance(getattr(self, flag), bool):
                raise UserError(f"{flag} must be true or false, got {getattr(self, flag)!r}")


@dataclass(frozen=True)
class CheckpointInfo:
    """One reported checkpoint: its folder name, global step and ``metric_for_best_model``."""

    name: str
    step: int
    metric_value: float | None = None


@dataclass(frozen=True)
class TrialCheckpoints:
    """Every checkpoint a trial reported (deleted ones included: the definition is over the
    history, so a deletion never changes what counts as best or latest)."""

    trial_id: str
    checkpoints: Sequence[CheckpointInfo]
    running: bool
    scope_score: float | None = None
    history_known: bool = True
    completed: bool = False  # ended normally or stopped by the scheduler: never resumed

    @property
    def provisional(self) -> bool:
        """Its score may still change or is not known: it cannot be ranked among the finished."""
        return self.running or not self.history_known

    def __post_init__(self) -> None:
        # A tuple keeps the frozen dataclass hashable and safe from later mutation.
        object.__setattr__(self, "checkpoints", tuple(self.checkpoints))
        _sorted_by_step(self.checkpoints, owner=f"trial {self.trial_id}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_limit(save_total_limit) -> None:
    if not _is_int(save_total_limit) or save_total_limit < 1:
        raise UserError(f"save_total_limit must be an integer >= 1, got {save_total_limit!r}")


def _sorted_by_step(checkpoints: Sequence[CheckpointInfo], owner: str = "checkpoints") -> list[CheckpointInfo]:
    """Checkpoints oldest first; duplicate names or steps would make latest ambiguous."""
    names = [c.name for c in checkpoints]
    steps = [c.step for c in checkpoints]
    if len(set(names)) != len(names):
        raise UserError(f"{owner}: duplicate checkpoint names in {sorted(names)}")
    if len(set(steps)) != len(steps):
        raise UserError(f"{owner}: two checkpoints share a step in {sorted(steps)}")
    return sorted(checkpoints, key=lambda c: c.step)


def select_trial_best(checkpoints: Sequence[CheckpointInfo], greater_is_better: bool) -> CheckpointInfo | None:
    """The checkpoint HF records as ``best_model_checkpoint`` (rule in the module docstring)."""
    return select_hf_best(_sorted_by_step(checkpoints), lambda c: c.metric_value, greater_is_better)


def select_trial_keep(
    checkpoints: Sequence[CheckpointInfo], save_total_limit: int, greater_is_better: bool
) -> dict[str, str]:
    """HF ``rotate_checkpoints`` for one trial: ``{name: reason}`` of the kept, oldest first."""
    _check_limit(save_total_limit)
    ordered = _sorted_by_step(checkpoints)
    if not ordered:
        return {}
    best = select_trial_best(ordered, greater_is_better)
    best_name = best.name if best else None
    protected = {ordered[-1].name} | ({best_name} if best_name else set())
    num_to_keep = max(save_total_limit, len(protected))
    newest_others = [c.name for c in reversed(ordered) if c.name not in protected]
    kept = protected | set(newest_others[: num_to_keep - len(protected)])
    recent = [c.name for c in reversed(ordered) if c.name in kept and c.name != best_name]
    reasons = {name: f"recent ({i} of {len(recent)})" for i, name in enumerate(recent, start=1)}
    if best_name:
        reasons[best_name] = "trial best"
    return {c.name: reasons[c.name] for c in ordered if c.name in kept}


def select_trial_ranking(trials: Sequence[TrialCheckpoints], mode: str) -> list[str]:
    """Trial ids best first by scope score; non-finite or missing last; of equal scores the
    completed trial first, then input order (the summary's winner rule: the leading finished
    trial must be the winner-to-be, or its checkpoints go while the sweep runs)."""
    return [trials[i].trial_id for i in rank_by_score([t.scope_score for t in trials], mode,
                                                      [t.completed for t in trials])]


def _latest(checkpoints: Sequence[CheckpointInfo]) -> CheckpointInfo | None:
    return max(checkpoints, key=lambda c: c.step, default=None)


def _select_trial_reasons(
    trial: TrialCheckpoints,
    policy: RetentionPolicy,
    greater_is_better: bool,
    finished_rank: int | None,
    any_running: bool,
) -> tuple[dict[str, list[str]], str]:
    """Rules 1-3 for one trial: ``{name: reasons}`` of its kept, and why the rest go."""
    limit, top_k = policy.save_total_limit, policy.keep_top_k_trials
    hf_set = select_trial_keep(trial.checkpoints, limit, greater_is_better)
    rotated = f"rotated out (save_total_limit={limit})"
    if trial.provisional:
        reasons = {name: [why] for name, why in hf_set.items()}
        latest = _latest(trial.checkpoints)
        if latest is not None:
            reasons[latest.name].append("latest of running trial")
        return reasons, rotated
    if top_k is None:
        return {name: [why] for name, why in hf_set.items()}, rotated
    if finished_rank <= top_k:
        tag = f"top-{top_k} trial{' so far' if any_running else ''}"
        return {name: [f"{tag}: {why}"] for name, why in hf_set.items()}, rotated
    reasons: dict[str, list[str]] = {}
    best = select_trial_best(trial.checkpoints, greater_is_better)
    if policy.keep_trial_best and best is not None:
        reasons.setdefault(best.name, []).append("trial best")
    latest = _latest(trial.checkpoints)
    if policy.keep_trial_latest and latest is not None:
        reasons.setdefault(latest.name, []).append("trial latest")
    return reasons, f"trial outside the top {top_k} (rank {finished_rank} among finished trials)"


def _decide(
    trials: Sequence[TrialCheckpoints],
    policy: RetentionPolicy,
    mode: str,
    greater_is_better: bool,
    winner_trial_id: str | None,
) -> tuple[dict[Key, str], dict[Key, str]]:
    """(kept, deleted), each ``{(trial_id, name): reason}``, covering every checkpoint."""
    ids = [t.trial_id for t in trials]
    if len(set(ids)) != len(ids):
        raise UserError(f"duplicate trial ids in {ids}")
    if winner_trial_id is not None and winner_trial_id not in ids:
        raise UserError(f"winner trial {winner_trial_id!r} is not one of the trials {ids}")
    by_id = {t.trial_id: t for t in trials}
    finished_ranking = [tid for tid in select_trial_ranking(trials, mode) if not by_id[tid].provisional]
    finished_rank = {tid: rank for rank, tid in enumerate(finished_ranking, start=1)}
    guarded = {} if winner_trial_id is None else {winner_trial_id: "winning trial"}
    if finished_ranking:
        guarded.setdefault(finished_ranking[0], "leading finished trial")
    any_running = len(finished_ranking) < len(trials)

    kept: dict[Key, str] = {}
    deleted: dict[Key, str] = {}
    for trial in trials:
        reasons, drop_reason = _select_trial_reasons(
            trial, policy, greater_is_better, finished_rank.get(trial.trial_id), any_running
        )
        latest = _latest(trial.checkpoints)
        if trial.trial_id in guarded and latest is not None:
            # Rule 4, the invariant: whatever the flags above decided.
            best = select_trial_best(trial.checkpoints, greater_is_better)
            what = "best" if best is not None else "latest (no best)"
            reasons.setdefault((best or latest).name, []).append(f"{what} of {guarded[trial.trial_id]}")
        for ckpt in sorted(trial.checkpoints, key=lambda c: c.step):
            key = (trial.trial_id, ckpt.name)
            if ckpt.name in reasons:
                kept[key] = "; ".join(reasons[ckpt.name])
            else:
                deleted[key] = drop_reason
    return kept, deleted


def select_sweep_partition(
    trials: Sequence[TrialCheckpoints],
    policy: RetentionPolicy,
    *,
    mode: str,
    greater_is_better: bool,
    winner_trial_id: str | None = None,
) -> tuple[dict[Key, str], dict[Key, str]]:
    """Every checkpoint, kept or deleted, each ``{(trial_id, name): reason}``.

    Args:
        trials: every trial of the sweep, in trial (creation) order, which breaks score ties.
        policy: what to keep.
        mode: ``max`` or ``min``, the direction of the trials' scope scores.
        greater_is_better: the direction of ``metric_for_best_model`` inside a trial.
        winner_trial_id: the sweep's winner under its scope, when it has one.
    """
    return _decide(trials, policy, mode, greater_is_better, winner_trial_id)


def select_sweep_keep(trials: Sequence[TrialCheckpoints], policy: RetentionPolicy, **kwargs) -> dict[Key, str]:
    """The checkpoints the policy keeps (see ``select_sweep_partition`` for the arguments)."""
    return select_sweep_partition(trials, policy, **kwargs)[0]


def select_deletions(trials: Sequence[TrialCheckpoints], policy: RetentionPolicy, **kwargs) -> dict[Key, str]:
    """Every checkpoint ``select_sweep_keep`` does not keep."""
    return select_sweep_partition(trials, policy, **kwargs)[1]
