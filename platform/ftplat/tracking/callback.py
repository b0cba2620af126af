"""Rank 0's MLflow logging inside a trial: the TrainingArguments that tell trials apart as
params, training loss, learning rate and every evaluation as step metrics, into the trial's child run.

HF's own ``MLflowCallback`` would start and end runs itself (ending them when training ends,
whatever Tune decides) and reads its settings from process-wide environment variables; this
callback only logs into the run the trial driver asked for. A tracking server that fails never
stops training: the calls go through a ``TrackingGuard``, and the worker returns what was lost
in its result record (``read_tracking_errors``).

The calls run in one background thread, in order, so that the training loop never waits for
the tracking store: the run's id still being created (the trial driver starts training
without waiting for it), a server's round trips and a dead server's retries (minutes with
MLflow's defaults) all happen beside the steps. The calls themselves are made by the sweep's
``TrialRuns`` actor (``ftplat.tracking.trial_runs``), so this process never imports MLflow.
Training's end waits for what is still queued, at most ``FLUSH_TIMEOUT_S``; what has not been
sent by then counts as lost.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

from ftplat.adapters import count_parameters
from ftplat.checkpoints.sizes import build_checkpoint_bytes
from ftplat.layout import build_checkpoint_name
from ftplat.tracking.guard import TrackingGuard
from ftplat.tracking.params import build_default_training_args, build_hf_params

logger = logging.getLogger(__name__)


#: How long training's end waits for queued MLflow calls.
FLUSH_TIMEOUT_S = 60.0


class TrackingSender:
    """One daemon thread that makes a guard's calls in the order they were queued."""

    def __init__(self, guard: TrackingGuard):
        self.guard = guard
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        self.pending = 0  # queued and not yet made
        self.lock = threading.Condition()
        self.thread: threading.Thread | None = None
        #: What was lost, fixed when a flush gave up waiting (later outcomes come too late
        #: for the trial's result record).
        self.given_up: dict[str, Any] | None = None

    def send(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        with self.lock:
            if self.given_up is not None:
                self.given_up["count"] += 1
                return
            self.pending += 1
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="mlflow-sender", daemon=True)
                self.thread.start()
        self.calls.put((fn, args, kwargs))

    def _run(self) -> None:
        while True:
            fn, args, kwargs = self.calls.get()
            if self.given_up is None:
                self.guard.call(fn, *args, **kwargs)
            with self.lock:
                self.pending -= 1
                self.lock.notify_all()

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> dict[str, Any]:
        """Wait until every queued call was made, at most ``timeout_s``; then what was lost
        (``TrackingGuard.to_dict``), the calls still queued counted in."""
        with self.lock:
            if self.given_up is None and not self.lock.wait_for(lambda: self.pending == 0, timeout=timeout_s):
                lost = self.guard.to_dict()
                self.given_up = {"count": lost["count"] + self.pending,
                                 "first_error": lost["first_error"]
                                 or f"MLflow calls still queued {timeout_s:g} s after training ended"}
                logger.warning("%d MLflow call(s) %s still queued %g s after training ended; the trial goes on "
                               "without them", self.pending, self.guard.where, timeout_s)
            return dict(self.given_up) if self.given_up is not None else self.guard.to_dict()


def build_run_shape(arguments: dict[str, Any], *, world_size: int, max_steps: int | None) -> dict[str, Any]:
    """The global batch (per device x accumulation x workers) and the optimizer steps: trials of
    different worker counts or accumulation differ in these, not in any one field."""
    shape: dict[str, Any] = {}
    if "per_device_train_batch_size" in arguments:
        shape["train.global_batch_size"] = (arguments["per_device_train_batch_size"]
                                            * arguments.get("gradient_accumulation_steps", 1) * world_size)
    if max_steps:
        shape["train.optimizer_steps"] = max_steps
    return shape


class MlflowTrialCallback(TrainerCallback):
    """Rank 0's logging into its trial's run.

    ``runs``: where the calls go (``RemoteTrialRuns`` of the sweep's actor, or a ``TrialRuns``
    in-process); the run is ``run_id``, or the id that ``run_ref`` (a one-item list holding the
    trial driver's ``start_trial`` call) resolves to. When that call failed, the trial driver
    counts the loss and this callback drops its calls uncounted.
    """

    def __init__(self, *, runs: Any, run_id: str | None = None, run_ref: list | None = None,
                 searched: list[str] | tuple[str, ...] = (), flush_timeout_s: float = FLUSH_TIMEOUT_S):
        assert (run_id is None) != (run_ref is None), "give the run's id or the reference that resolves to it"
        self.runs = runs
        self.run_id = run_id
        self.run_ref = run_ref
        # The trial driver logged these under their own names (``training.learning_rate``).
        self.searched = tuple(searched)
        self.guard = TrackingGuard(f"logging into the trial's run {run_id or '(id to come)'}")
        self.sender = TrackingSender(self.guard)
        self.flush_timeout_s = flush_timeout_s

    def _resolve_run_id(self) -> str | None:
        """The run's id, waiting for the trial driver's call in the logging thread."""
        if self.run_ref is not None:
            ref, self.run_ref = self.run_ref[0], None
            try:
                self.run_id = self.runs.get(ref)
            except Exception:  # the trial driver gets the same error and counts it
                logger.debug("The trial's MLflow run was not created; rank 0 logs nothing", exc_info=True)
            else:
                self.guard.where = f"logging into the trial's run {self.run_id}"
        return self.run_id

    def _send(self, method: str, *args: Any) -> None:
        def make() -> None:
            run_id = self._resolve_run_id()
            if run_id is not None:
                self.runs.call(method, run_id, *args)

        self.sender.send(make)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        arguments = args.to_dict()
        resolved = build_hf_params(arguments, build_default_training_args(), self.searched)
        resolved.update(build_run_shape(arguments, world_size=getattr(args, "world_size", 1),
                                        max_steps=getattr(state, "max_steps", None)))
        model = kwargs.get("model")
        if model is not None:
            trainable, total = count_parameters(model)
            resolved.update({"model.trainable_parameters": trainable, "model.total_parameters": total,
                             "model.trainable_fraction": round(trainable / total, 6) if total else None})
        self._send("log_params", resolved)

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, build_checkpoint_name(state.global_step))
        if not state.is_world_process_zero or not os.path.isdir(folder):
            return
        now = int(time.time() * 1000)
        sizes = build_checkpoint_bytes(folder)
        self._send("log_metrics", [("checkpoint_bytes", float(sizes["total"]), now, state.global_step),
                                   ("checkpoint_model_bytes", float(sizes["model"]), now, state.global_step)])

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        now = int(time.time() * 1000)
        metrics = [
            (key, float(value), now, state.global_step)
            for key, value in logs.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ]
        if metrics:
            self._send("log_metrics", metrics)

    def on_train_end(self, args, state, control, **kwargs):
        self.sender.flush(self.flush_timeout_s)


def read_tracking_errors(trainer) -> dict[str, Any] | None:
    """The MLflow calls rank 0's callback lost (``TrackingGuard.to_dict``), once its queue is
    sent (or its wait timed out); None without one."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, MlflowTrialCallback):
            return callback.sender.flush(callback.flush_timeout_s)
    return None
