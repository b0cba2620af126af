"""Rank 0's MLflow logging inside a trial: resolved TrainingArguments as params, training
loss, learning rate and every evaluation as step metrics, into the trial's child run.

HF's own ``MLflowCallback`` would start and end runs itself (ending them when training ends,
whatever Tune decides) and reads its settings from process-wide environment variables; this
callback only logs into the run the trial driver created.
"""

from __future__ import annotations

import math
import time

from transformers import TrainerCallback

from ftplat.tracking.runs import build_client, log_params


class MlflowTrialCallback(TrainerCallback):
    def __init__(self, *, tracking_uri: str, run_id: str):
        self.client = build_client(tracking_uri)
        self.run_id = run_id

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        resolved = {f"hf.{k}": v for k, v in args.to_dict().items() if not isinstance(v, (dict, list))}
        log_params(self.client, self.run_id, resolved)

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
            self.client.log_batch(self.run_id, metrics=metrics)
