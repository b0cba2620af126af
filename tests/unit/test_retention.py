"""Checkpoint retention: HF save_total_limit semantics per trial, the sweep-wide policy, and
its invariants, checked against transformers' own rotation and a brute-force reference."""

from __future__ import annotations

import ast
import functools
import math
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ftplat.checkpoints.retention import (
    CheckpointInfo,
    RetentionPolicy,
    TrialCheckpoints,
    select_deletions,
    select_sweep_keep,
    select_trial_best,
    select_trial_keep,
    select_trial_ranking,
)

NAN, INF = math.nan, math.inf
# Few distinct values so ties are common; NaN, None and infinities all appear.
METRICS = st.one_of(
    st.sampled_from([0.0, 0.5, 0.5, 1.0]), st.just(NAN), st.none(), st.sampled_from([INF, -INF]),
    st.floats(-1, 1, allow_nan=False),
)
SCORES = st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.just(NAN), st.none(), st.sampled_from([INF, -INF]))
POLICIES = st.builds(
    RetentionPolicy,
    save_total_limit=st.integers(1, 4),
    keep_top_k_trials=st.one_of(st.none(), st.integers(0, 4)),
    keep_trial_best=st.booleans(),
    keep_trial_latest=st.booleans(),
)
FAST = settings(max_examples=100, deadline=None)


@st.composite
def histories(draw, max_size=8):
    """[(step, metric)] with strictly increasing steps."""
    values = draw(st.lists(METRICS, max_size=max_size))
    steps, step = [], 0
    for _ in values:
        step += draw(st.integers(1, 3))
        steps.append(step)
    return list(zip(steps, values))


def ckpts(history):
    return [CheckpointInfo(f"checkpoint-{s}", s, v) for s, v in history]


# ----------------------------------------------------------------- brute-force reference


def usable(value, gib):
    """Could be HF's best: compares strictly better than the starting bound of -inf/+inf."""
    return value is not None and not math.isnan(value) and (value > -INF if gib else value < INF)


def ref_best(history, gib):
    """Best value, earliest step among equals; no candidate -> None."""
    candidates = [(s, v) for s, v in history if usable(v, gib)]
    if not candidates:
        return None
    target = max(v for _, v in candidates) if gib else min(v for _, v in candidates)
    return min(s for s, v in candidates if v == target)


def ref_hf_rotation(history, limit, gib):
    """What survives when HF rotates after every save, written from the HF algorithm itself."""
    alive, best = [], None
    for i, (step, _) in enumerate(history):
        best = ref_best(history[: i + 1], gib)
        alive.append(step)
        if len(alive) <= limit:
            continue
        protected = {alive[-1]} | ({best} if best is not None else set())
        for old in list(alive):
            if len(alive) <= max(limit, len(protected)):
                break
            if old not in protected:
                alive.remove(old)
    return {f"checkpoint-{s}" for s in alive}


def beats(a, b, order, mode):
    """Trial a ranks above trial b: finite scores first, then by score, then trial order."""
    sa, sb = a.scope_score, b.scope_score
    fa = sa is not None and math.isfinite(sa)
    fb = sb is not None and math.isfinite(sb)
    if fa != fb:
        return fa
    if fa and sa != sb:
        return sa > sb if mode == "max" else sa < sb
    return order[a.trial_id] < order[b.trial_id]


def ref_sweep_keep(trials, hist, policy, mode, gib, winner):
    """The policy's definition, spelled out trial by trial."""
    order = {t.trial_id: i for i, t in enumerate(trials)}
    finished = [t for t in trials if not t.running]
    leaders = [t for t in finished if not any(beats(u, t, order, mode) for u in finished if u is not t)]
    keep = set()
    for t in trials:
        h = hist[t.trial_id]
        names = lambda steps: {(t.trial_id, f"checkpoint-{s}") for s in steps}  # noqa: E731
        hf = {(t.trial_id, n) for n in ref_hf_rotation(h, policy.save_total_limit, gib)}
        best = ref_best(h, gib)
        latest = h[-1][0] if h else None
        above = sum(beats(u, t, order, mode) for u in finished if u is not t)
        k = policy.keep_top_k_trials
        if t.running or k is None or above < k:
            keep |= hf
        else:
            if policy.keep_trial_best and best is not None:
                keep |= names([best])
            if policy.keep_trial_latest and latest is not None:
                keep |= names([latest])
        if latest is not None and (t.trial_id == winner or t in leaders):
            keep |= names([best if best is not None else latest])
    return keep


# ----------------------------------------------------------------- per trial: HF semantics


@functools.cache
def load_hf_determine_best_metric():
    """transformers' own ``Trainer._determine_best_metric``, compiled from its source.

    Importing ``transformers.trainer`` pulls in accelerate and friends (about 5 s, a quarter
    of the unit-test budget) for this one method, which needs only ``np`` and ``SaveStrategy``.
    If upstream makes it depend on anything else, the call below fails loudly.
    """
    import transformers.trainer_utils as hf_utils

    path = Path(hf_utils.__file__).with_name("trainer.py")
    tree = ast.parse(path.read_text())
    trainer_cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trainer")
    method = next(n for n in trainer_cls.body
                  if isinstance(n, ast.FunctionDef) and n.name == "_determine_best_metric")
    namespace = {"np": np, "SaveStrategy": hf_utils.SaveStrategy}
    exec(compile(ast.Module(body=[method], type_ignores=[]), str(path), "exec"), namespace)
    return namespace["_determine_best_metric"]


def run_hf_trainer_rotation(history, limit, gib):
    """transformers' own code on real folders: ``_determine_best_metric`` after each
    evaluation, then what ``Trainer._save_checkpoint`` does: record the best folder, rotate."""
    from transformers.trainer_utils import SaveStrategy, rotate_checkpoints

    determine_best_metric = load_hf_determine_best_metric()
    args = SimpleNamespace(metric_for_best_model="eval_m", greater_is_better=gib, save_strategy=SaveStrategy.STEPS)
    state = SimpleNamespace(best_metric=None, best_global_step=None, global_step=0, best_model_checkpoint=None)
    trainer = SimpleNamespace(args=args, state=state)
    with tempfile.TemporaryDirectory() as out:
        for step, value in history:
            state.global_step = step
            determine_best_metric(trainer, {"eval_m": NAN if value is None else value}, None)
            os.mkdir(os.path.join(out, f"checkpoint-{step}"))
            if state.best_global_step:
                best_dir = os.path.join(out, f"checkpoint-{state.best_global_step}")
                if os.path.exists(best_dir):
                    state.best_model_checkpoint = best_dir
            rotate_checkpoints(out, save_total_limit=limit, best_model_checkpoint=state.best_model_checkpoint)
        return set(os.listdir(out))


@settings(max_examples=80, deadline=None)
@given(history=histories(), limit=st.integers(1, 4), gib=st.booleans())
def test_trial_keep_equals_transformers_rotation(history, limit, gib):
    assert set(select_trial_keep(ckpts(history), limit, gib)) == run_hf_trainer_rotation(history, limit, gib)


@FAST
@given(history=histories(), limit=st.integers(1, 4), gib=st.booleans())
def test_trial_keep_equals_reference_and_closed_form(history, limit, gib):
    kept = select_trial_keep(ckpts(history), limit, gib)
    assert set(kept) == ref_hf_rotation(history, limit, gib)
    best = ref_best(history, gib)
    assert (select_trial_best(ckpts(history), gib) or SimpleNamespace(step=None)).step == best
    # The docstring's closed form: N newest if the best is among them, else best + max(N-1, 1) newest.
    newest = [f"checkpoint-{s}" for s, _ in reversed(history)]
    if best is None or f"checkpoint-{best}" in newest[:limit]:
        assert set(kept) == set(newest[:limit])
    else:
        assert set(kept) == {f"checkpoint-{best}", *newest[: max(limit - 1, 1)]}


def test_trial_keep_examples():
    h = [(10, 0.5), (20, 0.9), (30, 0.4), (40, 0.3), (50, 0.2)]
    assert select_trial_keep(ckpts(h), 1, True) == {"checkpoint-20": "trial best", "checkpoint-50": "recent (1 of 1)"}
    assert select_trial_keep(ckpts(h), 2, True) == {"checkpoint-20": "trial best", "checkpoint-50": "recent (1 of 1)"}
    assert select_trial_keep(ckpts(h), 3, True) == {
        "checkpoint-20": "trial best", "checkpoint-40": "recent (2 of 2)", "checkpoint-50": "recent (1 of 2)"}
    assert set(select_trial_keep(ckpts(h), 3, False)) == {"checkpoint-30", "checkpoint-40", "checkpoint-50"}
    # NaN is never best, the earliest of equal values wins.
    assert select_trial_best(ckpts([(1, NAN), (2, 0.7), (3, 0.7), (4, None)]), True).step == 2
    assert select_trial_best(ckpts([(1, NAN), (2, None)]), True) is None
    assert select_trial_keep([], 2, True) == {}


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_bad_limits_are_rejected(bad):
    with pytest.raises(ValueError, match="save_total_limit"):
        RetentionPolicy(save_total_limit=bad)
    with pytest.raises(ValueError, match="save_total_limit"):
        select_trial_keep([], bad, True)


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="keep_top_k_trials"):
        RetentionPolicy(2, keep_top_k_trials=-1)
    with pytest.raises(ValueError, match="keep_trial_best"):
        RetentionPolicy(2, keep_trial_best="yes")
    with pytest.raises(ValueError, match="share a step"):
        TrialCheckpoints("a", [CheckpointInfo("x", 1), CheckpointInfo("y", 1)], running=False)
    with pytest.raises(ValueError, match="duplicate checkpoint names"):
        TrialCheckpoints("a", [CheckpointInfo("x", 1), CheckpointInfo("x", 2)], running=False)
    trials = [TrialCheckpoints("a", [], running=False), TrialCheckpoints("a", [], running=False)]
    with pytest.raises(ValueError, match="duplicate trial ids"):
        select_sweep_keep(trials, RetentionPolicy(1), mode="max", greater_is_better=True)
    with pytest.raises(ValueError, match="mode"):
        select_sweep_keep(trials[:1], RetentionPolicy(1), mode="best", greater_is_better=True)
    with pytest.raises(ValueError, match="winner"):
        select_sweep_keep(trials[:1], RetentionPolicy(1), mode="max", greater_is_better=True, winner_trial_id="z")


# ----------------------------------------------------------------- sweep-wide policy


def test_ranking_puts_non_finite_last_and_breaks_ties_by_trial_order():
    scores = {"a": NAN, "b": 0.5, "c": None, "d": 0.9, "e": 0.5, "f": INF}
    trials = [TrialCheckpoints(tid, [], running=False, scope_score=s) for tid, s in scores.items()]
    assert select_trial_ranking(trials, "max") == ["d", "b", "e", "a", "c", "f"]
    assert select_trial_ranking(trials, "min") == ["b", "e", "d", "a", "c", "f"]


def test_of_equal_scores_a_completed_trial_leads_as_the_summary_chooses_its_winner():
    # t0 failed midway with the score t1 finished with: the summary's winner is t1, so the
    # trial retention guards while the sweep runs (no winner yet) must be t1, not t0.
    failed = TrialCheckpoints("t0", ckpts([(1, 0.3), (2, 0.2)]), running=False, scope_score=0.8, completed=False)
    done = TrialCheckpoints("t1", ckpts([(1, 0.4), (2, 0.5), (3, 0.6)]), running=False, scope_score=0.8,
                            completed=True)
    assert select_trial_ranking([failed, done], "max") == ["t1", "t0"]
    assert select_trial_ranking([failed, done], "min") == ["t1", "t0"]
    policy = RetentionPolicy(1, keep_top_k_trials=1, keep_trial_best=False, keep_trial_latest=False)
    kept = select_sweep_keep([failed, done], policy, mode="max", greater_is_better=False, winner_trial_id=None)
    assert kept[("t1", "checkpoint-1")].endswith("best of leading finished trial")
    assert ("t0", "checkpoint-2") not in kept


def test_sweep_policy_example():
    h = {"a": [(1, 0.5), (2, 0.9), (3, 0.4), (4, 0.3)], "b": [(1, 0.6), (2, 0.2), (3, NAN)], "c": [(1, 0.6), (2, 0.2)]}
    trials = [TrialCheckpoints("a", ckpts(h["a"]), running=False, scope_score=0.9),
              TrialCheckpoints("b", ckpts(h["b"]), running=False, scope_score=0.2),
              TrialCheckpoints("c", ckpts(h["c"]), running=True, scope_score=None)]
    policy = RetentionPolicy(2, keep_top_k_trials=1, keep_trial_latest=False)
    kept = select_sweep_keep(trials, policy, mode="max", greater_is_better=True, winner_trial_id="a")
    assert kept == {
        ("a", "checkpoint-2"): "top-1 trial so far: trial best; best of winning trial",
        ("a", "checkpoint-4"): "top-1 trial so far: recent (1 of 1)",
        ("b", "checkpoint-1"): "trial best",
        ("c", "checkpoint-1"): "trial best",
        ("c", "checkpoint-2"): "recent (1 of 1); latest of running trial",
    }
    deleted = select_deletions(trials, policy, mode="max", greater_is_better=True, winner_trial_id="a")
    assert deleted[("a", "checkpoint-1")] == "rotated out (save_total_limit=2)"
    assert deleted[("b", "checkpoint-3")] == "trial outside the top 1 (rank 2 among finished trials)"


def test_invariants_hold_with_every_flag_off():
    h = [(1, 0.9), (2, 0.1), (3, 0.2)]
    trials = [TrialCheckpoints("w", ckpts(h), running=False, scope_score=0.1),
              TrialCheckpoints("x", ckpts(h), running=False, scope_score=0.9),
              TrialCheckpoints("r", ckpts(h), running=True, scope_score=0.0)]
    policy = RetentionPolicy(1, keep_top_k_trials=0, keep_trial_best=False, keep_trial_latest=False)
    kept = select_sweep_keep(trials, policy, mode="max", greater_is_better=True, winner_trial_id="w")
    assert kept[("w", "checkpoint-1")] == "best of winning trial"
    assert kept[("x", "checkpoint-1")] == "best of leading finished trial"
    assert "latest of running trial" in kept[("r", "checkpoint-3")]
    assert ("w", "checkpoint-3") not in kept


@st.composite
def sweeps(draw):
    """Trials with metric histories, a per-report scope score, and an order of events: each
    trial reports its checkpoints in order then finishes, trials interleaved at random."""
    n = draw(st.integers(1, 5))
    hist = {f"t{i}": draw(histories(max_size=6)) for i in range(n)}
    scores = {tid: draw(st.lists(SCORES, min_size=len(h), max_size=len(h))) for tid, h in hist.items()}
    pending = {tid: len(h) + 1 for tid, h in hist.items()}  # reports, then "finish"
    events = []
    while pending:
        tid = draw(st.sampled_from(sorted(pending)))
        events.append(tid)
        pending[tid] -= 1
        if not pending[tid]:
            del pending[tid]
    return hist, scores, events


def build_state(hist, scores, done):
    """The trials after ``done[tid]`` events each (the last event of a trial is its finish)."""
    trials = []
    for tid, h in hist.items():
        n = min(done[tid], len(h))
        trials.append(TrialCheckpoints(tid, ckpts(h[:n]), running=done[tid] <= len(h),
                                       scope_score=scores[tid][n - 1] if n else None))
    return trials


@FAST
@given(sweep=sweeps(), policy=POLICIES, mode=st.sampled_from(["max", "min"]), gib=st.booleans())
def test_policy_applied_as_the_sweep_goes(sweep, policy, mode, gib):
    hist, scores, events = sweep
    done = dict.fromkeys(hist, 0)
    alive: set = set()
    deleted_ever: set = set()
    for tid in events:
        done[tid] += 1
        if done[tid] <= len(hist[tid]):
            alive.add((tid, f"checkpoint-{hist[tid][done[tid] - 1][0]}"))
        trials = build_state(hist, scores, done)
        cut = {tid: h[: min(done[tid], len(h))] for tid, h in hist.items()}
        kept = select_sweep_keep(trials, policy, mode=mode, greater_is_better=gib)
        dropped = select_deletions(trials, policy, mode=mode, greater_is_better=gib)
        every = {(t.trial_id, c.name) for t in trials for c in t.checkpoints}
        assert set(kept) | set(dropped) == every and not set(kept) & set(dropped)
        assert set(kept) == ref_sweep_keep(trials, cut, policy, mode, gib, None)
        assert all(reason for reason in kept.values())
        for t in trials:
            if t.running and t.checkpoints:
                assert (t.trial_id, t.checkpoints[-1].name) not in dropped, "latest of a running trial"
        deleted_ever |= alive & set(dropped)
        alive -= set(dropped)

    # The end: every trial finished; the winner is the first of the ranking, as in summary.json.
    trials = build_state(hist, scores, done)
    winner = select_trial_ranking(trials, mode)[0]
    final = select_sweep_keep(trials, policy, mode=mode, greater_is_better=gib, winner_trial_id=winner)
    assert set(final) == ref_sweep_keep(trials, hist, policy, mode, gib, winner)
    # Deleting as the sweep went left exactly what the definition keeps at the end.
    assert alive == set(final)
    best = ref_best(hist[winner], gib)
    if best is not None:
        assert (winner, f"checkpoint-{best}") not in deleted_ever, "best of the winning trial"


@FAST
@given(sweep=sweeps(), policy=POLICIES, mode=st.sampled_from(["max", "min"]), gib=st.booleans(), data=st.data())
def test_any_named_winner_keeps_its_best(sweep, policy, mode, gib, data):
    """The summary's winner may come from a rule other than the ranking: still protected."""
    hist, scores, _ = sweep
    done = {tid: data.draw(st.integers(0, len(h) + 1)) for tid, h in hist.items()}
    trials = build_state(hist, scores, done)
    winner = data.draw(st.sampled_from(sorted(hist)))
    kept = select_sweep_keep(trials, policy, mode=mode, greater_is_better=gib, winner_trial_id=winner)
    cut = {tid: h[: min(done[tid], len(h))] for tid, h in hist.items()}
    assert set(kept) == ref_sweep_keep(trials, cut, policy, mode, gib, winner)
    best = ref_best(cut[winner], gib)
    if best is not None:
        assert (winner, f"checkpoint-{best}") in kept
