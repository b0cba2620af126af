"""Removing the placement groups of trials whose Train controller died, from the sweep driver.

A Train run's controller creates the placement group of its workers and removes it when the run
ends; ftplat runs it in the trial's driver (``build_lean_trainer_class``). When Tune stops a
trial (ASHA) or a trial fails, Tune kills the trial's driver, the controller dies with it, and
the group stays: Ray frees a group an actor created only
when its job ends too, which for a sweep is its end. Until then its CPUs and GPUs are lost to
the next trials. Train's answer is a detached cleaner actor per run; ftplat's trial drivers
leave it out (``build_lean_trainer_class``) and this Tune callback does the same job for all
trials from the sweep driver: every second it asks the GCS for this job's Train groups whose
controller is dead and removes them (which also ends a worker still running in one). At the
end of the sweep it waits for the controllers of the last stopped trials to die, so the
winner's test score never waits for resources a dead trial holds.
Failures are logged and never stop the sweep.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import ray
from ray.tune import Callback
from ray.util.placement_group import PlacementGroup, remove_placement_group

from ftplat.ray_internals import read_orphaned_train_placement_groups

logger = logging.getLogger(__name__)

#: Seconds between two looks at the GCS table (Train's own cleaner looks every second).
INTERVAL_S = 1.0
#: Seconds the sweep's end waits for the controllers of stopped trials to die.
END_WAIT_S = 30.0


def run_remove_orphaned_groups(job_id: str) -> int:
    """Remove the job's Train placement groups whose controller is dead; return how many
    of its Train groups still have a live controller."""
    orphaned, live = read_orphaned_train_placement_groups(job_id)
    for pg_id in orphaned:
        remove_placement_group(PlacementGroup(ray.PlacementGroupID.from_hex(pg_id)))
        logger.info("Removed placement group %s, left behind by a stopped or failed trial's Train run", pg_id)
    return live


class PlacementGroupCleanupCallback(Callback):
    """Removes the placement groups that stopped and failed trials leave behind."""

    def __init__(self, *, interval_s: float = INTERVAL_S, end_wait_s: float = END_WAIT_S):
        self.interval_s = interval_s
        self.end_wait_s = end_wait_s
        self._next = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_next": 0.0}

    def _run(self) -> int:
        try:
            return run_remove_orphaned_groups(ray.get_runtime_context().get_job_id())
        except Exception:  # a GCS hiccup: the next look tries again
            logger.warning("Could not look for placement groups left behind by trials", exc_info=True)
            return 0

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval_s
            self._run()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        # Tune has released every trial's driver by now; their controllers die moments later.
        deadline = time.monotonic() + self.end_wait_s
        while (live := self._run()) and time.monotonic() < deadline:
            time.sleep(0.2)
        if live:
            logger.warning("%d Train placement group(s) still held by a live controller %.0f s after the last "
                           "trial ended; not waiting for them", live, self.end_wait_s)
