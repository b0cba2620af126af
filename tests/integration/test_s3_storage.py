"""The retention sweep of test_sweep.py (4 trials x 3 epochs, save_total_limit 2, keep-top-1)
with its storage on an S3 API: a moto server on 127.0.0.1, reached through pyarrow's S3
filesystem by Ray Tune, Ray Train's checkpoint uploads, and ftplat's gc and export.

pyarrow takes the endpoint and credentials from the environment (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, ...), which Ray workers inherit from the raylet, not from the driver's later
changes: so the sweep runs on the private cluster ``run_sweep`` starts with this environment,
as it does for a user, and the shared test cluster is restarted afterwards.
"""

from __future__ import annotations

import re
import sys
import time
from collections import defaultdict

import pytest
import ray
import ray.train
from local_ray import run_init_test_cluster
from local_servers import find_free_port, run_server_process
from sweep_overrides import build_tiny_overrides
from test_sweep import build_expected_hf_set

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.sweep import run_sweep

pytestmark = pytest.mark.integration

BUCKET, PREFIX, NAME = "ftplat-test", "results", "tiny-s3"
CHECKPOINT_KEY = re.compile(rf"^{PREFIX}/{NAME}/(train-[^/]+)/(checkpoint-\d+)/(.*)$")
# pyarrow (and boto3) read these; AWS_EC2_METADATA_DISABLED: no credential look-up beyond them
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """A moto S3 server on a free 127.0.0.1 port, the AWS_* environment pointing at it, and
    the bucket; the server is stopped and the environment restored at the end."""
    pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    port = find_free_port()
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with run_server_process(argv, port, log, start_timeout_s=30) as endpoint, pytest.MonkeyPatch.context() as env:
        for key, value in {"AWS_ENDPOINT_URL": endpoint, **AWS_ENV}.items():
            env.setenv(key, value)
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        yield s3


@pytest.fixture(scope="module")
def s3_sweep(s3_endpoint, tiny_model_dir, sentiment_data_dir):
    restart = ray.is_initialized()
    if restart:  # its workers do not see the AWS_* variables set above
        ray.shutdown()
    try:
        job, space = load_sweep_configs(None, None, build_tiny_overrides(
            tiny_model_dir, sentiment_data_dir, f"s3://{BUCKET}/{PREFIX}", NAME,
            "retention.keep_top_k_trials=1", "retention.keep_trial_latest=false",
            "resources.local_num_cpus=4"))
        started = time.perf_counter()
        summary = run_sweep(job, space).to_dict()
        print(f"S3 sweep: {time.perf_counter() - started:.0f} s")
    finally:
        if restart:  # without the S3 settings: later tests' workers must not inherit them
            with pytest.MonkeyPatch.context() as env:
                for key in ["AWS_ENDPOINT_URL", *AWS_ENV]:
                    env.delenv(key, raising=False)
                run_init_test_cluster()
    keys = [obj["Key"] for page in s3_endpoint.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            for obj in page.get("Contents", [])]
    return job, summary, f"s3://{BUCKET}/{PREFIX}/{NAME}", keys


def _checkpoint_files(keys: list[str]) -> dict[str, set[str]]:
    """``{"train-<id>/checkpoint-<step>": {file names}}`` of every checkpoint object in the bucket
    (a folder's own marker object, ``.../checkpoint-<step>/``, counts as the folder)."""
    folders: dict[str, set[str]] = defaultdict(set)
    for key in keys:
        match = CHECKPOINT_KEY.match(key)
        if match:
            folders[f"{match.group(1)}/{match.group(2)}"].update({match.group(3)} - {""})
    return folders


def test_s3_storage_holds_exactly_the_checkpoints_the_policy_names(s3_sweep):
    _, summary, sweep_uri, keys = s3_sweep
    assert summary["status_counts"] == {"TERMINATED": 4}
    assert summary["sweep_path"] == sweep_uri
    expected = set()
    for trial in summary["trials"]:
        assert trial["best_checkpoint"]["exists"] and trial["error"] is None
        assert trial["num_evaluations"] == 3
        # S3 gets Ray's copy of each of the three checkpoints (a hard link needs a local path)
        persisted = trial["train_result"]["checkpoint_persist"]
        assert persisted["linked"] == 0 and persisted["copied"] == 3, persisted
        assert "not a local path" in persisted["copy_reason"]
        best_name = trial["best_checkpoint"]["path"].rsplit("/", 1)[1]
        if trial["trial_id"] == summary["winner"]["trial_id"]:  # top-1 trial: its save_total_limit=2 set
            names = build_expected_hf_set(trial["history"], best_name)
        else:  # the others keep only their best (keep_trial_latest=false)
            names = [best_name]
        expected |= {f"train-{trial['trial_id']}/{name}" for name in names}
    folders = _checkpoint_files(keys)
    assert set(folders) == expected and len(expected) == 2 + 3  # of the 12 checkpoints written
    # Every kept checkpoint holds the model, with the same files as on a local disk; the trials
    # completed, so retention dropped their optimizer and scheduler state (nothing resumes them).
    for files in folders.values():
        assert files == {"config.json", "model.safetensors", "rng_state.pth",
                         "tokenizer.json", "tokenizer_config.json", "trainer_state.json", "training_args.bin"}
    # The rest of the layout is the local one: summary, config, one Train run per trial.
    top = {k.split("/", 3)[2] for k in keys if k.startswith(f"{PREFIX}/{NAME}/") and k.count("/") >= 2}
    assert {"summary.json", "sweep_config.json", "tuner.pkl"} <= top
    assert {t for t in top if t.startswith("train-")} == {f"train-{t['trial_id']}" for t in summary["trials"]}
    for trial in summary["trials"]:
        run = f"{PREFIX}/{NAME}/train-{trial['trial_id']}"
        assert {f"{run}/trial_result.json", f"{run}/checkpoint_manager_snapshot.json"} <= set(keys)
        # Ray's snapshot was pruned with the folders: the run still loads from S3
        result = ray.train.Result.from_path(f"{sweep_uri}/train-{trial['trial_id']}")
        kept = sorted(c.path.rsplit("/", 1)[1] for c, _ in result.best_checkpoints)
        assert kept == sorted(f.split("/")[1] for f in folders if f.startswith(f"train-{trial['trial_id']}/"))


def test_gc_dry_run_against_s3(s3_sweep, capsys):
    from ftplat.cli.main import main as ftplat_main

    _, _, sweep_uri, keys = s3_sweep
    capsys.readouterr()
    assert ftplat_main(["checkpoints", "gc", sweep_uri, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing deleted" in out and "0 delete" in out and "5 keep" in out
    assert f"keep  {sweep_uri}/train-" in out


def test_export_from_s3_reproduces_the_winner_accuracy(s3_sweep, tmp_path):
    from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer

    from ftplat.cli.main import main as ftplat_main
    from ftplat.data.preparation import build_tokenized_tables, build_torch_dataset
    from ftplat.data.tokenizer import build_tokenizer
    from ftplat.train.arguments import build_training_arguments
    from ftplat.tasks import build_task

    job, summary, sweep_uri, _ = s3_sweep
    out = tmp_path / "export"
    assert ftplat_main(["export", sweep_uri, str(out)]) == 0
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {p.name for p in out.iterdir()}
    assert not (out / "optimizer.pt").exists()
    tables = build_tokenized_tables(job)
    tokenizer = build_tokenizer(job.model)
    trainer = Trainer(model=AutoModelForSequenceClassification.from_pretrained(out),
                      args=build_training_arguments(job, output_dir=str(tmp_path / "eval")),
                      eval_dataset=build_torch_dataset(tables.eval), processing_class=tokenizer,
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=build_task(job).compute_metrics)
    recorded = summary["winner"]["best_checkpoint"]["eval_accuracy"]
    assert trainer.evaluate()["eval_accuracy"] == pytest.approx(recorded, abs=1e-9)


def test_sweeps_show_and_the_optuna_study_on_s3(s3_sweep, tmp_path):
    import optuna

    from ftplat.tune.status import read_sweep_status

    _, summary, sweep_uri, keys = s3_sweep
    shown = read_sweep_status(sweep_uri).to_dict()
    assert shown["status"] == "finished" and shown["trials_done"] == 4
    assert shown["leader"]["trial_id"] == summary["winner"]["trial_id"]
    assert shown["storage_bytes"] > 0

    # SQLite cannot live on S3: the driver's study was copied into the sweep folder as trials ended.
    assert f"{PREFIX}/{NAME}/optuna_study.db" in keys
    local = tmp_path / "optuna_study.db"
    import boto3

    boto3.client("s3").download_file(BUCKET, f"{PREFIX}/{NAME}/optuna_study.db", str(local))
    study = optuna.load_study(study_name=NAME, storage=f"sqlite:///{local}")
    assert len(study.trials) == 4 and all(t.state.name == "COMPLETE" for t in study.trials)
    told = sorted((t.params["training.learning_rate"], t.value) for t in study.trials)
    assert told == sorted((t["hyperparameters"]["training.learning_rate"], t["scores"][summary["scope"]])
                          for t in summary["trials"])
