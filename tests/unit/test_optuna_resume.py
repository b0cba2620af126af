"""A failed trial that ``--resume`` runs again is told to Optuna: Ray's OptunaSearch marks a
failed trial finished and drops its later results, so the study kept FAIL and TPE never
learned the trial's score. ftplat's searcher opens a new Optuna trial of the same values."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from ftplat.config.search_space import SearchSpaceConfig
from ftplat.tune.spaces import build_param_space, build_search_alg

SPACE = {"num_samples": 3, "parameters": {"training.learning_rate": {"type": "loguniform", "low": 1e-5, "high": 1e-3}}}


def _searcher(tmp_path, name="s"):
    space = SearchSpaceConfig.model_validate(SPACE)
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    limiter = build_search_alg(space, max_concurrent=2, study_name=name, study_storage=storage)
    limiter.set_search_properties("objective", "max", build_param_space(space))
    return limiter, storage


def test_a_failed_trial_run_again_after_a_restore_reaches_the_study(tmp_path):
    limiter, storage = _searcher(tmp_path)
    first = limiter.suggest("t1")
    limiter.on_trial_complete("t1", error=True)  # the trial fails; Tune saves the searcher
    limiter.save(str(tmp_path / "searcher.pkl"))

    restored, _ = _searcher(tmp_path)  # --resume: the searcher comes back from its checkpoint
    restored.restore(str(tmp_path / "searcher.pkl"))
    restored.on_trial_result("t1", {"objective": 0.7, "training_iteration": 1})
    restored.on_trial_complete("t1", result={"objective": 0.9, "training_iteration": 2})

    trials = optuna.load_study(study_name="s", storage=storage).get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert trials[1].params == trials[0].params == {"training.learning_rate": first["training.learning_rate"]}
    assert trials[1].value == 0.9


def test_a_trial_that_fails_again_is_told_once_more_and_a_finished_one_is_not_reopened(tmp_path):
    limiter, storage = _searcher(tmp_path, "again")
    limiter.suggest("t1")
    limiter.suggest("t2")
    limiter.on_trial_complete("t1", error=True)
    limiter.on_trial_complete("t2", result={"objective": 0.5, "training_iteration": 1})
    limiter.on_trial_result("t1", {"objective": 0.6, "training_iteration": 1})  # run again
    limiter.on_trial_complete("t1", error=True)  # and fails again
    limiter.on_trial_result("t2", {"objective": 0.8, "training_iteration": 2})  # late: ignored, as Ray does
    states = [t.state for t in optuna.load_study(study_name="again", storage=storage).get_trials(deepcopy=False)]
    assert states == [TrialState.FAIL, TrialState.COMPLETE, TrialState.FAIL]
