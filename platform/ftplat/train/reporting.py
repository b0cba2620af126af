"""Reporting each evaluation to Ray Train, with its checkpoint and the scope objective.

Ray's ``RayTrainReportCallback`` merges the whole log history (so eval metrics can be stale),
uploads from every rank, and knows nothing of ray_scope. This callback reports once per
evaluation with that evaluation's own metrics, puts each node's checkpoint files into storage once
(hard-linked where storage shares the scratch's filesystem, ``persist.py``),
and adds ``objective``: the trial's running score under the sweep's scope, computed from the
evaluation history the Trainer keeps in its state (so it survives a resume).
"""

from __future__ import annotations

import os
import time

import ray.train
import torch.distributed as dist
from transformers import TrainerCallback

from ftplat.checkpoints.sizes import build_checkpoint_bytes
from ftplat.records import CHECKPOINT_NAME_KEY, FINAL_EVALUATION_KEY
from ftplat.scoring import build_report_metrics
from ftplat.train.persist import CheckpointPersister


class RayScopeReportCallback(TrainerCallback):
    """Report to Ray Train after every save (the config makes every evaluation save)."""

    def __init__(self, *, metric: str, mode: str, scope: str, local_rank: int):
        self.metric, self.mode, self.scope = metric, mode, scope
        self.local_rank = local_rank
        #: Sizes of the latest checkpoint this node saved (``build_checkpoint_bytes``).
        self.checkpoint_bytes: dict[str, int] | None = None
        #: Seconds spent in ``ray.train.report`` (the checkpoint copy to storage, and waiting
        #: for the other ranks): time the training loop stands still.
        self.report_seconds = 0.0
        self.saves = 0
        #: Links each checkpoint into storage where storage shares the scratch's filesystem.
        self.persister = CheckpointPersister()

    def on_save(self, args, state, control, **kwargs):
        self.saves += 1
        metrics = build_report_metrics(
            state.log_history, metric=self.metric, mode=self.mode, scope=self.scope, step=state.global_step
        )
        metrics[FINAL_EVALUATION_KEY] = state.global_step >= state.max_steps
        name = metrics[CHECKPOINT_NAME_KEY]
        if dist.is_available() and dist.is_initialized():
            # Every rank has written its part of the checkpoint (rng state, ZeRO shards)
            # before any node uploads its folder.
            dist.barrier()
        checkpoint = None
        local_dir = os.path.join(args.output_dir, name)
        # One upload per node: the node's ranks share output_dir, and Ray merges the
        # per-node folders into one checkpoint in storage.
        if self.local_rank == 0 and os.path.isdir(local_dir):
            checkpoint = ray.train.Checkpoint.from_directory(local_dir)
            self.checkpoint_bytes = build_checkpoint_bytes(local_dir)
        started = time.perf_counter()
        ray.train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name=name, checkpoint_upload_fn=self.persister)
        self.report_seconds += time.perf_counter() - started

    def on_train_end(self, args, state, control, **kwargs):
        # A run restored from its trial's last checkpoint (the sweep was stopped after that
        # report, before the trial ended) trains no step and saves nothing. Tune restored the
        # trial without its results, so the last evaluation is reported again, without its
        # checkpoint (already in storage): the trial ends with its score, and its history,
        # which keeps one row per step, is unchanged. Every rank gets here (report is a barrier).
        evals = [e for e in state.log_history if self.metric in e]
        if self.saves == 0 and evals:
            step = evals[-1].get("step", state.global_step)
            ray.train.report({**build_report_metrics(state.log_history, metric=self.metric, mode=self.mode,
                                                     scope=self.scope, step=step), FINAL_EVALUATION_KEY: True})
