"""Removing trials' node-local scratch folders from the sweep driver.

A trial that Tune stops (ASHA) or that fails is killed before its workers can remove their
scratch folders (full checkpoints, optimizer state included: ``ftplat.train.scratch``). This
Tune callback removes them with a zero-CPU task pinned to each alive node, since only a
process on a node can delete that node's files. A trial's folders go a little after the trial
ends: Tune calls ``on_trial_complete`` before it releases a stopped trial's actor, and the
Train workers that actor owns die only after it, so a worker could still write a checkpoint
into a folder removed at once. A trial that trained to its end removed its own folders and its
workers are gone, so only stopped and failed trials wait. Every trial of the sweep is cleaned
again when the sweep ends.
Failures are logged and never stop the sweep.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import ray
from ray.tune import Callback

from ftplat.layout import build_train_run_name, read_trial_finished
from ftplat.train.scratch import run_remove_scratch
from ftplat.tune.every_node import run_on_every_node

logger = logging.getLogger(__name__)

#: Seconds between a trial's end and the removal of its scratch folders: Ray kills the
#: workers of a released trial actor within moments; the pass at the sweep's end catches the rest.
SETTLE_S = 10.0
#: Seconds the sweep's end waits for the last removals before it logs them as unfinished.
END_WAIT_S = 120.0

_remove_on_node = ray.remote(num_cpus=0, max_retries=0)(run_remove_scratch)


def run_remove_scratch_on_nodes(run_names: list[str]) -> list[ray.ObjectRef]:
    """Start one removal task per alive node; return their references (see ``read_removals``)."""
    return [ref for _, ref in run_on_every_node(_remove_on_node, list(run_names))]


def read_removals(refs: list[ray.ObjectRef], timeout_s: float) -> list[ray.ObjectRef]:
    """Log the removals that finish within ``timeout_s``; return the ones still running."""
    if not refs:
        return []
    done, running = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    for ref in done:
        try:
            for path in ray.get(ref):
                logger.info("Removed the scratch folder %s of a stopped or failed trial", path)
        except Exception:  # a node that left, an unreadable folder: never fatal to the sweep
            logger.warning("Removing trials' scratch folders failed on a node", exc_info=True)
    return running


class ScratchCleanupCallback(Callback):
    """Removes each ended trial's scratch folders on every node, and all of them at the end.

    Tune pickles its callbacks with the experiment: the timers and task references are dropped
    from the pickle, since the pass at the end of a resumed sweep covers every trial.
    """

    def __init__(self, sweep_path: str, *, settle_s: float = SETTLE_S, end_wait_s: float = END_WAIT_S):
        self.sweep_path = sweep_path
        self.settle_s = settle_s
        self.end_wait_s = end_wait_s
        self._due: dict[str, float] = {}
        self._running: list[ray.ObjectRef] = []

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_due": {}, "_running": []}

    def _start(self, run_names: Iterable[str]) -> None:
        names = sorted(set(run_names))
        if not names:
            return
        try:
            self._running += run_remove_scratch_on_nodes(names)
        except Exception:
            logger.warning("Could not start removing the scratch folders of %s", ", ".join(names), exc_info=True)

    def _schedule(self, trial_id: str) -> None:
        self._due[build_train_run_name(trial_id)] = time.monotonic() + self.settle_s

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        # Tune calls this for a trial that returned and for one it stopped; only the latter
        # can still have a worker writing, and only its folders are left to remove.
        try:
            finished = read_trial_finished(self.sweep_path, trial.trial_id)
        except Exception:  # storage unreadable for a moment: treat it as stopped
            logger.warning("Could not read whether trial %s finished", trial.trial_id, exc_info=True)
            finished = False
        if not finished:
            self._schedule(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._schedule(trial.trial_id)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.monotonic()
        due = [name for name, at in self._due.items() if at <= now]
        for name in due:
            del self._due[name]
        self._start(due)
        self._running = read_removals(self._running, timeout_s=0)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        # A trial stopped just now (ASHA at the last trial) can still have a worker running: it
        # writes its next checkpoint into scratch until its next Ray call finds the controller
        # gone. Removing before it is killed would leave that checkpoint behind.
        wait = min(max(self._due.values(), default=0.0) - time.monotonic(), self.settle_s)
        if wait > 0:
            time.sleep(wait)
        self._due.clear()
        self._start(build_train_run_name(t.trial_id) for t in trials)
        running = read_removals(self._running, timeout_s=self.end_wait_s)
        if running:
            logger.warning("%d scratch removal task(s) still running after %.0f s; not waiting for them",
                           len(running), self.end_wait_s)
        self._running = []
