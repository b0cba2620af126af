"""The winner's test score: its best checkpoint evaluated once on the test split, after the
sweep, so the split that selected it and the one that scores it are never the same."""

from __future__ import annotations

import logging
from typing import Any

import ray

from ftplat.config.loading import build_trial_job
from ftplat.config.schema import JobConfig
from ftplat.records import EVAL_TIMING_KEYS, SweepSummary, Winner, clean_value
from ftplat.runtime import build_worker_need, build_worker_slots, read_alive_node_resources

logger = logging.getLogger(__name__)


def build_test_skip_reason(job: JobConfig, summary: SweepSummary, stats: dict[str, Any]) -> str | None:
    """Why no test score can be taken, or None when one can."""
    data = job.data
    if data.test_split is None:
        return "data.test_split is null"
    if data.test_split in (data.eval_split, data.validation.split):
        return (f"trials were selected on {data.test_split!r} itself, so its score is the selection score "
                "(the IMDB recipe; leave data.eval_split unset to select on a validation split)")
    if "test" not in stats:
        return f"the data has no split {data.test_split!r}"
    winner = summary.winner
    if winner is None or winner.best_checkpoint is None:
        return "no winner with a checkpoint"
    if not winner.best_checkpoint.exists:
        return f"the winner's best checkpoint {winner.best_checkpoint.path} is gone"
    return None


def build_test_score_cpus(job: JobConfig, nodes: list[dict[str, float]]) -> int:
    """CPUs (and torch threads) of the scoring task. The sweep's trials have finished, so it
    takes what their workers held at once (packed one-thread trials score with all their
    threads, not one), never fewer than one worker's. A task cannot span nodes: at most the
    CPUs of the largest of ``nodes`` (each node's total resources) that holds one worker, so a
    GPU task on a cluster of CPU and GPU nodes asks only what a GPU node has."""
    res = job.resources
    worker = build_worker_need(res)
    node_cpus = max((n.get("CPU", 0.0) for n in nodes if build_worker_slots(n, worker) >= 1), default=0.0)
    held = res.max_concurrent_trials * res.num_workers * res.cpus_per_worker
    return max(1, int(res.cpus_per_worker), int(min(held, node_cpus)))


def build_test_score_request(job: JobConfig, winner: Winner, data_ref: ray.ObjectRef,
                             cpus: int) -> dict[str, Any]:
    """What the scoring task gets (plain data): the winner's own job (its searched values
    applied: a searched ``task.mlm_probability`` or label smoothing changes the test loss),
    its best checkpoint, the tables and the task's CPUs."""
    return {"job": build_trial_job(job.model_dump(), winner.hyperparameters),
            "checkpoint": winner.best_checkpoint.path, "data_ref": [data_ref], "threads": cpus}


def run_test_score(job: JobConfig, summary: SweepSummary, data_ref: ray.ObjectRef,
                   stats: dict[str, Any]) -> dict[str, Any]:
    """The summary's ``test`` record: the winner's best checkpoint scored on the test split
    in a Ray task (one worker's GPUs, the finished trials' CPUs), or why not (``skipped``)."""
    from ftplat.train.checkpoint_score import run_score_checkpoint  # imports torch (seconds)

    reason = build_test_skip_reason(job, summary, stats)
    if reason:
        logger.info("No test score: %s", reason)
        return {"skipped": reason}
    winner = summary.winner
    res = job.resources
    cpus = build_test_score_cpus(job, read_alive_node_resources())
    task = ray.remote(run_score_checkpoint).options(
        num_cpus=cpus, num_gpus=res.gpus_per_worker if res.use_gpu else 0, max_retries=0)
    logger.info("Scoring the winner (trial %s) on the test split %r (%d rows, %d CPUs)", winner.trial_id,
                stats["test"]["split"], stats["test"]["rows"], cpus)
    metrics = ray.get(task.remote(build_test_score_request(job, winner, data_ref, cpus)))
    return {"split": stats["test"]["split"], "rows": stats["test"]["rows"], "trial_id": winner.trial_id,
            "checkpoint": winner.best_checkpoint.path,
            "metrics": {k: clean_value(v) for k, v in metrics.items()
                        if k.startswith("test_") and f"eval_{k[5:]}" not in EVAL_TIMING_KEYS}}
