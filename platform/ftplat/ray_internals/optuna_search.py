"""Ray's ``OptunaSearch`` for a sweep that ``--resume`` continues with its failed trials.

Ray tells Optuna a trial failed (``FAIL`` in the study) and marks it finished; when the resumed
sweep runs that trial again (``resume_errored``), Ray then drops every result of it ("already
finished"), so the study keeps the failure and TPE never learns the trial's score, which may be
the sweep's best. Here a result of a trial the study holds as failed opens a new Optuna trial
with the same values, and that one gets the results. Tune's ``ConcurrencyLimiter`` around it
forgot the trial when it failed and would drop its completion: it counts the trial as running
again. The fields read are ``OptunaSearch``'s private state (``_completed_trials``,
``_ot_trials``, ``_ot_study``, ``_space``), checked in ``tests/unit/test_optuna_resume.py``
against the installed Ray.
"""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState
from ray.tune.search import ConcurrencyLimiter
from ray.tune.search.optuna import OptunaSearch


class ResumableOptunaSearch(OptunaSearch):
    """``OptunaSearch`` that gives a failed trial run again a new Optuna trial of its values."""

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if self.is_failed(trial_id):
            self._reopen(trial_id)
        super().on_trial_result(trial_id, result)

    def is_failed(self, trial_id: str) -> bool:
        """Whether the study holds ``trial_id`` as a failed trial Ray counts as finished."""
        if trial_id not in self._completed_trials:
            return False
        old = self._ot_trials.get(trial_id)
        if old is None:
            return False
        return self._ot_study._storage.get_trial(old._trial_id).state == TrialState.FAIL

    def _reopen(self, trial_id: str) -> None:
        params = self._ot_study._storage.get_trial(self._ot_trials[trial_id]._trial_id).params
        # The queued values come back from ask() whatever the sampler would propose.
        self._ot_study.enqueue_trial(params, skip_if_exists=False)
        self._ot_trials[trial_id] = self._ot_study.ask(fixed_distributions=self._space)
        self._completed_trials.discard(trial_id)


class ResumableConcurrencyLimiter(ConcurrencyLimiter):
    """Tune's ``ConcurrencyLimiter``, counting a failed trial that ``--resume`` runs again as
    running, so that its completion reaches the searcher (and its slot is freed again)."""

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        searcher = self.searcher
        if (self._limit_concurrency and trial_id not in self.live_trials
                and isinstance(searcher, ResumableOptunaSearch) and searcher.is_failed(trial_id)):
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        super().on_trial_result(trial_id, result)
