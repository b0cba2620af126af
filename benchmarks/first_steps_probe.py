"""Where a training run's first steps spend their time: a Python stack sampler (issue #18, GPU P1).

On the H200 a trial's first optimizer step took 2.4-2.7 s where the same plain training in a
new process took 0.6-0.8 s, while the steps after the 20th went at the same pace
(BENCHMARKS.md, "GPU: one H200 again, the trial's steps clocked"). This samples the training
thread's Python stack every few milliseconds from ``on_train_begin`` to the end of the 10th
step, and charges each interval between two samples to the innermost frames of the later one
(a C call that holds the GIL shows as one long interval, charged to the Python frames that
made the call).

``worker_context.py --probe-first-steps`` uses it in every context: the plain ones add
``StackSampler`` to their Trainer; in a trial's Ray worker, ``install`` (Ray's
``worker_process_setup_hook``) makes every Trainer the worker builds add one, and the sampler
writes its record into ``$FTPLAT_PROBE_DIR``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Sequence

from transformers import Trainer

from ftplat.train.step_time import StepTimeCallback

PROBE_DIR_ENV = "FTPLAT_PROBE_DIR"


def format_frame(frame) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}"


def build_frame_key(frame, depth: int = 4) -> str:
    """The innermost ``depth`` frames, innermost first: ``file.py:function < caller ...``; or,
    inside an import, ``import <module> < caller`` for the outermost import under way (a lazy
    import's time would otherwise spread over the frames of every module it runs)."""
    parts, importing, f = [], None, frame
    while f is not None:
        if len(parts) < depth:
            parts.append(format_frame(f))
        if f.f_code.co_name == "_find_and_load":
            importing = f
        f = f.f_back
    if importing is not None:
        caller = importing.f_back
        while caller is not None and caller.f_code.co_filename.startswith("<frozen"):
            caller = caller.f_back
        return f"import {importing.f_locals.get('name')} < {format_frame(caller) if caller else '?'}"
    return " < ".join(parts)


def build_charges(begin: float, samples: list[tuple[float, str]], top: int) -> list[list]:
    """Seconds charged to each stack (each interval to the later sample's), the largest first."""
    charged: dict[str, float] = defaultdict(float)
    previous = begin
    for t, key in samples:
        charged[key] += t - previous
        previous = t
    return [[key, round(s, 3)] for key, s in sorted(charged.items(), key=lambda kv: -kv[1])[:top]]


def build_probe_record(begin: float, samples: list[tuple[float, str]], step_ends: Sequence[float],
                       others: list[tuple[float, str]] = (), top: int = 12) -> dict:
    """The step ends (from ``begin``), the stacks the time went to in the first step and in all
    the probed ones, and what the process's other threads were doing during the first step."""
    first_end = step_ends[0] if step_ends else float("inf")
    return {"step_ends_s": [round(t - begin, 3) for t in step_ends],
            "samples": len(samples),
            "longest_gap_s": round(max((b[0] - a[0] for a, b in zip(samples, samples[1:])), default=0.0), 3),
            "first_step_stacks_s": build_charges(begin, [s for s in samples if s[0] <= first_end], top),
            "top_stacks_s": build_charges(begin, samples, top),
            "other_threads_first_step_s": build_charges(begin, [o for o in others if o[0] <= first_end], 6)}


def read_process_cpu() -> dict[int, tuple[float, str]]:
    """CPU seconds (user + system) so far of every process on this Linux host, with its name."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                name = f.read().replace(b"\0", b" ").decode(errors="replace")[:80].strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[int(pid)] = ((int(fields[11]) + int(fields[12])) / tick, name or stat.split("(", 1)[1].split(")")[0])
    return out


def build_cpu_delta(before: dict, after: dict, top: int = 6) -> list[list]:
    """The processes that used the most CPU between two ``read_process_cpu`` readings."""
    used = [(after[p][0] - before.get(p, (0.0, ""))[0], p, after[p][1]) for p in after]
    return [[f"{pid} {name}", round(sec, 2)] for sec, pid, name in sorted(used, reverse=True)[:top] if sec > 0]


class StackSampler(StepTimeCallback):
    """The worker's step clock (``begin``, ``ends``), with a stack sampler over its first steps."""

    def __init__(self, steps: int = 10, interval_s: float = 0.005):
        super().__init__()
        self.steps, self.interval_s = steps, interval_s
        self.record: dict | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        self.target = threading.get_ident()
        self.cpu_at_begin = read_process_cpu()
        self.modules_at_begin = set(sys.modules)
        self.samples: list[tuple[float, str]] = []
        self.others: list[tuple[float, str]] = []
        self.done = threading.Event()
        threading.Thread(target=self._sample, name="first-steps-probe", daemon=True).start()

    def _sample(self):
        me = threading.get_ident()
        while not self.done.wait(self.interval_s):
            frames = sys._current_frames()
            now = self.clock()
            if self.target in frames:
                self.samples.append((now, build_frame_key(frames[self.target])))
            # What the process's other threads are doing meanwhile (they share the GIL).
            others = sorted(build_frame_key(f, depth=2) for t, f in frames.items() if t not in (me, self.target))
            self.others.append((now, " | ".join(others)))

    def on_step_end(self, args, state, control, **kwargs):
        if self.done.is_set():
            return
        super().on_step_end(args, state, control, **kwargs)
        if len(self.ends) == 1:
            # Which processes on the host shared the CPUs while the first step ran.
            self.cpu_first_step = build_cpu_delta(self.cpu_at_begin, read_process_cpu())
            self.imported_first_step = sorted(set(sys.modules) - self.modules_at_begin)
        if len(self.ends) >= self.steps:
            self.done.set()
            self.record = build_probe_record(self.begin, self.samples, self.ends, self.others) | {
                "cpu_s_by_process_first_step": self.cpu_first_step,
                "modules_imported_first_step": self.imported_first_step, "pid": os.getpid()}
            folder = os.environ.get(PROBE_DIR_ENV)
            if folder:
                with open(os.path.join(folder, f"probe-{os.getpid()}.json"), "w") as f:
                    json.dump(self.record, f)


def install() -> None:
    """Ray's ``worker_process_setup_hook``: every Trainer built in this process samples its first steps."""
    original = Trainer.__init__
    if getattr(original, "first_steps_probe", False):
        return

    def init_with_probe(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.add_callback(StackSampler())

    init_with_probe.first_steps_probe = True
    Trainer.__init__ = init_with_probe
