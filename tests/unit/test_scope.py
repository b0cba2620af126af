"""ray_scope selection checked against Ray Tune's own Trial metadata and ExperimentAnalysis."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ray.tune import ExperimentAnalysis
from ray.tune.experiment import Trial

from ftplat.scoring import SCOPES, compute_scope_scores, compute_scope_stats, select_best

METRIC = "eval_accuracy"


def build_ray_analysis(histories):
    """Real Ray Trial objects fed through ``update_last_result`` (what Tune does per result),
    wrapped in an ExperimentAnalysis without touching storage."""
    trials = []
    for i, history in enumerate(histories):
        trial = Trial("fake_trainable", stub=True, trial_id=f"t{i}")
        for iteration, value in enumerate(history, start=1):
            trial.update_last_result({METRIC: value, "training_iteration": iteration})
        trials.append(trial)
    analysis = object.__new__(ExperimentAnalysis)
    analysis.trials = trials
    analysis.default_metric, analysis.default_mode = None, None
    return analysis


def ours(histories, scope, mode):
    candidates = [(f"t{i}", compute_scope_stats(enumerate(h, start=1))) for i, h in enumerate(histories)]
    return select_best(candidates, scope, mode)


def rays(histories, scope, mode):
    best = build_ray_analysis(histories).get_best_trial(METRIC, mode, scope)
    return best.trial_id if best else None


NAN = float("nan")
CASES = {
    "distinct": [[0.5, 0.7, 0.6], [0.6, 0.65, 0.66], [0.4, 0.9, 0.5]],
    "ties_first_wins": [[0.5, 0.7], [0.6, 0.7], [0.7, 0.7]],
    "nan_last_value": [[0.5, NAN], [0.6, 0.6], [0.9, 0.4]],
    "nan_first_value": [[NAN, 0.9, 0.95], [0.6, 0.7, 0.8]],
    "all_nan": [[NAN, NAN], [NAN]],
    "inf": [[0.5, math.inf], [0.6, 0.6]],
    "one_trial_nan": [[NAN, NAN]],
    "long_histories": [[i / 20 for i in range(15)], [0.7] * 15, [(15 - i) / 15 for i in range(15)]],
    "unequal_lengths": [[0.8], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.99], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]],
    "empty_history": [[], [0.5, 0.6]],
}


@pytest.mark.parametrize("mode", ["max", "min"])
@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_matches_ray_get_best_trial(case, scope, mode):
    histories = CASES[case]
    assert ours(histories, scope, mode) == rays(histories, scope, mode)


values = st.one_of(
    st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, NAN]),  # ties and NaNs are common
    st.floats(min_value=0, max_value=1, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(
    histories=st.lists(st.lists(values, min_size=1, max_size=14), min_size=1, max_size=5),
    scope=st.sampled_from(SCOPES),
    mode=st.sampled_from(["max", "min"]),
)
def test_matches_ray_on_random_histories(histories, scope, mode):
    assert ours(histories, scope, mode) == rays(histories, scope, mode)


@settings(max_examples=200, deadline=None)
@given(history=st.lists(st.floats(min_value=-5, max_value=5), min_size=1, max_size=14))
def test_stats_match_ray_trial_metadata(history):
    trial = build_ray_analysis([history]).trials[0]
    ray_stats = trial.metric_analysis[METRIC]
    our_stats = compute_scope_stats(enumerate(history, start=1))
    for key in ("last", "avg", "last-5-avg", "last-10-avg", "max", "min"):
        assert our_stats[key] == pytest.approx(ray_stats[key], nan_ok=True), key


def test_scope_scores_have_their_documented_meaning():
    history = [0.1, 0.9, 0.2, 0.3, 0.4, 0.5, 0.6]
    scores = compute_scope_scores(history, "max")
    assert scores["last"] == 0.6
    assert scores["avg"] == pytest.approx(sum(history) / 7)
    assert scores["last-5-avg"] == pytest.approx(sum(history[-5:]) / 5)
    assert scores["last-10-avg"] == pytest.approx(sum(history) / 7)
    assert scores["all"] == 0.9
    assert compute_scope_scores(history, "min")["all"] == 0.1


def test_unknown_scope_and_mode_are_errors():
    with pytest.raises(ValueError, match="scope 'best' is not one of"):
        select_best([("a", {}), ("b", {})], "best", "max")
    with pytest.raises(ValueError, match="mode must be"):
        select_best([("a", {})], "last", "maximum")


def test_trials_sort_by_the_count_their_proposer_tagged_them_with():
    from types import SimpleNamespace

    from ftplat.ray_internals import sort_trials_by_creation

    tags = ["10_lr=0.1", "2_lr=0.2", None, "1", "0_lr=0.3", "x_lr=0.4"]
    trials = [SimpleNamespace(experiment_tag=t) for t in tags]
    assert [t.experiment_tag for t in sort_trials_by_creation(trials)] == [
        "0_lr=0.3", "1", "2_lr=0.2", "10_lr=0.1", None, "x_lr=0.4"]
