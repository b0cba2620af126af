"""``ftplat sweeps show`` against a real sweep while it runs (a trial done, the next one
running, a leader) and after it ends, read from storage only by a separate process; and what
the sweep itself prints as it goes (Tune's table with the scope score and the searched values,
a line per trial that ends)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from live_actors import LiveActors

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.status import read_sweep_status
from ftplat.tune.sweep import run_sweep

pytestmark = pytest.mark.integration

NUM_TRIALS, EPOCHS = 2, 2


def run_show(sweep_dir) -> dict:
    out = subprocess.run([sys.executable, "-m", "ftplat.cli.main", "sweeps", "show", str(sweep_dir), "--json"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out)


def is_mid_sweep(shown: dict) -> bool:
    """A trial done, another running, a leader, the sweep not over."""
    return (shown["status"] == "running" and 1 <= shown["trials_done"] < NUM_TRIALS
            and any(t["status"] == "RUNNING" for t in shown["trials"]) and shown["leader"] is not None)


class ShowWhileRunning(threading.Thread):
    """Watches storage cheaply in this process; once the sweep is mid-way, runs the command."""

    def __init__(self, sweep_dir):
        super().__init__(daemon=True)
        self.sweep_dir, self.shown, self.stop = sweep_dir, [], threading.Event()

    def run(self):
        while not self.stop.is_set() and not any(is_mid_sweep(s) for s in self.shown):
            try:
                if is_mid_sweep(read_sweep_status(str(self.sweep_dir)).to_dict()):
                    self.shown.append(run_show(self.sweep_dir))
            except Exception:  # noqa: BLE001  (not a sweep folder yet, or a file mid-write)
                pass
            time.sleep(0.5)


def test_show_while_the_sweep_runs_and_after(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path, capfd,
                                             caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="ftplat")
    # `sweeps show` reads Tune's saved state, which Tune writes at most every 10 s by default:
    # about as long as the second tiny trial runs, so a sweep could end before any saved state
    # showed it mid-way. Tune's controller runs in this process and reads this when it starts.
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "1")
    storage = tmp_path / "storage"
    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", f"data.source={sentiment_data_dir}",
        f"storage.storage_path={storage}", "storage.sweep_name=watched",
        "data.max_length=32", "data.train_size=256", "data.eval_size=64", "data.eval_split=test",
        f"training.num_train_epochs={EPOCHS}.0", "training.logging_steps=8", "resources.max_concurrent_trials=1", "tracking.enabled=false",
        f"search.num_samples={NUM_TRIALS}", "search.seed=5",
        "search.parameters={training.learning_rate: {type: loguniform, low: 1.0e-4, high: 3.0e-2}}",
    ])
    watcher = ShowWhileRunning(storage / "watched")
    watcher.start()
    try:
        with LiveActors() as live:
            summary = run_sweep(job, space).to_dict()
    finally:
        watcher.stop.set()
        watcher.join()

    mid = [s for s in watcher.shown if is_mid_sweep(s)]
    assert mid, "the sweep was never seen with a trial done and the next one running"
    shown = mid[0]
    assert shown["num_samples"] == NUM_TRIALS and shown["scope"] == "last"
    done = [t for t in shown["trials"] if t["ended"] is not None]
    assert done and all(t["ended"] == "completed" and t["num_evaluations"] == EPOCHS for t in done)
    scores = [t["score"] for t in shown["trials"] if t["score"] is not None]
    assert shown["leader"]["score"] == max(scores)
    assert shown["leader"]["hyperparameters"].keys() == {"training.learning_rate"}
    assert shown["elapsed_s"] > 0 and shown["remaining_s"] is not None and shown["storage_bytes"] > 0

    after = run_show(storage / "watched")
    assert after["status"] == "finished" and after["trials_done"] == NUM_TRIALS and after["remaining_s"] == 0.0
    assert after["leader"]["trial_id"] == summary["winner"]["trial_id"]
    by_id = {t["trial_id"]: t for t in summary["trials"]}
    assert [t["trial_id"] for t in after["trials"]] == list(by_id)
    for t in after["trials"]:
        assert t["score"] == by_id[t["trial_id"]]["scores"]["last"]
        assert t["num_evaluations"] == by_id[t["trial_id"]]["num_evaluations"] == EPOCHS
        assert t["ended"] == "completed" and t["duration_s"] > 0
    on_disk = sum(p.stat().st_size for p in (storage / "watched").rglob("*") if p.is_file())
    assert after["storage_bytes"] == on_disk

    # What the sweep cost: each trial's reservation (driver 0.25 CPU + one 1-CPU worker) times its
    # wall, and its folder's bytes after retention; the sweep's sums (summary.json itself was
    # rewritten after the count, with the cost in it).
    for t in summary["trials"]:
        cost = t["cost"]
        assert (cost["cpus"], cost["gpus"]) == (1.25, 0.0) and cost["wall_s"] > 0
        # Both are rounded to 0.1 s on their own: they can differ by 0.05 + 0.05 x 1.25.
        assert cost["cpu_seconds"] == pytest.approx(cost["wall_s"] * 1.25, abs=0.1125 + 1e-9)
        folder = storage / "watched" / f"train-{t['trial_id']}"
        assert cost["storage_bytes"] == sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) > 0
    assert summary["cost"]["cpu_seconds"] == pytest.approx(sum(t["cost"]["cpu_seconds"] for t in summary["trials"]),
                                                           abs=0.2)
    assert abs(summary["cost"]["storage_bytes"] - on_disk) < 64 * 1024

    # Tune's table (its columns: tests/unit/test_sweeps_status.py) prints on Tune's own schedule
    # and width rules, which a full suite run did not meet; the trial-end lines are ftplat's.
    ended = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Trial ")]
    assert sorted(ended) == sorted(f"Trial {t['trial_id']} finished: {EPOCHS} evaluation(s), eval_accuracy[last]="
                                   f"{t['scores']['last']:.4g}" for t in summary["trials"])

    # Each trial's worker printed progress lines named by its Train run, not the Trainer's dicts.
    import ray

    logs = ray._private.worker.global_worker.node.get_logs_dir_path()
    printed = "\n".join(p.read_text(errors="replace") for p in Path(logs).glob("worker-*.out"))
    for t in summary["trials"]:
        mine = [line for line in printed.splitlines() if f"train-{t['trial_id']} step " in line]
        assert sum(" | eval_loss " in line and "eval_accuracy" in line for line in mine) == EPOCHS, mine
        assert any(" | loss " in line and ", ETA " in line for line in mine), mine
    assert "{'loss'" not in printed and "{'eval_loss'" not in printed

    # The Optuna study, in the sweep folder, holds the search as Tune told it: each trial's
    # searched value and scope score, and optuna-dashboard serves it.
    import optuna
    from wsgiref.util import setup_testing_defaults

    from optuna_dashboard import wsgi

    study_file = storage / "watched" / "optuna_study.db"
    assert study_file.is_file()
    study = optuna.load_study(study_name="watched", storage=f"sqlite:///{study_file}")
    assert len(study.trials) == NUM_TRIALS and all(t.state.name == "COMPLETE" for t in study.trials)
    told = sorted((t.params["training.learning_rate"], t.value) for t in study.trials)
    assert told == sorted((t["hyperparameters"]["training.learning_rate"], t["scores"]["last"])
                          for t in summary["trials"])
    assert all(len(t.intermediate_values) == EPOCHS for t in study.trials)
    assert study.best_value == summary["winner"]["score"]

    def get(path):
        status = []
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "after=0"}
        setup_testing_defaults(environ)
        body = b"".join(wsgi(f"sqlite:///{study_file}")(environ, lambda s, h, *a: status.append(s)))
        assert status[0].startswith("200"), (path, status)
        return json.loads(body)

    [listed] = get("/api/studies")["study_summaries"]
    assert listed["study_name"] == "watched"
    detail = get(f"/api/studies/{listed['study_id']}")
    assert len(detail["trials"]) == NUM_TRIALS
    assert [p["name"] for p in detail["union_search_space"]] == ["training.learning_rate"]

    # The dashboard's Train page (Train V2 state tracking) lists each trial's run by its name.
    from ray.train.v2._internal.state.state_actor import get_state_actor

    runs = ray.get(get_state_actor().get_train_runs.remote()).values()
    names = {f"train-{t['trial_id']}" for t in summary["trials"]}
    assert names <= {r.name for r in runs}
    # A run's controller is its trial's driver: the page links each run to that actor. (The
    # state actor is the cluster's: it also lists the runs of other tests' sweeps.)
    driver_ids = {a.actor_id for a in live.named("ImplicitFunc")}
    assert {r.controller_actor_id for r in runs if r.name in names} <= driver_ids, live.seen
    # The Actors page's Repr column (and the driver's log prefix) names each trial's driver
    # while it runs. Each trial's Train controller ran inside its driver, and Tune's reports
    # went from one to the other in that process: no controller actor, no queue actor; each
    # run's one worker is Train's, with no synchronization actor beside it (ray_internals.solo_sync).
    drivers = {a.repr_name for a in live.named("ImplicitFunc")}
    assert {f"trial-{t['trial_id']}" for t in summary["trials"]} <= drivers, live.seen
    assert not live.named("TrainController") and not live.named("_QueueActor"), live.seen
    assert live.named("RayTrainWorker") and not live.named("SynchronizationActor"), live.seen

    # `ftplat reproduce` runs a losing trial again from the records alone and gets its scores.
    from ftplat.cli.main import main as ftplat_main

    loser = next(t for t in summary["trials"] if t["trial_id"] != summary["winner"]["trial_id"])
    capfd.readouterr()
    assert ftplat_main(["reproduce", "watched", "--storage", str(storage), "--trial", loser["trial_id"],
                        "--tolerance", "0"]) == 0
    printed = capfd.readouterr().out
    assert f"Trial {loser['trial_id']} of sweep watched, run again as sweep watched-reproduce-{loser['trial_id']}:" \
        in printed
    assert "largest difference 0 (tolerance 0): matched" in printed
    again = json.loads((storage / f"watched-reproduce-{loser['trial_id']}" / "summary.json").read_text())
    [rerun] = again["trials"]
    assert rerun["hyperparameters"] == loser["hyperparameters"]
    assert [r["eval_accuracy"] for r in rerun["history"]] == [r["eval_accuracy"] for r in loser["history"]]
