"""Where one trial's wall time goes: start-up, building the Trainer, training, teardown.

The trial driver and rank 0 each note wall-clock times (``time.time()``) at a few points;
on one node they share a clock, across nodes the parts that straddle two machines carry
their clock skew (usually milliseconds under NTP). The parts are kept with the trial's
result (``train_result.json``) and summed per sweep, so a user sees what a trial costs
beyond its training, and the overhead benchmark reads them.
"""

from __future__ import annotations

from typing import Any

#: Each part: (name, from, to), the points named ``driver.*`` or ``worker.*``.
TIMELINE_PARTS = (
    # MLflow child run, config checks, snapshot repair
    ("driver_setup", "driver.started", "driver.fit_started"),
    # Train controller, worker processes, placement, process group
    ("train_startup", "driver.fit_started", "worker.entered"),
    # the worker's imports of torch, transformers and ftplat's training modules
    ("worker_imports", "worker.entered", "worker.started"),
    # data from the object store, tokenizer, model load, Trainer
    ("trainer_build", "worker.started", "worker.trainer_built"),
    # Trainer.train(): steps, evaluations, checkpoint saves and uploads
    ("train", "worker.trainer_built", "worker.trained"),
    # result record, scratch removal, barrier
    ("worker_finish", "worker.trained", "worker.returned"),
    # controller notices the end, worker group shut down
    ("train_teardown", "worker.returned", "driver.fit_ended"),
    # MLflow run ended, result written
    ("driver_finish", "driver.fit_ended", "driver.ended"),
)


def build_trial_timeline(driver_clock: dict[str, float], worker_clock: dict[str, float] | None) -> dict[str, Any]:
    """Seconds per part, and ``overhead``: the trial's wall outside ``train``.

    Parts whose points are missing (a worker that returned nothing, an older ftplat) are left
    out; ``overhead`` is given only when every part is known.
    """
    points = {f"driver.{k}": v for k, v in driver_clock.items()}
    points.update({f"worker.{k}": v for k, v in (worker_clock or {}).items()})
    parts = {name: round(points[end] - points[start], 3)
             for name, start, end in TIMELINE_PARTS if start in points and end in points}
    if len(parts) == len(TIMELINE_PARTS):
        parts["overhead"] = round(sum(v for k, v in parts.items() if k != "train"), 3)
    return parts
