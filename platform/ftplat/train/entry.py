"""The function Ray Train runs on each worker, importable without torch or transformers.

Every trial's driver process must name the worker function; importing it from
``ftplat.train.worker`` would load transformers (seconds) in a process that never trains.
"""

from __future__ import annotations

import time
from typing import Any


def train_fn_per_worker(config: dict[str, Any]) -> dict[str, Any]:
    entered = time.time()  # before the imports: the trial's timeline counts them apart
    from ftplat.train.worker import run_worker

    return run_worker(config, entered=entered)
