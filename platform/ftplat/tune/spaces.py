"""Turning the search-space config into Tune distributions, the Optuna searcher and a scheduler."""

from __future__ import annotations

import math
from typing import Any

import optuna
from ray import tune
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.basic_variant import BasicVariantGenerator

from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.errors import UserError
from ftplat.ray_internals import ResumableConcurrencyLimiter, ResumableOptunaSearch, request_experiment_state_save
from ftplat.records import FINAL_EVALUATION_KEY


def build_param_space(space: SearchSpaceConfig) -> dict[str, Any]:
    """``{dotted.path: tune distribution}``; Optuna receives the same via Tune's conversion."""
    out: dict[str, Any] = {}
    for path, p in space.parameters.items():
        if p.type == "loguniform":
            out[path] = tune.loguniform(p.low, p.high)
        elif p.type == "uniform":
            out[path] = tune.uniform(p.low, p.high)
        elif p.type == "int":
            # Tune's randint excludes the upper bound; the config's high is inclusive.
            out[path] = tune.lograndint(p.low, p.high + 1) if p.log else tune.randint(p.low, p.high + 1)
        else:
            out[path] = tune.choice(list(p.values))
    return out


def build_search_alg(space: SearchSpaceConfig, max_concurrent: int, *, study_name: str = "ftplat",
                     study_storage: optuna.storages.BaseStorage | None = None,
                     ) -> ConcurrencyLimiter | BasicVariantGenerator:
    """The proposer, running at most ``max_concurrent`` trials at once.

    The limit is applied here, not through ``TuneConfig.max_concurrent_trials``: Tune ignores
    that setting (with only a warning) for a ``BasicVariantGenerator`` passed in, so random
    search would start every trial at once. ``study_storage`` keeps Optuna's study where
    ``optuna-dashboard`` can open it (in memory when None).
    """
    # metric and mode come from TuneConfig (the "objective" key), set once for everything.
    points = [dict(p) for p in space.points_to_evaluate] or None
    if space.algorithm == "random":
        # Independent seeded draws from the param_space distributions (Tune's random search).
        return BasicVariantGenerator(points_to_evaluate=points, random_state=space.seed,
                                     max_concurrent=max_concurrent)
    # Optuna's TPE default starts with 10 random trials, so a sweep of up to 10 trials would
    # never use what it learned; the config sets a start that fits the budget.
    sampler = optuna.samplers.TPESampler(seed=space.seed, n_startup_trials=space.build_startup_trials())
    searcher = ResumableOptunaSearch(sampler=sampler, points_to_evaluate=points, study_name=study_name,
                                     storage=study_storage)
    return ResumableConcurrencyLimiter(searcher, max_concurrent=max_concurrent)


def build_max_evaluations(job: JobConfig) -> int | None:
    """Evaluations a full trial makes, when it can be known from the config.

    Counted as transformers' ``DefaultFlowCallback`` evaluates: with ``steps``, at every
    multiple of ``eval_steps`` and at the last step when that is not one (so
    ``ceil(max_steps / eval_steps)``); with ``epoch``, at the end of every epoch the loop
    starts, the last, partial one of a fractional ``num_train_epochs`` included. Otherwise the
    count depends on the data's size (steps per epoch) and is left to ``scheduler.max_t``.
    """
    t = job.training
    if t.max_steps > 0 and t.eval_strategy == "steps":
        return math.ceil(t.max_steps / t.eval_steps)
    if t.max_steps <= 0 and t.eval_strategy == "epoch":
        return math.ceil(t.num_train_epochs)
    return None


class SavesStateOnTrialEvents:
    """Mixed into ftplat's schedulers: Tune saves its experiment state at the end of the step in
    which a trial is added, completes or fails, not up to 10 s later (why:
    ``ray_internals.request_experiment_state_save``). A driver that dies then leaves a state
    that knows every trial that may have started and every trial that has ended, so
    ``--resume`` neither orphans a started trial nor restarts an ended one. A save is a few
    small files, twice per trial."""

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        super().on_trial_add(tune_controller, trial)
        request_experiment_state_save(tune_controller)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        super().on_trial_complete(tune_controller, trial, result)
        request_experiment_state_save(tune_controller)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        super().on_trial_error(tune_controller, trial)
        request_experiment_state_save(tune_controller)


class StateSavingFIFOScheduler(SavesStateOnTrialEvents, FIFOScheduler):
    """Tune's FIFO scheduler (every trial runs to its end), saving state on trial events."""


class FullLengthASHAScheduler(SavesStateOnTrialEvents, ASHAScheduler):
    """Ray's ASHA, except that a trial at its last evaluation, or reaching ``max_t``, runs on
    to its own end.

    Ray stops a trial once ``time_attr`` reaches ``max_t``, and a rung may stop one at any
    milestone, its last evaluation included when trials differ in length (a searched epoch
    count; ``max_t`` comes from the job's own). A stop there kills the trial before its worker
    loads the best model and removes its scratch folder, and before its driver writes
    ``trial_result.json`` and ends its MLflow run; there is nothing left to save by stopping it.
    The worker marks that report (``FINAL_EVALUATION_KEY``). The rungs stay Ray's: Ray records a
    result at ``max_t`` in its bracket only in ``on_trial_complete``, which Tune calls when the
    trial ends, stopped or not. ``time_attr`` is the trial's evaluation count, which a resumed
    trial continues (Tune's ``training_iteration`` starts again at 1 after a restore without a
    Tune checkpoint, which ftplat never makes).
    """

    def __init__(self, *, time_attr: str, max_t: int, grace_period: int = 1, **kwargs: Any):
        super().__init__(time_attr=time_attr, max_t=max_t, grace_period=grace_period, **kwargs)
        self.full_length_attr, self.full_length, self.grace = time_attr, max_t, grace_period

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        if result.get(FINAL_EVALUATION_KEY) or result.get(self.full_length_attr, 0) >= self.full_length:
            return TrialScheduler.CONTINUE
        if is_diverged(result.get(self._metric)):
            # The worst there is (Ray's ASHA compares NaN with nothing and never stops it): stopped
            # once past the grace period, and never recorded at a rung. Ray interpolates a rung's
            # cutoff between its values: one infinite value there made the cutoff infinite, and
            # no trial after it was cut.
            past_grace = result.get(self.full_length_attr, 0) >= self.read_grace_period()
            return TrialScheduler.STOP if past_grace else TrialScheduler.CONTINUE
        return super().on_trial_result(tune_controller, trial, result)

    def read_grace_period(self) -> int:
        """``grace_period``; a scheduler unpickled from the state of a sweep started before it
        was kept has it only as the first milestone of Ray's bracket (its lowest rung)."""
        if "grace" in self.__dict__:
            return self.grace
        try:  # Ray's private bookkeeping, read only for such an old state
            return int(min(milestone for milestone, _ in self._brackets[0]._rungs))
        except (AttributeError, IndexError, TypeError, ValueError):
            return 1

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        # Ray records a trial's last result at its rung here; a diverged one as NaN, which
        # Ray's cutoffs leave out (an infinite one would make them infinite).
        if is_diverged(result.get(self._metric)):
            result = {**result, self._metric: math.nan}
        super().on_trial_complete(tune_controller, trial, result)


def is_diverged(value: Any) -> bool:
    """Whether an objective is NaN or infinite (a diverged trial, or a metric undefined on it)."""
    return isinstance(value, (int, float)) and not math.isfinite(value)


def build_scheduler(space: SearchSpaceConfig, job: JobConfig) -> TrialScheduler:
    sched = space.scheduler
    if sched.type == "fifo":
        return StateSavingFIFOScheduler()
    max_t = sched.max_t or build_max_evaluations(job)
    if max_t is None:
        raise UserError(
            "scheduler.max_t is required for ASHA when the number of evaluations per trial "
            "cannot be derived (set it to the evaluations of a full trial)"
        )
    if sched.grace_period > max_t:
        raise UserError(f"scheduler.grace_period ({sched.grace_period}) exceeds max_t ({max_t})")
    # grace_period and max_t count evaluations (each report is one, counted across resumes).
    return FullLengthASHAScheduler(
        time_attr="num_evaluations",
        max_t=max_t,
        grace_period=sched.grace_period,
        reduction_factor=sched.reduction_factor,
    )
