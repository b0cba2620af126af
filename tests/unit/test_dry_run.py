"""``--dry-run``: the read-only checks and the printed plan, with no Ray started and nothing
written; and the warning for a GPU-sized sweep on CPUs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftplat.cli.sweep import main
from ftplat.config.loading import load_sweep_configs
from ftplat.config.schema import JobConfig
from ftplat.config.search_space import SearchSpaceConfig
from ftplat.tune.plan import (CPU_PROFILE, ParameterCount, build_checkpoints_kept, build_cpu_sweep_warning,
                              build_storage_estimate, format_storage_text, read_parameter_count)

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def list_tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_a_dry_run_prints_the_plan_starts_no_ray_and_writes_nothing(tmp_path, tiny_model_dir, sentiment_data_dir):
    """In a fresh process, as a user runs it: exit 0, the plan on stdout, and afterwards no
    storage folder, no MLflow store, no log folder, nothing new in the cwd, and no Ray session."""
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    (cwd / "keep.txt").write_text("x")
    storage = tmp_path / "storage"
    mlflow_db = tmp_path / "mlflow" / "mlflow.db"
    argv = ["--dry-run", "--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir),
            "--storage", str(storage), "--name", "planned", "search.num_samples=3", "data.train_size=64"]
    script = ("import json, sys\n"
              "from ftplat.cli.sweep import main\n"
              f"rc = main({argv!r})\n"
              "ray = sys.modules.get('ray')\n"
              "started = bool(ray is not None and ray.is_initialized())\n"
              "print('RESULT ' + json.dumps({'rc': rc, 'ray_started': started}))\n")
    env = {**os.environ, **OFFLINE, "TMPDIR": str(tmp), "MLFLOW_TRACKING_URI": f"sqlite:///{mlflow_db}"}
    env.pop("RAY_ADDRESS", None)
    before = list_tree(tmp_path)
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    result = json.loads(proc.stdout.rsplit("RESULT ", 1)[-1])
    assert result == {"rc": 0, "ray_started": False}, proc.stderr
    out = proc.stdout
    assert "# job config (resolved)" in out and f"name_or_path: {tiny_model_dir}" in out
    assert "# search space (resolved)" in out and "training.warmup_steps:" in out
    assert "trials: 3 (optuna, seed 0)" in out
    assert "scheduler: fifo" in out
    assert "each trial reserves: 1 worker(s) x 1 CPU, no GPU" in out
    assert f"storage: {storage}/planned (not created by a dry run)" in out
    # The tiny BERT's size, read from its folder: a number, not "unknown".
    assert "checkpoint storage: unknown" not in out and "trained); one checkpoint" in out
    assert "while running: 6 checkpoints" in out  # 3 trials x save_total_limit 2
    assert not storage.exists() and not mlflow_db.exists()
    assert list_tree(tmp_path) == before  # no logs in TMPDIR, nothing in the cwd


def test_a_searched_worker_count_shows_the_largest_trial(tmp_path, tiny_model_dir, capsys):
    """The plan named only the job's worker count; a [1, 2] search reserves 2 for some trials."""
    rc = main(["--dry-run", "--model", str(tiny_model_dir), "--storage", str(tmp_path / "s"),
               "resources.cpus_per_worker=0.5", "search.parameters.resources.num_workers={type: choice, values: [1, 2]}"])
    out = capsys.readouterr().out
    assert rc == 0 and "each trial reserves: 1 worker(s) x 0.5 CPU" in out
    assert ("the largest trial (resources.num_workers at their largest) reserves: 2 worker(s) x 0.5 CPU, no GPU, "
            "plus 0.25 CPU for the trial driver (1.25 CPUs a trial)") in out


def test_the_storage_estimate_follows_the_retention_settings(tmp_path, tiny_model_dir, sentiment_data_dir, capsys):
    rc = main(["--dry-run", "--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir),
               "--storage", str(tmp_path / "s"), "search.num_samples=4", "retention.keep_top_k_trials=1",
               "retention.keep_trial_latest=false", "tracking.enabled=false"])
    out = capsys.readouterr().out
    assert rc == 0
    # While running every trial keeps 2; afterwards the top trial keeps 2 and the others their best.
    assert "while running: 8 checkpoints" in out and "after retention: 5 checkpoints" in out
    assert not (tmp_path / "s").exists()


def test_an_unreadable_model_config_makes_the_estimate_unknown_with_the_reason(tmp_path, sentiment_data_dir,
                                                                               capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc = main(["--dry-run", "--model", "ftplat-tests/no-such-model", "--dataset", str(sentiment_data_dir),
               "--storage", str(tmp_path / "s"), "tracking.enabled=false"])
    out = capsys.readouterr().out
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("checkpoint storage:"))
    assert line.startswith("checkpoint storage: unknown: the config of model.name_or_path "
                           "'ftplat-tests/no-such-model' cannot be read offline")


def test_a_dry_run_refuses_bad_input_like_a_sweep(tmp_path, tiny_model_dir, capsys):
    rc = main(["--dry-run", "--model", str(tiny_model_dir), "--storage", str(tmp_path / "s"),
               "search.scheduler={type: asha, grace_period: 5}"])
    err = capsys.readouterr().err
    assert rc == 2 and "scheduler.grace_period (5) exceeds max_t (3)" in err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("override, names", [
    ("data.max_length=100000", "data.max_length is 100000, but model.name_or_path"),  # the sweep refused it, not the plan
    ("tracking.registered_model_name=team/imdb", "Names cannot contain '/' or ':'"),
])
def test_a_dry_run_refuses_what_it_can_tell_without_data_or_server(tmp_path, tiny_model_dir, capsys, override, names):
    rc = main(["--dry-run", "--model", str(tiny_model_dir), "--storage", str(tmp_path / "s"), override])
    err = capsys.readouterr().err
    assert rc == 2 and names in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "s").exists()


def test_a_dry_run_refuses_a_sweep_name_already_taken(tmp_path, tiny_model_dir, capsys):
    (tmp_path / "s" / "taken").mkdir(parents=True)
    (tmp_path / "s" / "taken" / "sweep_config.json").write_text("{}")
    rc = main(["--dry-run", "--model", str(tiny_model_dir), "--storage", str(tmp_path / "s"), "--name", "taken"])
    assert rc == 2 and "storage.sweep_name 'taken' already exists" in capsys.readouterr().err


def test_a_peft_checkpoint_is_sized_by_its_adapter(tiny_model_dir):
    job, space = load_sweep_configs(None, None, [f"model.name_or_path={tiny_model_dir}", "model.peft.r=4"])
    count = read_parameter_count(job)
    assert count.unknown is None and 0 < count.trainable < count.total
    adapter = build_storage_estimate(job, space, count)
    full = build_storage_estimate(job.model_copy(update={"model": job.model.model_copy(update={"peft": None})}),
                                  space, read_parameter_count(job.model_copy(
                                      update={"model": job.model.model_copy(update={"peft": None})})))
    assert adapter["checkpoint_bytes"] == count.trainable * 4
    assert adapter["checkpoint_bytes_with_optimizer"] == count.trainable * 12
    assert full["checkpoint_bytes"] == count.total * 4
    assert adapter["sweep_bytes_while_running"] < full["sweep_bytes_while_running"]
    # bfloat16 weights train and save whole in bfloat16; an adapter and its head in float32.
    half = job.model.model_copy(update={"dtype": "bfloat16"})
    full_half = build_storage_estimate(job.model_copy(update={"model": half.model_copy(update={"peft": None})}),
                                       space, read_parameter_count(job.model_copy(
                                           update={"model": job.model.model_copy(update={"peft": None})})))
    assert full_half["checkpoint_bytes_with_optimizer"] == count.total * 6
    assert build_storage_estimate(job.model_copy(update={"model": half}), space, count) == adapter


@pytest.mark.parametrize("limit, best_at_end, epochs, expected", [
    (2, True, 3, 2),
    (1, True, 3, 2),    # HF keeps the best beside the newest
    (1, False, 3, 2),   # without load_best_model_at_end too: HF protects the best checkpoint
    (1, False, 1, 1),   # whenever metric_for_best_model is set (ftplat always sets it)
    (5, True, 2, 2),    # never more than the evaluations a trial makes
])
def test_checkpoints_kept_per_trial(limit, best_at_end, epochs, expected):
    job = JobConfig.model_validate({"training": {"save_total_limit": limit, "load_best_model_at_end": best_at_end,
                                                 "num_train_epochs": epochs}})
    assert build_checkpoints_kept(job, SearchSpaceConfig(num_samples=3)) == (3 * expected, 3 * expected)


# --- the warning for a GPU-sized sweep on CPUs ------------------------------------------


def test_the_embedded_default_on_cpus_is_warned_about_even_offline():
    """bert-base on all of IMDB, 3 epochs, 8 trials: its sizes are known without the hub."""
    warning = build_cpu_sweep_warning(JobConfig(), SearchSpaceConfig(), ParameterCount(unknown="offline"))
    assert warning is not None
    assert CPU_PROFILE in warning and "--dry-run" in warning and "resources.use_gpu is false" in warning


def test_the_warning_suggests_the_tasks_own_cpu_recipe():
    """A masked-lm job was told to use the IMDB classification profile."""
    from ftplat.tune.plan import CPU_RECIPES

    for task, recipe in CPU_RECIPES.items():
        assert all((REPO / path).is_file() for path in recipe)
        loaded, _ = load_sweep_configs(REPO / recipe[0], REPO / recipe[1], [])
        assert loaded.task.type == task
    big = {"model": {"name_or_path": "bert-base-uncased"}, "data": {"source": "stanfordnlp/imdb"}}
    masked = JobConfig.model_validate({**big, "task": {"type": "masked-lm"}})
    warning = build_cpu_sweep_warning(masked, SearchSpaceConfig(), ParameterCount(unknown="offline"))
    assert "--config jobs/configs/masked_lm_imdb_unsup_cpu.yaml" in warning and CPU_PROFILE not in warning
    regression = JobConfig.model_validate({**big, "task": {"type": "regression"}})
    warning = build_cpu_sweep_warning(regression, SearchSpaceConfig(), ParameterCount(unknown="offline"))
    assert "shrink it (a smaller model.name_or_path" in warning and "--config" not in warning


def test_a_gpu_job_is_not_warned_about():
    job = JobConfig.model_validate({"resources": {"use_gpu": True}})
    assert build_cpu_sweep_warning(job, SearchSpaceConfig(), ParameterCount()) is None


def test_the_cpu_profile_is_not_warned_about():
    job, space = load_sweep_configs(REPO / CPU_PROFILE, REPO / "search_spaces/imdb_cpu.yaml", [])
    # all-MiniLM-L6-v2's size: 800 reviews x 128 tokens x 1 epoch x 4 trials is CPU work.
    count = ParameterCount(total=22_713_216, trainable=22_713_216)
    assert build_cpu_sweep_warning(job, space, count) is None


def test_unknown_sizes_give_no_warning():
    """A hub model not in the cache and all of an unknown dataset: nothing to base it on."""
    job = JobConfig.model_validate({"model": {"name_or_path": "someone/some-model"},
                                    "data": {"source": "someone/some-data"}})
    assert build_cpu_sweep_warning(job, SearchSpaceConfig(), ParameterCount(unknown="offline")) is None


def test_the_warning_is_one_line_and_does_not_block_the_dry_run(tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with caplog.at_level(logging.WARNING, logger="ftplat"):
        rc = main(["--dry-run", "--storage", str(tmp_path / "s")])
    assert rc == 0 and "# plan" in capsys.readouterr().out
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and CPU_PROFILE in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()


def test_a_resume_given_only_its_name_is_not_warned_about(tmp_path, caplog, monkeypatch):
    """``--resume --storage S --name N`` runs the stored configs; the warning was for the
    embedded defaults given on the command line (a GPU-sized bert-base sweep)."""
    from ftplat.tune import plan, sweep

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(plan, "check_dry_run", lambda job, space, resume: (str(tmp_path / "s" / "n"), []))
    monkeypatch.setattr(sweep, "run_sweep", lambda job, space, resume: (_ for _ in ()).throw(RuntimeError("stop")))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="ftplat"):
        assert main(["--resume", "--storage", str(tmp_path / "s"), "--name", "n"]) == 1
    assert not [r for r in caplog.records if CPU_PROFILE in r.getMessage()]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ftplat"):
        assert main(["--storage", str(tmp_path / "s"), "--name", "m"]) == 1
    assert [r for r in caplog.records if CPU_PROFILE in r.getMessage()]  # a new sweep still is


@pytest.mark.parametrize("overrides", [
    [],
    ["model.peft.r=4"],                                  # the classifier head trains beside the adapter
    ["model.trainable_patterns=[classifier]"],
    ["task.type=masked-lm"],                             # the MLM head, not the bare encoder
    ["task.type=token-classification", "model.id2label={0: O, 1: B-PER, 2: I-PER}"],
])
def test_the_plan_counts_the_model_the_workers_build(tiny_model_dir, overrides):
    """The dry run counted a bare AutoModel (no task head, no peft head): its storage estimate
    and the CPU-sweep warning were for another model."""
    from ftplat.adapters import count_parameters
    from ftplat.train.modeling import build_model

    job, _ = load_sweep_configs(None, None, [f"model.name_or_path={tiny_model_dir}", *overrides])
    trainable, total = count_parameters(build_model(job))
    count = read_parameter_count(job)
    assert count.unknown is None and count.trainable == trainable
    if job.model.peft is None:
        assert count.total == total


def test_a_searched_adapter_rank_is_sized_at_its_largest(tiny_model_dir):
    """The estimate used the job's rank; a search reaching r=16 writes checkpoints 4x r=4's."""
    from ftplat.tune.plan import read_largest_parameter_count

    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", "model.peft.r=4",
        "search.parameters.model.peft.r={type: choice, values: [4, 16]}"])
    largest = read_largest_parameter_count(job, space)
    at_16 = read_parameter_count(job.model_copy(update={"model": job.model.model_copy(
        update={"peft": job.model.peft.model_copy(update={"r": 16})})}))
    assert largest.trainable == at_16.trainable > read_parameter_count(job).trainable
    assert largest.at == "model.peft.r at the largest"
    assert "trained, with model.peft.r at the largest)" in format_storage_text(build_storage_estimate(job, space,
                                                                                                     largest))
