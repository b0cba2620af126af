"""A failed trial that ``--resume`` runs again is told to Optuna: Ray's OptunaSearch marks a
failed trial finished and drops its later results, so the study kept FAIL and TPE never
learned the trial's score. ftplat's searcher opens a new Optuna trial of the same values."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from ftplat.config.search_space import SearchSpaceConfig
from ftplat.tune.spaces import build_param_space, build_search_alg

SPACE = {"num_samples": 3, "parameters": {"training.learning_rate": {"type": "loguniform", "low": 1e-5, "high": 1e-3}}}


def _searcher(tmp_path, name="s", mode="max"):
    space = SearchSpaceConfig.model_validate(SPACE)
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    limiter = build_search_alg(space, max_concurrent=2, study_name=name, study_storage=storage)
    limiter.set_search_properties("objective", mode, build_param_space(space))
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


def test_a_failed_trial_rerun_beside_queued_points_keeps_its_own_values(tmp_path):
    """A queued reopening came back from ask() after the points_to_evaluate still queued: the
    study filed the rerun's score under another point's values, and that point never ran."""
    import ray.cloudpickle as pickle
    from ray.tune.search import SearchGenerator

    a, b, c = 2e-5, 5e-5, 8e-5
    space = SearchSpaceConfig.model_validate({
        "num_samples": 4,
        "parameters": {"training.learning_rate": {"type": "loguniform", "low": 1e-5, "high": 1e-4}},
        "points_to_evaluate": [{"training.learning_rate": v} for v in (a, b, c)]})
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    gen = SearchGenerator(build_search_alg(space, 1, study_name="sw", study_storage=storage))
    unconfigured = pickle.dumps(gen)  # what Tune keeps in tuner.pkl
    gen.set_search_properties("objective", "max", build_param_space(space))
    assert gen.searcher.suggest("t1") == {"training.learning_rate": a}
    gen.searcher.on_trial_complete("t1", error=True)
    assert gen.searcher.suggest("t2") == {"training.learning_rate": b}
    gen.save_to_dir(str(tmp_path), session_str="x")  # the driver dies while t2 runs
    resumed = pickle.loads(unconfigured)
    resumed.restore_from_dir(str(tmp_path))
    searcher = resumed.searcher
    searcher.on_trial_result("t1", {"objective": 0.95, "training_iteration": 1, "num_evaluations": 1})
    searcher.on_trial_complete("t1", result={"objective": 0.95, "training_iteration": 1, "num_evaluations": 1})
    searcher.on_trial_complete("t2", result={"objective": 0.60, "training_iteration": 1, "num_evaluations": 1})
    assert searcher.suggest("t3") == {"training.learning_rate": c}  # the last point runs
    trials = optuna.load_study(study_name="sw", storage=storage).get_trials(deepcopy=False)
    assert [(t.state, t.params["training.learning_rate"], t.value) for t in trials if t.state != TrialState.RUNNING] \
        == [(TrialState.FAIL, a, None), (TrialState.COMPLETE, b, 0.60), (TrialState.COMPLETE, a, 0.95)]


def test_every_evaluation_of_a_resumed_trial_reaches_the_study_at_its_number(tmp_path):
    """Tune's training_iteration restarts at 1 after --resume; the study kept only the first
    value of each step, so evaluations after the resume were dropped or misfiled."""
    searcher, _ = _searcher(tmp_path)
    searcher.suggest("t1")
    for iteration, number, value in [(1, 1, .60), (2, 2, .70), (1, 3, .80), (2, 4, .85), (3, 5, .90)]:
        searcher.on_trial_result("t1", {"objective": value, "training_iteration": iteration,
                                        "num_evaluations": number})
    searcher.on_trial_complete("t1", result={"objective": .90, "training_iteration": 3, "num_evaluations": 5})
    [trial] = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/study.db").trials
    assert trial.intermediate_values == {1: .60, 2: .70, 3: .80, 4: .85, 5: .90}


@pytest.mark.parametrize("mode, worst", [("min", float("inf")), ("max", float("-inf"))])
def test_a_diverged_trial_is_the_worst_to_asha_and_to_optuna(tmp_path, mode, worst):
    """A NaN objective compared with nothing: ASHA never stopped the trial, and Optuna refused
    it (the trial stayed RUNNING in the study, so TPE never learned the region was bad)."""
    import math
    from types import SimpleNamespace

    from ftplat.tune.spaces import FullLengthASHAScheduler

    sched = FullLengthASHAScheduler(time_attr="num_evaluations", max_t=4, grace_period=1, reduction_factor=2)
    sched.set_search_properties("objective", mode)
    good = 0.4 if mode == "min" else 0.9
    decisions = {}
    for trial_id, value in (("t0", good), ("t1", good), ("t2", math.nan)):
        trial = SimpleNamespace(trial_id=trial_id)
        sched._trial_info[trial_id] = sched._brackets[0]
        decisions[trial_id] = sched.on_trial_result(None, trial, {"num_evaluations": 1, "objective": value})
    assert decisions["t2"] == "STOP"

    searcher, _ = _searcher(tmp_path, mode=mode)
    searcher.suggest("t1")
    searcher.on_trial_complete("t1", result={"objective": math.nan, "training_iteration": 1, "num_evaluations": 1})
    [trial] = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/study.db").trials
    assert (trial.state, trial.value) == (TrialState.COMPLETE, worst)


@pytest.mark.parametrize("order", [["diverged", "good", "weak"], ["good", "diverged", "weak"]])
@pytest.mark.parametrize("mode", ["min", "max"])
def test_a_diverged_trial_leaves_the_rung_cutoff_to_the_others(order, mode):
    """A diverged trial recorded at a rung as -inf made Ray's interpolated cutoff -inf: a weak
    trial after it (0.1 against 0.8) was never cut, where plain ASHA cuts it."""
    import math
    from types import SimpleNamespace

    from ftplat.tune.spaces import FullLengthASHAScheduler

    sign = 1 if mode == "max" else -1
    values = {"diverged": math.nan, "good": sign * 0.8, "weak": sign * 0.1}
    sched = FullLengthASHAScheduler(time_attr="num_evaluations", max_t=4, grace_period=2, reduction_factor=2)
    sched.set_search_properties("objective", mode)
    decide = {}
    for trial_id in order:
        sched._trial_info[trial_id] = sched._brackets[0]
        trial = SimpleNamespace(trial_id=trial_id)
        assert sched.on_trial_result(None, trial, {"num_evaluations": 1, "objective": values[trial_id]}) == "CONTINUE"
        decide[trial_id] = sched.on_trial_result(None, trial, {"num_evaluations": 2, "objective": values[trial_id]})
    assert decide == {"diverged": "STOP", "good": "CONTINUE", "weak": "STOP"}
    # A diverged trial's last result goes to its rung as NaN, which the cutoffs leave out.
    sched._trial_info["late"] = sched._brackets[0]
    controller = SimpleNamespace(_checkpoint_manager=SimpleNamespace(_should_force_sync_up=False))
    sched.on_trial_complete(controller, SimpleNamespace(trial_id="late"), {"num_evaluations": 2, "objective": math.inf})
    assert all(math.isnan(v) or math.isfinite(v) for _, rung in sched._brackets[0]._rungs for v in rung.values())


def test_a_scheduler_pickled_before_it_kept_its_grace_period_reads_it_from_its_rungs():
    import pickle
    from types import SimpleNamespace

    from ftplat.tune.spaces import FullLengthASHAScheduler

    sched = FullLengthASHAScheduler(time_attr="num_evaluations", max_t=12, grace_period=3, reduction_factor=2)
    del sched.__dict__["grace"]  # as the Tune state of a sweep started with an older ftplat holds it
    sched = pickle.loads(pickle.dumps(sched))
    sched.set_search_properties("objective", "max")
    sched._trial_info["t"] = sched._brackets[0]
    decide = [sched.on_trial_result(None, SimpleNamespace(trial_id="t"), {"num_evaluations": n, "objective": float("nan")})
              for n in (1, 2, 3)]
    assert sched.read_grace_period() == 3 and decide == ["CONTINUE", "CONTINUE", "STOP"]


def test_the_evaluation_asha_stopped_a_trial_at_reaches_its_curve(tmp_path):
    """Tune gives the result a trial was stopped at to on_trial_complete only: 20 of 36 trials
    of a reviewer's ASHA sweep had no intermediate value at all."""
    searcher, _ = _searcher(tmp_path)
    searcher.suggest("t1")
    searcher.suggest("t2")
    searcher.on_trial_complete("t1", result={"objective": .55, "training_iteration": 1, "num_evaluations": 1})
    searcher.on_trial_result("t2", {"objective": .60, "training_iteration": 1, "num_evaluations": 1})
    searcher.on_trial_complete("t2", result={"objective": .60, "training_iteration": 1, "num_evaluations": 1})
    t1, t2 = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/study.db").trials
    assert (t1.intermediate_values, t1.value) == ({1: .55}, .55)
    assert (t2.intermediate_values, t2.value) == ({1: .60}, .60)
