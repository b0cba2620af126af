"""MLflow calls that degrade instead of failing the sweep.

The sweep's own record is ``summary.json`` and the checkpoints; MLflow is a view of it. A
tracking server that goes away mid-sweep must not stop training, so every process that talks
to MLflow (the sweep driver closing the sweep, a trial driver, rank 0 of a trial) makes its
calls through one ``TrackingGuard``. The first failed call is logged once, and that process
makes no more calls: MLflow has already spent its own retries on it
(``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, about four minutes by default), and paying them again on
every logging step would stall training. Every call that failed or was skipped is counted;
a trial's count travels in ``trial_result.json`` into ``summary.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from ftplat.tracking.runs import format_error

logger = logging.getLogger(__name__)
T = TypeVar("T")


class TrackingGuard:
    """Calls into MLflow for one process: the first failure stops the calls, none raises."""

    def __init__(self, where: str, *, quiet: bool = False):
        self.where = where
        self.quiet = quiet  # the caller reports the failure itself
        self.count = 0
        self.first_error: str | None = None
        self.stopped = False

    @property
    def failed(self) -> bool:
        return self.count > 0

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
        """``fn(*args, **kwargs)``; None when it fails or, after a failure, is skipped."""
        if self.stopped:
            self.count += 1
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # MLflow, requests and storage raise many types
            self.count += 1
            self.stopped = True
            error = format_error(exc)
            self.first_error = self.first_error or error
            logger.debug("MLflow call failed %s", self.where, exc_info=True)
            if not self.quiet:
                logger.warning("MLflow tracking failed %s (%s); no more MLflow calls from here, training goes on",
                               self.where, error)
            return None

    def add(self, other: dict[str, Any] | None) -> None:
        """Fold in what another process lost (its ``to_dict``); this process's calls go on."""
        if other and other.get("count"):
            self.count += int(other["count"])
            self.first_error = self.first_error or other.get("first_error") or "unknown error"

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first_error": self.first_error}
