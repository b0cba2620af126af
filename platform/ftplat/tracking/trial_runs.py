"""Every trial's MLflow calls, made by one process per sweep (``TrialRuns`` as a Ray actor).

A trial's driver and its rank 0 are fresh processes. Each of them importing MLflow and opening
the tracking store cost seconds a trial on a small machine (``import mlflow`` 0.5-2 s, the
store's first client 0.9-1.8 s), and the driver's share came before ``fit()`` could start,
because rank 0 needed the run's id. The sweep's ``TrialRuns`` actor pays that once per sweep,
on the sweep driver's node (so a ``sqlite:///`` store is the same file for every trial,
whichever node it runs on):

- the trial driver asks it for the trial's child run and starts ``fit()`` at once, handing
  rank 0 the call's ``ObjectRef`` as the run id to come;
- rank 0's logging thread waits for that id before its first call, beside training;
- the trial driver ends the run through it when training is done.

The callers keep their ``TrackingGuard``: an actor call that fails raises the actor's own
exception in the caller, who counts it as before.
"""

from __future__ import annotations

from typing import Any

import ray

from ftplat.tracking.runs import build_client, find_trial_run_id, log_params, run_start_trial

#: Threads of the actor: each running trial has two callers (its driver and rank 0), and a
#: call into a slow or dead server holds its thread for as long as MLflow retries.
TRIAL_RUNS_THREADS = 32


class TrialRuns:
    """The MLflow calls of a sweep's trials, against its tracking store (``tracking``: the
    parent run's ids, as ``run_start_parent`` returns them). Plain values in, plain values
    out: the actor's callers never import MLflow."""

    def __init__(self, tracking: dict[str, str]):
        self.tracking = tracking
        # Opened now: the actor starts beside the sweep's first trial, long before its first call.
        self.client = build_client(tracking["tracking_uri"])
        #: ``(run id, metric) -> the last step logged``; runs of an earlier driver are read once.
        self.last_steps: dict[tuple[str, str], int] = {}
        self.earlier_runs: set[str] = set()

    def start_trial(self, *, trial_id: str, run_uri: str, params: dict[str, Any]) -> str:
        earlier = find_trial_run_id(run_uri) is not None  # a --resume continues a run a driver before made
        run_id = run_start_trial(self.tracking, trial_id=trial_id, run_uri=run_uri, params=params, client=self.client)
        if earlier:
            self.earlier_runs.add(run_id)
        return run_id

    def read_last_step(self, run_id: str, key: str) -> int:
        if (run_id, key) not in self.last_steps:
            history = self.client.get_metric_history(run_id, key) if run_id in self.earlier_runs else []
            self.last_steps[run_id, key] = max((m.step for m in history), default=-1)
        return self.last_steps[run_id, key]

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        log_params(self.client, run_id, params)

    def log_metrics(self, run_id: str, metrics: list[tuple[str, float, int, int]]) -> None:
        """``metrics``: ``(key, value, timestamp_ms, step)`` each. A step at or below the last
        one logged for its metric is left out: a trial restarted from an earlier checkpoint
        (a retry, a ``--resume``) trains those steps again, and MLflow plotted both attempts'
        points at each step. ``summary.json`` keeps the later attempt's evaluations."""
        from mlflow.entities import Metric

        fresh = []
        for key, value, timestamp, step in metrics:
            if step > self.read_last_step(run_id, key):
                self.last_steps[run_id, key] = step
                fresh.append(Metric(key, value, timestamp, step))
        if fresh:
            self.client.log_batch(run_id, metrics=fresh)

    def set_terminated(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The same entry point as ``RemoteTrialRuns.call``, in this process (tests, tools)."""
        return getattr(self, method)(*args, **kwargs)


class RemoteTrialRuns:
    """Blocking calls into a ``TrialRuns`` actor that raise the actor's own exception, so a
    caller's ``TrackingGuard`` reports the server's error, not Ray's wrapper of it."""

    def __init__(self, actor: ray.actor.ActorHandle):
        self.actor = actor

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.get(getattr(self.actor, method).remote(*args, **kwargs))

    @staticmethod
    def get(ref: ray.ObjectRef) -> Any:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            raise (exc.cause if isinstance(exc.cause, Exception) else exc) from None


def run_start_trial_runs_actor(tracking: dict[str, str]) -> ray.actor.ActorHandle:
    """The sweep's ``TrialRuns`` actor, on this (the sweep driver's) node; it lives until
    ``ray.kill`` or the end of the job."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    return ray.remote(TrialRuns).options(
        num_cpus=0, max_concurrency=TRIAL_RUNS_THREADS, max_restarts=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(tracking)
