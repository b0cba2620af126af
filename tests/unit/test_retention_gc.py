"""``ftplat checkpoints gc`` on a fake sweep folder whose Ray snapshots are written by Ray Train
V2's own CheckpointManager, and read back by Ray's own ``Result.from_path`` after the gc."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from local_servers import run_moto_s3_in_threads
from ray_runs import METRIC, write_checkpoint_files, write_ray_run

from ftplat.checkpoints.gc import (
    DEFER,
    DELETE,
    KEEP,
    PRUNE_SNAPSHOT,
    STRIP_STATE,
    format_gc_plan,
    read_gc_plan,
    run_gc_plan,
)
from ftplat.checkpoints.retention import RetentionPolicy
from ftplat.ray_internals import SNAPSHOT_FILE, build_pruned_snapshot, select_snapshot_names
from ftplat.records import SweepSummary

ASHA_ORPHAN = "checkpoint_2026-11-22_10-00-00.000000"


def rows_for(values: list[float | None], step: int = 10) -> list[dict]:
    return [{"step": step * (i + 1), "checkpoint_name": f"checkpoint-{step * (i + 1)}", METRIC: v}
            for i, v in enumerate(values)]


def trial_record(trial_id, status, score, rows):
    return {"trial_id": trial_id, "status": status, "scores": {"last": score, "avg": None}, "history": rows}


@pytest.fixture
def sweep(tmp_path) -> Path:
    """a: the winner; b: NaN score, ranked last; c: running, with an upload not reported yet;
    d: stopped by ASHA, with an orphan Ray-named folder; zzz: a folder the summary doesn't know."""
    root = tmp_path / "sweep"
    hist = {"a": rows_for([0.5, 0.9, 0.4, 0.6, 0.7]), "b": rows_for([0.6, 0.65, None]),
            "c": rows_for([0.1, 0.2, 0.3]), "d": rows_for([0.55])}
    for tid, rows in hist.items():
        write_ray_run(root, tid, rows)
    write_checkpoint_files(root / "train-c" / "checkpoint-40")
    write_checkpoint_files(root / "train-d" / ASHA_ORPHAN)
    write_checkpoint_files(root / "train-zzz" / "checkpoint-10")
    summary = {
        "scope": "last",
        "objective": {"metric": METRIC, "mode": "max"},
        "metric_for_best_model": METRIC,
        "winner": {"trial_id": "a", "score": 0.7},
        "trials": [trial_record("a", "TERMINATED", 0.7, hist["a"]), trial_record("b", "TERMINATED", None, hist["b"]),
                   trial_record("c", "RUNNING", 0.3, hist["c"]), trial_record("d", "TERMINATED", 0.55, hist["d"])],
    }
    (root / "summary.json").write_text(json.dumps(summary))
    return root


def listing(root: Path) -> dict[str, set[str]]:
    return {run.name: {p.name for p in run.iterdir() if p.is_dir()} for run in sorted(root.glob("train-*"))}


def load_with_ray(run: Path):
    """What a restore does first: Ray's CheckpointManager loads the snapshot and checks that
    every checkpoint it tracks exists (``Result.from_path`` goes through the same code)."""
    import ray.train

    return ray.train.Result.from_path(str(run))


def actions(plan) -> dict[str, str]:
    return {"/".join(Path(a.path).parts[-2:]): a.action for a in plan}


def test_dry_run_plans_and_touches_nothing(sweep):
    before = listing(sweep)
    plan = read_gc_plan(str(sweep), RetentionPolicy(2, keep_top_k_trials=1), greater_is_better=True)
    assert run_gc_plan(plan, dry_run=True) == []
    assert listing(sweep) == before
    assert actions(plan) == {
        "train-a/" + SNAPSHOT_FILE: PRUNE_SNAPSHOT,
        "train-a/checkpoint-10": DELETE, "train-a/checkpoint-20": KEEP, "train-a/checkpoint-30": DELETE,
        "train-a/checkpoint-40": DELETE, "train-a/checkpoint-50": KEEP,
        "train-b/" + SNAPSHOT_FILE: PRUNE_SNAPSHOT,
        "train-b/checkpoint-10": DELETE, "train-b/checkpoint-20": KEEP, "train-b/checkpoint-30": KEEP,
        "train-c/checkpoint-10": DEFER, "train-c/checkpoint-20": KEEP, "train-c/checkpoint-30": KEEP,
        "train-c/checkpoint-40": KEEP,
        "train-d/checkpoint-10": KEEP, f"train-d/{ASHA_ORPHAN}": DELETE,
        "sweep/train-zzz": KEEP,
    }
    text = format_gc_plan(plan)
    reasons = {"/".join(Path(a.path).parts[-2:]): a.reason for a in plan}
    assert reasons["train-a/checkpoint-20"] == "top-1 trial so far: trial best; best of winning trial"
    assert reasons["train-b/checkpoint-10"] == "trial outside the top 1 (rank 3 among finished trials)"
    assert reasons[f"train-d/{ASHA_ORPHAN}"] == "orphan, not tracked"
    assert "the trial is still running" in reasons["train-c/checkpoint-10"]
    assert "may still be uploading" in reasons["train-c/checkpoint-40"]
    assert text.splitlines()[-1] == "9 keep, 5 delete, 1 defer, 2 prune-snapshot"
    assert f"delete          {sweep}/train-a/checkpoint-10  (rotated out (save_total_limit=2))" in text


def test_gc_deletes_and_ray_still_restores(sweep):
    plan = read_gc_plan(str(sweep), RetentionPolicy(2, keep_top_k_trials=1), greater_is_better=True)
    applied = run_gc_plan(plan, dry_run=False)
    assert [a.action for a in applied].count(DELETE) == 5
    assert listing(sweep) == {
        "train-a": {"checkpoint-20", "checkpoint-50"},
        "train-b": {"checkpoint-20", "checkpoint-30"},
        "train-c": {"checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40"},
        "train-d": {"checkpoint-10"},
        "train-zzz": {"checkpoint-10"},
    }
    for run, latest in (("train-a", "checkpoint-50"), ("train-b", "checkpoint-30"), ("train-d", "checkpoint-10")):
        result = load_with_ray(sweep / run)
        assert Path(result.checkpoint.path).name == latest
        assert {Path(c.path).name for c, _ in result.best_checkpoints} == listing(sweep)[run] - {ASHA_ORPHAN}
    best = load_with_ray(sweep / "train-a").get_best_checkpoint(METRIC, "max")
    assert Path(best.path).name == "checkpoint-20"
    # Once applied, the plan deletes nothing more.
    again = read_gc_plan(str(sweep), RetentionPolicy(2, keep_top_k_trials=1), greater_is_better=True)
    assert {a.action for a in again} == {KEEP, DEFER}


def test_deleting_the_latest_moves_rays_latest_to_the_newest_survivor(sweep):
    policy = RetentionPolicy(1, keep_top_k_trials=0, keep_trial_latest=False)
    run_gc_plan(read_gc_plan(str(sweep), policy, greater_is_better=True), dry_run=False)
    assert listing(sweep)["train-b"] == {"checkpoint-20"}
    assert listing(sweep)["train-a"] == {"checkpoint-20"}  # the winner keeps its best, flags or not
    assert Path(load_with_ray(sweep / "train-b").checkpoint.path).name == "checkpoint-20"


def test_ray_refuses_a_snapshot_naming_a_deleted_folder(sweep):
    """Why the snapshot is rewritten: the control case, deleting behind Ray's back."""
    from ray.train.v2._internal.exceptions import CheckpointManagerInitializationError

    shutil.rmtree(sweep / "train-a" / "checkpoint-10")
    with pytest.raises(CheckpointManagerInitializationError, match="does not exist anymore"):
        load_with_ray(sweep / "train-a")


def test_pruned_snapshot_keeps_rays_lists_consistent(sweep):
    text = (sweep / "train-a" / SNAPSHOT_FILE).read_text()
    state = json.loads(text)
    state["pending_training_results"] = [state["checkpoint_results"][0], state["checkpoint_results"][1]]
    state["pending_validation_specs"] = [True, False]
    state["validated_checkpoint_dir_names"] = ["checkpoint-20", "checkpoint-30"]
    pending = [r["checkpoint_dir_name"] for r in state["pending_training_results"]]
    kept = {"checkpoint-20", "checkpoint-30", pending[0]}
    pruned = json.loads(build_pruned_snapshot(json.dumps(state), kept))
    names = [r["checkpoint_dir_name"] for r in pruned["checkpoint_results"]]
    assert set(names) == kept
    by_name = dict(zip([r["checkpoint_dir_name"] for r in state["checkpoint_results"]],
                       state["checkpoint_report_indices"]))
    assert pruned["checkpoint_report_indices"] == [by_name[n] for n in names]
    assert [r["checkpoint_dir_name"] for r in pruned["pending_training_results"]] == [pending[0]]
    assert pruned["pending_validation_specs"] == [True]
    assert pruned["validated_checkpoint_dir_names"] == ["checkpoint-20", "checkpoint-30"]
    # checkpoint-50 (the latest) is gone: the newest survivor by report index takes its place.
    newest = max(kept, key=by_name.__getitem__)
    assert pruned["latest_checkpoint_result"]["checkpoint_dir_name"] == newest
    assert {k: v for k, v in pruned.items() if k not in state or k == "ray_version"} == {
        "ray_version": state["ray_version"]}
    assert pruned["current_report_index"] == state["current_report_index"]
    assert select_snapshot_names(json.dumps(pruned)) == kept
    assert json.loads(build_pruned_snapshot(text, set()))["latest_checkpoint_result"] is None


def test_unreadable_inputs_are_user_errors(sweep, tmp_path):
    with pytest.raises(ValueError, match="unrecognised Ray checkpoint manager snapshot"):
        build_pruned_snapshot(json.dumps({"ray_version": "9.9", "checkpoints": []}), set())
    with pytest.raises(ValueError, match="no summary.json"):
        read_gc_plan(str(tmp_path / "nowhere"), RetentionPolicy(1), greater_is_better=True)


def test_gc_through_an_s3_uri(sweep, monkeypatch):
    """The same plan through pyarrow's S3 filesystem (a moto server on localhost), snapshot
    rewrites included (pyarrow uploads need moto >= 5.2.2, getmoto/moto#10055)."""
    with run_moto_s3_in_threads(monkeypatch) as s3:
        s3.create_bucket(Bucket="bkt")
        for path in sweep.rglob("*"):
            if path.is_file():
                s3.put_object(Bucket="bkt", Key=f"sweep/{path.relative_to(sweep)}", Body=path.read_bytes())
        policy = RetentionPolicy(2, keep_top_k_trials=1)
        plan = read_gc_plan("s3://bkt/sweep", policy, greater_is_better=True)
        local = read_gc_plan(str(sweep), policy, greater_is_better=True)
        assert [(a.action, a.reason) for a in plan] == [(a.action, a.reason) for a in local]
        assert sum(a.action == PRUNE_SNAPSHOT for a in plan) == 2
        run_gc_plan(plan, dry_run=False)
        keys = {obj["Key"] for obj in s3.list_objects_v2(Bucket="bkt", Prefix="sweep/")["Contents"]}
        folders = {str(Path(k).parent.relative_to("sweep")) for k in keys if k.endswith("config.json")}
        assert folders == {"train-a/checkpoint-20", "train-a/checkpoint-50", "train-b/checkpoint-20",
                           "train-b/checkpoint-30", "train-c/checkpoint-10", "train-c/checkpoint-20",
                           "train-c/checkpoint-30", "train-c/checkpoint-40", "train-d/checkpoint-10",
                           "train-zzz/checkpoint-10"}
        # the rewritten snapshots still load (Ray checks every checkpoint they name exists)
        assert Path(load_with_ray("s3://bkt/sweep/train-a").checkpoint.path).name == "checkpoint-50"
        assert Path(load_with_ray("s3://bkt/sweep/train-b").checkpoint.path).name == "checkpoint-30"


def test_live_plan_deletes_in_running_trials_and_repair_lets_ray_restore(sweep):
    """What the sweep driver does after each evaluation: running trials lose what HF rotation
    drops too; their snapshot still names the folder until the trial driver repairs it."""
    from ftplat.checkpoints.gc import run_repair_snapshot

    plan = read_gc_plan(str(sweep), RetentionPolicy(2, keep_top_k_trials=1), greater_is_better=True,
                         delete_running=True)
    assert actions(plan)["train-c/checkpoint-10"] == DELETE
    assert "train-c/" + SNAPSHOT_FILE not in actions(plan)  # its controller would rewrite it anyway
    assert actions(plan)["train-c/checkpoint-40"] == KEEP  # the upload not reported yet
    run_gc_plan(plan, dry_run=False)
    assert listing(sweep)["train-c"] == {"checkpoint-20", "checkpoint-30", "checkpoint-40"}

    from ray.train.v2._internal.exceptions import CheckpointManagerInitializationError

    with pytest.raises(CheckpointManagerInitializationError):
        load_with_ray(sweep / "train-c")
    assert run_repair_snapshot(str(sweep / "train-c")) == {"checkpoint-10"}
    assert Path(load_with_ray(sweep / "train-c").checkpoint.path).name == "checkpoint-30"
    assert run_repair_snapshot(str(sweep / "train-c")) == set()
    assert run_repair_snapshot(str(sweep / "train-none")) == set()


def test_live_record_restores_history_a_resume_hid():
    from ftplat.tune.live_retention import build_live_trial_record, is_history_incomplete

    seen = [{"training_iteration": 1, "step": 30, "num_evaluations": 3, "checkpoint_name": "checkpoint-30",
             METRIC: 0.7}]
    state = [{"step": 10, "epoch": 1.0, METRIC: 0.9}, {"step": 20, "epoch": 2.0, METRIC: 0.5},
             {"step": 30, "epoch": 3.0, METRIC: 0.7}]
    assert is_history_incomplete(seen) and is_history_incomplete([])
    assert not is_history_incomplete([{**seen[0], "num_evaluations": 1}])
    rec = build_live_trial_record("t1", "RUNNING", seen, state, objective_metric=METRIC, mode="max", scope="avg")
    assert [r["checkpoint_name"] for r in rec.history] == ["checkpoint-10", "checkpoint-20", "checkpoint-30"]
    assert rec.scores["avg"] == pytest.approx(0.7)
    fresh = build_live_trial_record("t2", "TERMINATED", [], None, objective_metric=METRIC, mode="max", scope="last")
    assert fresh.history == [] and fresh.scores["last"] is None


def test_gc_prunes_checkpoints_deleted_while_the_trial_ran_once_it_has_finished(sweep):
    """The sweep deletes rotated-out checkpoints of running trials, whose controllers keep
    naming them in the snapshot they write until the end; once such a trial has finished, gc
    drops them from its snapshot, or ``Result.from_path`` (and a restore) would refuse the run."""
    policy = RetentionPolicy(2)
    run_gc_plan(read_gc_plan(str(sweep), policy, greater_is_better=True, delete_running=True), dry_run=False)
    assert listing(sweep)["train-c"] == {"checkpoint-20", "checkpoint-30", "checkpoint-40"}
    summary = json.loads((sweep / "summary.json").read_text())
    summary["trials"][2]["status"] = "TERMINATED"
    plan = read_gc_plan(str(sweep), policy, greater_is_better=True, summary=SweepSummary.from_dict(summary))
    # checkpoint-40, never reported, goes as an orphan the snapshot does not name; checkpoint-10,
    # gone already, is what the snapshot still names
    assert [a.path.rsplit("/", 1)[1] for a in plan if "/train-c/" in a.path and a.action == DELETE] == ["checkpoint-40"]
    assert actions(plan)["train-c/" + SNAPSHOT_FILE] == PRUNE_SNAPSHOT
    run_gc_plan(plan, dry_run=False)
    result = load_with_ray(sweep / "train-c")
    assert {Path(c.path).name for c, _ in result.best_checkpoints} == {"checkpoint-20", "checkpoint-30"}


def test_live_retention_breaks_ties_by_creation_not_by_list_order(tmp_path):
    """Two trials tie. Tune's lists need not be in creation order (the experiment state saves
    trials in a set's order, so a resumed controller and ExperimentAnalysis can swap trials
    created together), while the summary's winner is the earlier-created of equal scores: the
    live policy must rank the same way, or it deletes the winner's latest before the end."""
    from ray.tune.experiment import Trial

    from ftplat.tune.live_retention import LiveRetentionCallback

    root = tmp_path / "sweep"
    rows = [{**r, "training_iteration": i + 1, "num_evaluations": i + 1}
            for i, r in enumerate(rows_for([0.5, 0.5, 0.5]))]
    for tid in ("first", "second"):
        write_ray_run(root, tid, rows)
    trials = [Trial("fn", trial_id="second", experiment_tag="2_lr=0.002", stub=True),
              Trial("fn", trial_id="first", experiment_tag="1_lr=0.002", stub=True)]
    callback = LiveRetentionCallback(
        sweep_path=str(root), policy=RetentionPolicy(1, keep_top_k_trials=1, keep_trial_latest=False),
        objective={"metric": METRIC, "mode": "max", "scope": "last"},
        metric_for_best_model=METRIC, greater_is_better=True)
    for trial in trials:
        trial.set_status(Trial.RUNNING)
        for row in rows:
            callback.on_trial_result(0, trials, trial, dict(row))
    for trial in trials:  # the later-created trial finishes first and leads for a while
        callback.on_trial_complete(0, trials, trial)
        trial.set_status(Trial.TERMINATED)
    # best is the earliest of equal values; the top-1 trial keeps its latest too
    assert listing(root) == {"train-first": {"checkpoint-10", "checkpoint-30"}, "train-second": {"checkpoint-10"}}


def add_training_state(folder: Path, *, deepspeed: bool = False) -> None:
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
        (folder / name).write_bytes(b"s" * 32)
    if deepspeed:  # ZeRO's shards: under stage 3 the only full copy of the weights
        (folder / "global_step20").mkdir()
        (folder / "global_step20" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"z" * 32)


def test_completed_trials_lose_their_optimizer_state_and_nothing_else(sweep):
    for run in ("train-a", "train-b", "train-c", "train-d"):
        for ckpt in (sweep / run).glob("checkpoint-*"):
            add_training_state(ckpt, deepspeed=(run, ckpt.name) == ("train-b", "checkpoint-20"))
    policy = RetentionPolicy(2, keep_top_k_trials=1)
    plan = read_gc_plan(str(sweep), policy, greater_is_better=True)
    strips = {"/".join(Path(a.path).parts[-2:]) for a in plan if a.action == STRIP_STATE}
    # Kept checkpoints of completed trials; not the running trial's (c), not DeepSpeed's (b/20).
    assert strips == {"train-a/checkpoint-20", "train-a/checkpoint-50", "train-b/checkpoint-30", "train-d/checkpoint-10"}
    assert format_gc_plan(plan).splitlines()[-1] == "9 keep, 5 delete, 1 defer, 2 prune-snapshot, 4 strip-state"
    assert run_gc_plan(plan, dry_run=True) == [] and (sweep / "train-a/checkpoint-20/optimizer.pt").exists()

    run_gc_plan(plan, dry_run=False)
    for path in strips:
        names = {p.name for p in (sweep / path).iterdir()}
        assert names == {"config.json", "model.safetensors", "rng_state.pth", "training_args.bin"}, path
    assert (sweep / "train-b/checkpoint-20/optimizer.pt").exists()
    assert all((c / "optimizer.pt").exists() for c in (sweep / "train-c").glob("checkpoint-*"))
    assert Path(load_with_ray(sweep / "train-a").checkpoint.path).name == "checkpoint-50"
    # Idempotent: nothing left to strip.
    again = read_gc_plan(str(sweep), policy, greater_is_better=True)
    assert STRIP_STATE not in {a.action for a in again}


def test_failed_trials_and_keep_optimizer_state_keep_the_state(sweep):
    for ckpt in sweep.glob("train-*/checkpoint-*"):
        add_training_state(ckpt)
    plan = read_gc_plan(str(sweep), RetentionPolicy(2, keep_optimizer_state=True), greater_is_better=True)
    assert STRIP_STATE not in {a.action for a in plan}
    summary = json.loads((sweep / "summary.json").read_text())
    summary["trials"][3]["status"] = "ERROR"  # d: --resume restarts it from its latest checkpoint
    (sweep / "summary.json").write_text(json.dumps(summary))
    plan = read_gc_plan(str(sweep), RetentionPolicy(2), greater_is_better=True)
    strips = {"/".join(Path(a.path).parts[-2:]) for a in plan if a.action == STRIP_STATE}
    assert strips and not any(s.startswith("train-d/") for s in strips)


def test_storage_listing_reads_each_run_once_and_keeps_empty_checkpoint_folders(sweep, monkeypatch):
    """One recursive listing per Train run gives both its checkpoint folders (an empty one,
    an upload not begun, included) and which of them hold optimizer state."""
    import pyarrow.fs as pafs

    from ftplat.checkpoints import listing as listing_mod

    (sweep / "train-a" / "checkpoint-60").mkdir()
    (sweep / "train-a" / "checkpoint-70").write_text("a file, not a checkpoint folder")
    add_training_state(sweep / "train-a" / "checkpoint-20")
    selectors = []

    class CountingFs:
        def __init__(self, fs):
            self.fs = fs

        def get_file_info(self, what):
            if isinstance(what, pafs.FileSelector):
                selectors.append(what.base_dir)
            return self.fs.get_file_info(what)

        def open_input_stream(self, path):
            return self.fs.open_input_stream(path)

    real = listing_mod.resolve_storage
    monkeypatch.setattr(listing_mod, "resolve_storage", lambda uri: (CountingFs(real(uri)[0]), real(uri)[1]))
    got = listing_mod.read_storage_listing(str(sweep))
    assert got.folders["train-a"] == ["checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40",
                                      "checkpoint-50", "checkpoint-60"]
    assert got.strippable["train-a"] == {"checkpoint-20"}
    assert got.folders["train-c"][-1] == "checkpoint-40"
    runs = sorted(got.folders)
    # The sweep folder once, then each run once.
    assert sorted(selectors) == sorted([str(sweep)] + [str(sweep / r) for r in runs])


def test_a_manual_gc_brings_the_summary_up_to_what_storage_holds(sweep, tmp_path):
    """``ftplat checkpoints gc`` on a copied sweep: summary.json said the deleted best
    checkpoints existed, and kept the sweep's counts and bytes from before."""
    from ftplat.cli.checkpoints import main as gc_main

    copy = tmp_path / "copied" / "sweep"
    shutil.copytree(sweep, copy)
    summary = json.loads((copy / "summary.json").read_text())
    # recorded where the sweep ran, as a copy keeps them
    best = {"a": ("checkpoint-20", 0.9), "b": ("checkpoint-20", 0.65), "d": ("checkpoint-10", 0.55)}
    for trial in summary["trials"]:
        if trial["trial_id"] in best:
            name, value = best[trial["trial_id"]]
            trial["best_checkpoint"] = {"path": f"/ran/here/sweep/train-{trial['trial_id']}/{name}", "exists": True,
                                        "step": int(name.split("-")[1]), "epoch": 1.0, METRIC: value}
    summary["winner"]["best_checkpoint"] = summary["trials"][0]["best_checkpoint"]
    summary["retention_error"] = "OSError: S3 down"  # the sweep's final pass failed: gc is the fix
    (copy / "summary.json").write_text(json.dumps(summary))
    summary_bytes = (copy / "summary.json").stat().st_size

    assert gc_main(["gc", str(copy), "--keep-top-k-trials", "0", "--no-trial-best", "--no-trial-latest"]) == 0
    after = SweepSummary.read(str(copy))
    exists = {t.trial_id: t.best_checkpoint.exists for t in after.trials if t.best_checkpoint}
    assert exists == {"a": True, "b": False, "d": False}  # the winner's best is never deleted
    assert after.winner.best_checkpoint.exists and not (copy / "train-b" / "checkpoint-20").exists()
    assert after.checkpoint_gc["delete"] > 0 and after.retention_error is None
    # measured before the summary was rewritten: the files left, with the summary as it was
    others = sum(f.stat().st_size for f in copy.rglob("*") if f.is_file() and f.name != "summary.json")
    assert after.cost["storage_bytes"] == others + summary_bytes
    assert json.loads((sweep / "summary.json").read_text())["winner"].get("best_checkpoint") is None  # original untouched
