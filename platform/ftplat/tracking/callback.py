"""Rank 0's MLflow logging inside a trial: the TrainingArguments that tell trials apart as
params, training loss, learning rate and every evaluation as step metrics, into the trial's child run.

HF's own ``MLflowCallback`` would start and end runs itself (ending them when training ends,
whatever Tune decides) and reads its settings from process-wide environment variables; this
callback only logs into the run the trial driver created. A tracking server that fails never
stops training: the calls go through a ``TrackingGuard``, and the worker returns what was lost
in its result record (``read_tracking_errors``).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from transformers import TrainerCallback

from ftplat.adapters import count_parameters
from ftplat.checkpoints.sizes import build_checkpoint_bytes
from ftplat.layout import build_checkpoint_name
from ftplat.tracking.guard import TrackingGuard
from ftplat.tracking.params import build_default_training_args, build_hf_params
from ftplat.tracking.runs import build_client, log_params


class MlflowTrialCallback(TrainerCallback):
    def __init__(self, *, tracking_uri: str, run_id: str, searched: list[str] | tuple[str, ...] = ()):
        self.client = build_client(tracking_uri)
        self.run_id = run_id
        # The trial driver logged these under their own names (``training.learning_rate``).
        self.searched = tuple(searched)
        self.guard = TrackingGuard(f"logging into the trial's run {run_id}")

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        resolved = build_hf_params(args.to_dict(), build_default_training_args(), self.searched)
        model = kwargs.get("model")
        if model is not None:
            trainable, total = count_parameters(model)
            resolved.update({"model.trainable_parameters": trainable, "model.total_parameters": total,
                             "model.trainable_fraction": round(trainable / total, 6) if total else None})
        self.guard.call(log_params, self.client, self.run_id, resolved)

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, build_checkpoint_name(state.global_step))
        if not state.is_world_process_zero or not os.path.isdir(folder):
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        sizes = build_checkpoint_bytes(folder)
        metrics = [Metric("checkpoint_bytes", float(sizes["total"]), now, state.global_step),
                   Metric("checkpoint_model_bytes", float(sizes["model"]), now, state.global_step)]
        self.guard.call(self.client.log_batch, self.run_id, metrics=metrics)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(key, float(value), now, state.global_step)
            for key, value in logs.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ]
        if metrics:
            self.guard.call(self.client.log_batch, self.run_id, metrics=metrics)


def read_tracking_errors(trainer) -> dict[str, Any] | None:
    """The MLflow calls rank 0's callback lost (``TrackingGuard.to_dict``); None without one."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, MlflowTrialCallback):
            return callback.guard.to_dict()
    return None
