"""Train's reports to the trial's Tune session over a loopback connection, not a queue actor.

Ray's ``TuneReportCallback`` hands each report from the trial's Train controller to its Tune
session through a ``_QueueActor``: one more Ray process per trial, started while the
controller and the worker start, and asked by the driver's session every 0.2 s for the whole
trial (each poll that times out shows as a failed task on the dashboard; every wake-up takes
a core from training). Train pins the controller to the driver's node, so a loopback
connection carries the same reports, in the same order, with no process and no polling.

The driver's :class:`ReportChannel` listens; the controller's :class:`ChannelReportCallback`
connects at its first report and waits for each report's receipt, so every report is in the
driver's hands before ``fit()`` returns.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Callable

from ray.train.v2.api.callback import UserCallback
from ray.tune.integration.ray_train import CHECKPOINT_PATH_KEY

_REPORT, _DONE = "report", "done"


class ChannelReportCallback(UserCallback):
    """The controller's end: rank 0's metrics of each report (with its checkpoint's path,
    as ``TuneReportCallback`` gives them) sent to the trial driver."""

    def __init__(self, address: tuple[str, int], authkey: bytes):
        self.address, self.authkey = address, authkey
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"address": self.address, "authkey": self.authkey}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["address"], state["authkey"])

    def after_report(self, run_context, metrics: list[dict[str, Any]], checkpoint) -> None:
        sent = dict(metrics[0])
        if checkpoint:
            sent[CHECKPOINT_PATH_KEY] = checkpoint.path
        with self._lock:
            if self._conn is None:
                try:
                    self._conn = Client(self.address, authkey=self.authkey)
                except OSError as e:
                    raise RuntimeError(
                        f"The Train controller cannot reach its trial driver's report channel at "
                        f"{self.address[0]}:{self.address[1]} ({e}); the controller must run on the "
                        "driver's node, as Ray Train 2.60 places it") from e
            self._conn.send(sent)
            # The receipt: fit() cannot return before the driver holds this report.
            receipt = self._conn.recv()
            assert receipt is True, receipt


class ReportChannel:
    """The trial driver's end; ``run_fit`` runs ``trainer.fit()`` and hands each report to
    ``report`` (Tune's) in the calling thread, in the order the controller made them."""

    def __init__(self) -> None:
        self._authkey = os.urandom(32)
        self._listener = Listener(("127.0.0.1", 0), authkey=self._authkey)
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._closing = threading.Event()

    def build_callback(self) -> ChannelReportCallback:
        return ChannelReportCallback(self._listener.address, self._authkey)

    def run_fit(self, trainer, report: Callable[[dict[str, Any]], None]):
        """``trainer.fit()``'s result, or its exception raised here, once every report the
        run made has been passed to ``report``."""
        threading.Thread(target=self._read, name="ftplat-train-reports", daemon=True).start()
        threading.Thread(target=self._fit, args=(trainer,), name="ftplat-train-fit", daemon=True).start()
        try:
            while True:
                kind, value = self._events.get()
                if kind == _DONE:
                    break
                report(value)
        finally:
            self._close()
        if isinstance(value, BaseException):
            raise value
        return value

    def _fit(self, trainer) -> None:
        try:
            outcome = trainer.fit()
        except BaseException as e:  # re-raised in run_fit's thread, where Tune expects it
            outcome = e
        self._events.put((_DONE, outcome))

    def _read(self) -> None:
        while not self._closing.is_set():
            try:
                conn = self._listener.accept()
            except Exception:  # the listener closed, the wake-up below, or a peer without the key
                if self._closing.is_set():
                    return
                continue
            with conn:
                while True:
                    try:
                        metrics = conn.recv()
                    except (EOFError, OSError):
                        break
                    self._events.put((_REPORT, metrics))
                    conn.send(True)

    def _close(self) -> None:
        self._closing.set()
        # accept() does not return when another thread closes the socket: wake it with a bare
        # connection (no handshake, so this never waits for the reader).
        try:
            socket.create_connection(self._listener.address, timeout=1.0).close()
        except OSError:
            pass
        self._listener.close()
