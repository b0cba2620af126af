"""Train's reports to the trial's Tune session, handed over inside the trial driver's process.

Ray's ``TuneReportCallback`` hands each report from the trial's Train controller to its Tune
session through a ``_QueueActor``: one more Ray process per trial, started while the
controller and the worker start, and asked by the driver's session every 0.2 s for the whole
trial (each poll that times out shows as a failed task on the dashboard; every wake-up takes
a core from training). ftplat's trainers run the controller in the trial driver's process
(``build_lean_trainer_class``), so a queue between two of its threads carries the same
reports, in the same order, with no process and no polling.

``fit()`` runs in a thread of its own (the controller's event loop, whose callbacks make the
reports); :meth:`ReportChannel.run_fit` hands each report to Tune in the calling thread, where
Tune's session expects it and where Tune stops a trial (``SystemExit`` from ``report``). A
report is queued before the controller's callback returns, and the result only after
``fit()`` returns, so every report reaches Tune before the result.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from ray.train.v2.api.callback import UserCallback
from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY

_REPORT, _DONE = "report", "done"


class ChannelReportCallback(UserCallback):
    """The controller's end: rank 0's metrics of each report (with its checkpoint's path,
    as ``TuneReportCallback`` gives them) queued for the trial driver's thread."""

    def __init__(self, events: queue.SimpleQueue | None):
        self._events = events

    def __reduce__(self):
        # Train sends its run config, these callbacks included, to every worker, which never
        # reports through them: a copy in another process carries no queue.
        return ChannelReportCallback, (None,)

    def after_report(self, run_context, metrics: list[dict[str, Any]], checkpoint) -> None:
        if self._events is None:
            raise RuntimeError("ChannelReportCallback reports to a thread of the trial driver's process: the "
                               "Train controller must run there (ftplat.ray_internals.build_lean_trainer_class)")
        sent = dict(metrics[0])
        if checkpoint:
            sent[CHECKPOINT_PATH_KEY] = checkpoint.path
        self._events.put((_REPORT, sent))


class ReportChannel:
    """The trial driver's end; ``run_fit`` runs ``trainer.fit()`` and hands each report to
    ``report`` (Tune's) in the calling thread, in the order the controller made them."""

    def __init__(self) -> None:
        self._events: queue.SimpleQueue = queue.SimpleQueue()

    def build_callback(self) -> ChannelReportCallback:
        return ChannelReportCallback(self._events)

    def run_fit(self, trainer, report: Callable[[dict[str, Any]], None]):
        """``trainer.fit()``'s result, or its exception raised here, once every report the
        run made has been passed to ``report``."""
        threading.Thread(target=self._fit, args=(trainer,), name="ftplat-train-fit", daemon=True).start()
        while True:
            kind, value = self._events.get()
            if kind == _DONE:
                break
            report(value)
        if isinstance(value, BaseException):
            raise value
        return value

    def _fit(self, trainer) -> None:
        try:
            outcome = trainer.fit()
        except BaseException as e:  # re-raised in run_fit's thread, where Tune expects it
            outcome = e
        self._events.put((_DONE, outcome))
