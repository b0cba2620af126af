"""How fast a run's optimizer steps go: the time to its 10th step and its pace after the 20th.

``train_runtime`` mixes three things: the first steps (CUDA kernels loaded, the data loader
started, memory allocated), the steady steps, and the evaluations and saves between them. When
a trial trains slower than expected, these say which one grew. The steady pace comes two ways:
the median interval between step ends (evaluations and saves fall in a few intervals and do not
move it), and the mean over the span (exact on a GPU too, where the CPU runs ahead of the device
between the Trainer's loss reads, so single intervals are uneven).
"""

from __future__ import annotations

import statistics
import time
from array import array
from collections.abc import Callable, Sequence

from transformers import TrainerCallback

#: Steps before the steady pace is measured (first kernels, allocator growth, loader start).
WARM_STEPS = 20


def build_step_time(begin: float, ends: Sequence[float]) -> dict | None:
    """``steps`` (this run's), ``first_step_s`` and ``first_10_steps_s`` (from train begin to
    the 1st and the 10th step's end), ``step_ms_median`` and ``step_ms_mean`` (steps after the
    20th); None before any step."""
    if not ends:
        return None
    steady = [b - a for a, b in zip(ends[WARM_STEPS:], ends[WARM_STEPS + 1:])]
    return {
        "steps": len(ends),
        "first_step_s": round(ends[0] - begin, 3),
        "first_10_steps_s": round(ends[9] - begin, 3) if len(ends) >= 10 else None,
        "step_ms_median": round(1000 * statistics.median(steady), 2) if steady else None,
        "step_ms_mean": round(1000 * (ends[-1] - ends[WARM_STEPS]) / len(steady), 2) if steady else None,
    }


class StepTimeCallback(TrainerCallback):
    """Clocks every optimizer step's end on this process (8 bytes a step)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.begin = 0.0
        self.ends = array("d")

    def on_train_begin(self, args, state, control, **kwargs):
        self.begin, self.ends = self.clock(), array("d")

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(self.clock())

    def to_dict(self) -> dict | None:
        return build_step_time(self.begin, self.ends)
