"""DeepSpeed ZeRO inside Ray Train workers: 2-trial sweeps with 2 workers per trial under the
zero2 and zero3 presets on a real local Ray cluster (CPU, gloo), the sampled values reaching
DeepSpeed's optimizer and scheduler, the per-rank shards in Ray storage, the ZeRO-3
winner exported and reloaded without DeepSpeed, one worker alone, and a killed ZeRO-3 worker
resumed from its sharded checkpoint."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.sweep import run_sweep
from sweep_overrides import build_tiny_overrides
from worker_fault import build_checkpoint_registered, run_sweep_killing_one_worker

pytestmark = pytest.mark.integration

STEPS = 8  # 128 rows / (16 per worker x 2 workers) x 2 epochs


def build_deepspeed_overrides(model_dir, data_dir, storage, name, preset, *extra):
    return build_tiny_overrides(
        model_dir, data_dir, storage, name,
        "data.train_size=128",
        "data.eval_size=64",
        "training.num_train_epochs=2.0",
        "training.logging_steps=2",
        "training.per_device_eval_batch_size=32",
        f"training.deepspeed={preset}",
        "resources.num_workers=2",
        "resources.cpus_per_worker=0.5",
        "tracking.enabled=false",
        "search.num_samples=2",
        "search.seed=11",
        "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-3, high: 1.0e-2}",
        "search.parameters.training.warmup_steps={type: uniform, low: 0.05, high: 0.3}",
        *extra,
    )


def run_preset_sweep(preset, tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    storage = tmp_path_factory.mktemp(f"storage-{preset}")
    job, space = load_sweep_configs(
        None, None, build_deepspeed_overrides(tiny_model_dir, sentiment_data_dir, storage, preset, preset))
    return job, run_sweep(job, space).to_dict(), Path(storage) / preset


@pytest.fixture(scope="module")
def zero2_sweep(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    return run_preset_sweep("zero2", tiny_model_dir, sentiment_data_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def zero3_sweep(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    return run_preset_sweep("zero3", tiny_model_dir, sentiment_data_dir, tmp_path_factory)


@pytest.mark.parametrize("sweep_fixture, stage", [("zero2_sweep", 2), ("zero3_sweep", 3)])
def test_sampled_values_reach_deepspeeds_optimizer_and_scheduler(sweep_fixture, stage, request):
    _, summary, _ = request.getfixturevalue(sweep_fixture)
    assert summary["status_counts"] == {"TERMINATED": 2}
    assert len({t["hyperparameters"]["training.learning_rate"] for t in summary["trials"]}) == 2
    for trial in summary["trials"]:
        hp, result = trial["hyperparameters"], trial["train_result"]
        ds = result["deepspeed"]
        assert ds["zero_stage"] == stage and ds["world_size"] == 2 and result["world_size"] == 2
        assert (ds["optimizer"], ds["scheduler"]) == ("AdamW", "WarmupDecayLR")
        # The engine's own optimizer and scheduler were built with this trial's sampled values.
        assert ds["optimizer_lr"] == ds["scheduler_max_lr"] == hp["training.learning_rate"]
        assert ds["optimizer_weight_decay"] == hp["training.weight_decay"]
        assert ds["total_num_steps"] == result["global_step"] == STEPS
        # HF turns the sampled warmup fraction into steps; DeepSpeed's WarmupLR takes at least 2.
        warmup = max(1, math.ceil(STEPS * hp["training.warmup_steps"]))
        assert ds["warmup_num_steps"] == max(2, warmup)
        assert ds["config"] == {"optimizer.params.lr": hp["training.learning_rate"],
                                "optimizer.params.weight_decay": hp["training.weight_decay"],
                                "scheduler.params.warmup_num_steps": warmup,
                                "scheduler.params.total_num_steps": STEPS, "train_batch_size": 32}
        assert trial["num_evaluations"] == 2 and trial["best_checkpoint"]["exists"]


@pytest.mark.parametrize("sweep_fixture", ["zero2_sweep", "zero3_sweep"])
def test_every_ranks_shards_are_in_storage(sweep_fixture, request):
    _, summary, _ = request.getfixturevalue(sweep_fixture)
    for trial in summary["trials"]:
        best = Path(trial["best_checkpoint"]["path"])
        tag = (best / "latest").read_text().strip()
        assert tag == f"global_step{trial['best_checkpoint']['step']}"
        # Ray merged what each node's local rank 0 uploaded: both ranks' optimizer partitions.
        assert len(list((best / tag).glob("zero_pp_rank_*_optim_states.pt"))) == 2
        # The presets gather whole weights at every save (ZeRO-3 included).
        assert (best / "model.safetensors").is_file()


def test_zero3_winner_exports_and_reproduces_its_accuracy_without_deepspeed(zero3_sweep, tmp_path):
    from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer
    from transformers.integrations import is_deepspeed_zero3_enabled

    from ftplat.cli.main import main as ftplat_main
    from ftplat.data.preparation import build_tokenized_tables, build_torch_dataset
    from ftplat.data.tokenizer import build_tokenizer
    from ftplat.train.arguments import build_training_arguments
    from ftplat.tasks import build_task

    job, summary, sweep_dir = zero3_sweep
    out = tmp_path / "export"
    assert ftplat_main(["export", str(sweep_dir), str(out)]) == 0
    assert not list(out.glob("global_step*")) and not (out / "latest").exists()

    assert not is_deepspeed_zero3_enabled()
    model = AutoModelForSequenceClassification.from_pretrained(out)
    tables = build_tokenized_tables(job)
    tokenizer = build_tokenizer(job.model)
    trainer = Trainer(model=model, args=build_training_arguments(job, output_dir=str(tmp_path / "eval")),
                      eval_dataset=build_torch_dataset(tables.eval), processing_class=tokenizer,
                      data_collator=DataCollatorWithPadding(tokenizer), compute_metrics=build_task(job).compute_metrics)
    assert not trainer.is_deepspeed_enabled
    recorded = summary["winner"]["best_checkpoint"]["eval_accuracy"]
    assert trainer.evaluate()["eval_accuracy"] == pytest.approx(recorded, abs=1e-9)


def test_zero3_shards_alone_consolidate_to_the_gathered_weights(zero3_sweep, tmp_path):
    """A user's ZeRO-3 JSON without stage3_gather_16bit_weights_on_model_save leaves only the
    shards; export merges them (zero_to_fp32) into the same weights the preset gathered."""
    from transformers import AutoModelForSequenceClassification

    from ftplat.checkpoints.model_dir import run_copy_model_files

    _, summary, _ = zero3_sweep
    best = Path(summary["winner"]["best_checkpoint"]["path"])
    shards_only = tmp_path / "ckpt"
    shutil.copytree(best, shards_only)
    (shards_only / "model.safetensors").unlink()
    assert "model.safetensors" in run_copy_model_files(str(shards_only), str(tmp_path / "merged"))
    run_copy_model_files(str(best), str(tmp_path / "gathered"))
    # HF's ZeRO-3 save and zero_to_fp32 name some tensors differently (LayerNorm gamma/beta
    # vs weight/bias); from_pretrained reads both, and the loaded models must be the same.
    merged = AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged").state_dict()
    gathered = AutoModelForSequenceClassification.from_pretrained(tmp_path / "gathered").state_dict()
    assert set(merged) == set(gathered)
    for name, tensor in gathered.items():
        assert torch.equal(merged[name], tensor), name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_zero3_offload_with_bf16_on_a_gpu(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path):
    job, space = load_sweep_configs(None, None, build_deepspeed_overrides(
        tiny_model_dir, sentiment_data_dir, tmp_path, "offload", "zero3_offload", "resources.use_gpu=true",
        "resources.num_workers=1", "resources.max_concurrent_trials=1", "training.bf16=true", "search.num_samples=1"))
    summary = run_sweep(job, space).to_dict()
    assert summary["status_counts"] == {"TERMINATED": 1}
    ds = summary["trials"][0]["train_result"]["deepspeed"]
    assert ds["zero_stage"] == 3 and ds["optimizer"] == "DeepSpeedCPUAdam"


def test_one_worker_keeps_the_distributed_setup_deepspeed_needs(ray_cluster, tiny_model_dir, sentiment_data_dir,
                                                                 tmp_path):
    job, space = load_sweep_configs(None, None, build_deepspeed_overrides(
        tiny_model_dir, sentiment_data_dir, tmp_path, "one", "zero2", "resources.num_workers=1",
        "training.num_train_epochs=1.0", "search.num_samples=1"))
    summary = run_sweep(job, space).to_dict()
    assert summary["status_counts"] == {"TERMINATED": 1}
    result = summary["trials"][0]["train_result"]
    assert result["world_size"] == 1 and result["deepspeed"]["world_size"] == 1
    assert result["deepspeed"]["zero_stage"] == 2
    assert result["deepspeed"]["optimizer_lr"] == summary["trials"][0]["hyperparameters"]["training.learning_rate"]


STEPS_PER_EPOCH = 1024 // 32  # 16 per worker x 2 workers


def test_killed_zero3_worker_resumes_from_the_sharded_checkpoint(tiny_model_dir, sentiment_data_dir, tmp_path):
    """SIGKILL one of a trial's two ZeRO-3 workers after its first evaluation was reported: Ray
    Train restarts the group and every rank loads its shards from the checkpoint in storage."""
    storage = tmp_path / "storage"

    log = run_sweep_killing_one_worker(
        ["--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir), "--storage", str(storage),
         "--name", "fault", "--search-space", "search_spaces/smoke.yaml",
         "search.num_samples=1", "data.max_length=48", "data.train_size=1024", "data.eval_size=64",
         "training.num_train_epochs=2.0", "training.deepspeed=zero3", "tracking.enabled=false",
         "resources.num_workers=2", "resources.cpus_per_worker=1.0", "resources.max_failures=1",
         "resources.local_num_cpus=3"],
        tmp_path / "sweep.log", build_checkpoint_registered(storage / "fault", f"checkpoint-{STEPS_PER_EPOCH}"), num_workers=2)

    (trial,) = json.loads((storage / "fault" / "summary.json").read_text())["trials"]
    assert trial["status"] == "TERMINATED"
    assert [r["epoch"] for r in trial["history"]] == [1.0, 2.0], "no duplicated or missing epochs"
    assert trial["train_result"]["global_step"] == 2 * STEPS_PER_EPOCH
    assert trial["train_result"]["deepspeed"]["zero_stage"] == 3
    assert "[FailurePolicy] RETRY" in log
