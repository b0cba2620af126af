"""Scoring one checkpoint on the test split: the sweep's winner, once, after the sweep."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import ray
import torch

from ftplat.checkpoints.model_dir import run_write_model_dir
from ftplat.config.schema import JobConfig
from ftplat.data.preparation import TEST
from ftplat.environment import read_machine_cpus
from ftplat.tasks import build_task
from ftplat.train.progress import EvalProgressCallback
from ftplat.train.worker import build_trainer
from ftplat.zero.runtime import run_skip_unused_deepspeed_import

#: The prefix of the metrics it returns (``test_accuracy``), as HF names them.
TEST_PREFIX = "test"


def run_score_checkpoint(config: dict[str, Any]) -> dict[str, float]:
    """Evaluate the checkpoint at ``config["checkpoint"]`` (any storage; ZeRO shards are
    consolidated) on the test table, in a Ray task. ``config`` is plain data: ``job`` (a
    JobConfig dict), ``checkpoint`` (a URI) and ``data_ref`` (a one-item list holding the
    object-store reference of the sweep's tokenized tables) and ``threads`` (the task's CPUs:
    torch's threads, up to the node's cores)."""
    import transformers

    job = JobConfig.model_validate(config["job"])
    run_skip_unused_deepspeed_import()  # a ZeRO checkpoint's consolidation imports it when needed
    # A private local cluster may count more logical CPUs than the machine has cores.
    torch.set_num_threads(min(config["threads"], read_machine_cpus()))
    tables = ray.get(config["data_ref"][0])
    task = build_task(job)
    with tempfile.TemporaryDirectory(prefix="ftplat-test-score-") as tmp:
        model_dir = os.path.join(tmp, "model")
        run_write_model_dir(config["checkpoint"], model_dir, config["job"])
        model = getattr(transformers, task.auto_model).from_pretrained(model_dir)
        # Scoring needs neither ZeRO nor the search's extras: plain evaluation of whole weights.
        trainer = build_trainer(job.model_copy(update={"training": job.training.model_copy(
            update={"deepspeed": None})}), train_table=None, eval_table=tables[TEST],
            output_dir=os.path.join(tmp, "out"), model=model)
        trainer.add_callback(EvalProgressCallback(label="test score"))
        metrics = trainer.evaluate(metric_key_prefix=TEST_PREFIX)
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
