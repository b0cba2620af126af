"""Nothing lost across ``--resume``: live retention replayed against real Ray snapshots, Trainer
states and Tune result files, then the end-of-sweep summary and gc the sweep runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ray.train._internal.storage import StorageContext
from ray.tune.experiment import Trial
from ray_runs import METRIC, RayRun, write_checkpoint_files

from ftplat.checkpoints.gc import read_gc_plan, run_gc_plan
from ftplat.config.loading import load_sweep_configs
from ftplat.tune.live_retention import LiveRetentionCallback
from ftplat.tune.summary import read_sweep_summary
from ftplat.tune.sweep import build_retention_policy

STEP = 10


class SweepSim:
    """A sweep driver's view of its trials: each report writes the checkpoint (registered with
    Ray's CheckpointManager), appends Tune's result line and calls live retention; ``resume``
    starts a new driver whose callback gets the state Tune saved last."""

    def __init__(self, root: Path, overrides: list[str]):
        self.root = root
        self.job, self.space = load_sweep_configs(None, None, [
            "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-4, high: 3.0e-2}", *overrides])
        self.values: dict[str, list[float]] = {}
        self.trials: dict[str, Trial] = {}
        self.runs: dict[str, RayRun] = {}
        self.results: dict[str, list[dict]] = {}
        self.callback = self._new_callback()
        self.saved_state = self.callback.get_state()

    def _new_callback(self) -> LiveRetentionCallback:
        space = self.space
        return LiveRetentionCallback(
            sweep_path=str(self.root), policy=build_retention_policy(self.job),
            objective={"metric": space.objective.metric, "mode": space.objective.mode, "scope": space.scope},
            metric_for_best_model=METRIC, greater_is_better=True)

    def add_trial(self, trial_id: str) -> None:
        storage = StorageContext(storage_path=str(self.root.parent), experiment_dir_name=self.root.name)
        trial = Trial("fn", trial_id=trial_id, experiment_tag=f"{len(self.trials) + 1}_lr=0.001", stub=True,
                      storage=storage, config={"training.learning_rate": 1e-3})
        trial.storage.trial_dir_name = f"train_driver_fn_{trial_id}"
        trial.set_status(Trial.RUNNING)
        self.trials[trial_id], self.values[trial_id], self.results[trial_id] = trial, [], []
        self.runs[trial_id] = RayRun(self.root, trial_id)

    def _log_history(self, values: list[float]) -> list[dict]:
        return [{"step": STEP * (i + 1), "epoch": float(i + 1), METRIC: v} for i, v in enumerate(values)]

    def report(self, trial_id: str, value: float, *, tune_logs_it: bool = True) -> None:
        values = self.values[trial_id]
        values.append(value)
        n = len(values)
        row = {"training_iteration": len(self.results[trial_id]) + 1, "step": STEP * n, "epoch": float(n),
               "num_evaluations": n, "checkpoint_name": f"checkpoint-{STEP * n}", METRIC: value}
        self.runs[trial_id].report(row, self._log_history(values))
        if tune_logs_it:
            self._append_result(trial_id, row)
        self.callback.on_trial_result(0, list(self.trials.values()), self.trials[trial_id], row)

    def _append_result(self, trial_id: str, row: dict) -> None:
        self.results[trial_id].append(row)
        trial_dir = self.root / self.trials[trial_id].storage.trial_dir_name
        trial_dir.mkdir(parents=True, exist_ok=True)
        with open(trial_dir / "result.json", "a") as f:
            f.write(json.dumps({**row, "trial_id": trial_id}) + "\n")

    def complete(self, trial_id: str) -> None:
        self.callback.on_trial_complete(0, list(self.trials.values()), self.trials[trial_id])
        self.trials[trial_id].set_status(Trial.TERMINATED)

    def save_state(self) -> None:
        """Tune saves its experiment state (callbacks included) now and then."""
        self.saved_state = json.loads(json.dumps(self.callback.get_state()))

    def resume(self, *, with_state: bool = True) -> None:
        """A new driver: callback state as last saved; running trials restore their runs, and
        their evaluations after the registered latest are made again."""
        self.callback = self._new_callback()
        if with_state:
            self.callback.set_state(self.saved_state)
        for tid, trial in self.trials.items():
            if trial.status == Trial.RUNNING:
                run = self.runs[tid]
                run.restore()
                latest = run.latest_registered()
                done = int(latest.split("-")[1]) // STEP if latest else 0
                self.values[tid] = self.values[tid][:done]
                self.results[tid] = []  # a restarted function trainable counts iterations from 1 again

    def end(self) -> SimpleNamespace:
        """The end of the sweep: the summary from Tune's complete results, then the final gc."""
        frames = {tid: pd.DataFrame(rows) if rows else None for tid, rows in self._full_results().items()}
        analysis = SimpleNamespace(trials=list(self.trials.values()), trial_dataframes=frames)
        summary = read_sweep_summary(analysis, sweep_name=self.root.name, sweep_path=str(self.root),
                                     job=self.job, space=self.space)
        run_gc_plan(read_gc_plan(str(self.root), build_retention_policy(self.job), True, summary=summary),
                    dry_run=False)
        return summary

    def _full_results(self) -> dict[str, list[dict]]:
        """What Tune's result.json files hold for each trial, renumbered as one history."""
        out = {}
        for tid, trial in self.trials.items():
            path = self.root / trial.storage.trial_dir_name / "result.json"
            rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
            out[tid] = rows
        return out

    def exists(self, trial_id: str, name: str) -> bool:
        return (self.root / f"train-{trial_id}" / name).is_dir()


POLICY_NOTHING_OUTSIDE_TOP = ["training.save_total_limit=1", "retention.keep_top_k_trials=0",
                              "retention.keep_trial_best=false", "retention.keep_trial_latest=false",
                              "search.scope=avg"]


def _run_b_then_c_with_a_resume_between(tmp_path, *, with_state: bool, tune_logs_b: bool,
                                        break_b_state: str | None = None) -> SweepSim:
    """The issue's example: B .60 .90 .89 .89 (avg .82) finishes, the driver dies and resumes,
    then C .78 x4 (avg .78) runs; B wins under scope avg."""
    sim = SweepSim(tmp_path / "sweep", POLICY_NOTHING_OUTSIDE_TOP)
    sim.add_trial("b")
    sim.add_trial("c")
    sim.trials["c"].set_status(Trial.PENDING)
    for value in (0.60, 0.90, 0.89, 0.89):
        sim.report("b", value, tune_logs_it=tune_logs_b)
    sim.complete("b")
    if with_state:
        sim.save_state()
    # retention left B only its best (the leading finished trial's), whose Trainer state stops there
    assert {p.name for p in (sim.root / "train-b").iterdir() if p.is_dir()} == {"checkpoint-20"}
    state = sim.root / "train-b" / "checkpoint-20" / "trainer_state.json"
    if break_b_state == "missing":  # half deleted, or a late upload without it
        state.unlink()
    elif break_b_state == "torn":
        state.write_text('{"log_hist')
    sim.resume(with_state=with_state)
    sim.trials["c"].set_status(Trial.RUNNING)
    for _ in range(4):
        sim.report("c", 0.78)
    sim.complete("c")
    return sim


@pytest.mark.parametrize("with_state, tune_logs_b", [(True, False), (False, True)],
                         ids=["callback-state-restored", "rows-read-from-result-json"])
def test_the_winners_best_survives_a_resume_under_scope_avg(tmp_path, with_state, tune_logs_b):
    sim = _run_b_then_c_with_a_resume_between(tmp_path, with_state=with_state, tune_logs_b=tune_logs_b)
    assert sim.exists("b", "checkpoint-20")  # live retention ranked B by its whole history
    if not tune_logs_b:  # the end-of-sweep summary reads result.json: give it B's rows
        for i, value in enumerate((0.60, 0.90, 0.89, 0.89), start=1):
            sim._append_result("b", {"training_iteration": i, "step": STEP * i, "epoch": float(i), "num_evaluations": i,
                                     "checkpoint_name": f"checkpoint-{STEP * i}", METRIC: value})
    summary = sim.end()
    assert summary.winner.trial_id == "b" and summary.winner.best_checkpoint.path.endswith("train-b/checkpoint-20")
    assert sim.exists("b", "checkpoint-20")


@pytest.mark.parametrize("damage", ["missing", "torn"])
def test_a_finished_trial_whose_history_cannot_be_read_loses_nothing(tmp_path, damage):
    sim = _run_b_then_c_with_a_resume_between(tmp_path, with_state=False, tune_logs_b=False, break_b_state=damage)
    assert sim.exists("b", "checkpoint-20")


def test_a_resumed_running_trial_keeps_its_registered_latest_over_a_cut_upload(tmp_path):
    sim = SweepSim(tmp_path / "sweep", ["training.save_total_limit=1", "search.scope=last"])
    sim.add_trial("a")
    for value in (0.9, 0.5, 0.6):
        sim.report("a", value)
    assert sim.runs["a"].latest_registered() == "checkpoint-30"
    # the driver dies while checkpoint-40 uploads: its Trainer state landed, its weights did not
    write_checkpoint_files(sim.root / "train-a" / "checkpoint-40", sim._log_history([0.9, 0.5, 0.6, 0.7]),
                           weights=False)
    sim.save_state()
    sim.resume(with_state=False)
    sim.add_trial("z")  # any event makes live retention plan again
    sim.report("z", 0.1)
    assert sim.exists("a", "checkpoint-30")
    sim.runs["a"].restore()
    assert sim.runs["a"].latest_registered() == "checkpoint-30"


@st.composite
def sweeps(draw):
    n_trials = draw(st.integers(2, 3))
    values = draw(st.lists(st.lists(st.sampled_from([0.1, 0.5, 0.6, 0.8, 0.9]), min_size=1, max_size=5),
                           min_size=n_trials, max_size=n_trials))
    order = draw(st.permutations([i for i, vals in enumerate(values) for _ in vals]))
    total = len(order)
    resume_at = draw(st.integers(1, total))
    saved_at = draw(st.integers(0, resume_at))
    return {
        "values": values,
        "order": order,
        "resume_at": resume_at,
        "saved_at": saved_at,
        "with_state": draw(st.booleans()),
        "tune_logs_after_save": draw(st.booleans()),
        "cut_upload": draw(st.booleans()),
        "overrides": [f"training.save_total_limit={draw(st.integers(1, 2))}",
                      f"retention.keep_top_k_trials={draw(st.sampled_from([0, 1]))}",
                      f"retention.keep_trial_best={str(draw(st.booleans())).lower()}",
                      f"retention.keep_trial_latest={str(draw(st.booleans())).lower()}",
                      f"search.scope={draw(st.sampled_from(['last', 'avg', 'last-5-avg', 'all']))}"],
    }


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=sweeps())
def test_random_histories_resumes_and_cut_uploads_lose_nothing(tmp_path_factory, case):
    """Whatever the histories, the resume point, the staleness of Tune's saved state and a cut
    upload: every running trial's registered latest survives every event, and the summary's
    winner has its best checkpoint at the end."""
    sim = SweepSim(tmp_path_factory.mktemp("sweep") / "sweep", case["overrides"])
    ids = [f"t{i}" for i in range(len(case["values"]))]
    for tid in ids:
        sim.add_trial(tid)
    position = {tid: 0 for tid in ids}
    remaining = {tid: len(vals) for tid, vals in zip(ids, case["values"])}

    def step(k: int, event: int) -> None:
        tid = ids[event]
        value = case["values"][event][position[tid]]
        position[tid] += 1
        # A crash can lose the result lines written after Tune last saved; the new driver logs all.
        logs = k < case["saved_at"] or case["tune_logs_after_save"] or k >= case["resume_at"]
        sim.report(tid, value, tune_logs_it=logs)
        if position[tid] == remaining[tid]:
            sim.complete(tid)
        if k + 1 == case["saved_at"]:
            sim.save_state()
        for other, trial in sim.trials.items():
            latest = sim.runs[other].latest_registered()
            if trial.status == Trial.RUNNING and latest:
                assert sim.exists(other, latest), f"running {other} lost its restore point {latest}"

    order = case["order"]
    for k, event in enumerate(order[: case["resume_at"]]):
        step(k, event)
    running = [tid for tid in ids if sim.trials[tid].status == Trial.RUNNING and sim.values[tid]]
    if case["cut_upload"] and running:
        tid = running[0]
        n = len(sim.values[tid]) + 1
        write_checkpoint_files(sim.root / f"train-{tid}" / f"checkpoint-{STEP * n}",
                               sim._log_history([*sim.values[tid], 0.99]), weights=False)
    sim.resume(with_state=case["with_state"])
    for tid in ids:  # what a restored trial makes again: its evaluations after the registered latest
        position[tid] = len(sim.values[tid]) if sim.trials[tid].status == Trial.RUNNING else position[tid]
    rest = [ids.index(tid) for tid in ids if sim.trials[tid].status == Trial.RUNNING
            for _ in range(remaining[tid] - position[tid])]
    for k, event in enumerate(rest, start=case["resume_at"]):
        step(k, event)
    for tid in ids:
        if sim.trials[tid].status == Trial.RUNNING:  # a trial with nothing left to report
            sim.complete(tid)
    summary = sim.end()
    if summary.winner is not None and summary.winner.best_checkpoint is not None:
        name = summary.winner.best_checkpoint.name
        assert sim.exists(summary.winner.trial_id, name), (summary.winner.trial_id, name)
    shutil.rmtree(sim.root.parent, ignore_errors=True)
