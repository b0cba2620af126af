"""Train V2's worker group and worker as ftplat's lean controller runs them.

``LeanWorkerGroup`` differs from Train's ``WorkerGroup`` in two ways:

* A group of one worker has no synchronization actor (``solo_sync``).
* Its workers are ``RayTrainWorker`` below, which say they have finished at the poll that takes
  their last report. Train's worker counts itself running while the poll it answers carries a
  report (``running = thread alive or report``), so a function that ends with a report (every
  ftplat run: the final metrics and checkpoint) is seen to end one poll later, 0.25 s at
  ftplat's poll interval, in every trial. The controller handles a poll's reports (checkpoint
  manager, Tune's report) before it asks whether the group finished, so nothing is lost: the
  same reports, in the same order, then the same end.

``test_lean_worker_group`` runs Ray's own worker, thread runner and result queue through both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

from ray.train.v2._internal.execution.worker_group import worker as _train_worker

from ftplat.ray_internals.solo_sync import run_with_solo_sync


class RayTrainWorker(_train_worker.RayTrainWorker):
    """Train's worker (same name on the dashboard and in process titles), finished at the poll
    that takes the last report of a function that has returned."""

    def poll_status(self):
        execution = _train_worker.get_train_context().execution_context
        # Read before the report is taken: once the function's thread has ended nothing can
        # put another report, so an empty queue after this poll's take is final.
        ended = not execution.training_thread_runner.is_running()
        status = super().poll_status()
        if status.running and ended and execution.result_queue.empty():
            return dataclasses.replace(status, running=False,
                                       return_value=execution.training_thread_runner.get_return_value())
        return status


@functools.cache
def build_lean_worker_group_class() -> type:
    """Train V2's ``WorkerGroup`` with ftplat's ``RayTrainWorker``, and with ``SoloSync`` in
    place of the synchronization actor when the group has one worker. (The swap is of module
    globals: one trial driver runs one Train run at a time, so no other worker group in the
    process starts or stops meanwhile.)"""
    from ray.train.v2._internal.execution.worker_group.worker_group import WorkerGroup

    class LeanWorkerGroup(WorkerGroup):
        _worker_cls = RayTrainWorker

        def _solo(self):
            solo = self._worker_group_context.num_workers == 1
            return run_with_solo_sync() if solo else contextlib.nullcontext()

        def _start(self):
            with self._solo():
                super()._start()

        def shutdown(self):
            with self._solo():
                super().shutdown()

        def abort(self):
            with self._solo():
                super().abort()

    return LeanWorkerGroup
