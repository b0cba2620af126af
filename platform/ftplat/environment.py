"""The process's environment: variables set for one block only, and the CPUs it may use."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def scoped_environ(values: Mapping[str, str], *, keep_set: bool = False) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the block and put every key back as it was after
    (removed when it was unset). With ``keep_set`` a variable already set keeps its value."""
    saved = {key: os.environ.get(key) for key in values}
    for key, value in values.items():
        if not (keep_set and key in os.environ):
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def read_cgroup_cpu_limit() -> float | None:
    """The container's CPU quota (cgroup v2 ``cpu.max`` or v1 ``cfs_quota_us``), None if unlimited."""
    for quota_file, period_file in (("/sys/fs/cgroup/cpu.max", None),
                                    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")):
        try:
            with open(quota_file) as f:
                fields = f.read().split()
            if period_file:
                with open(period_file) as f:
                    fields.append(f.read().strip())
            quota, period = fields[0], float(fields[1])
            if quota in ("max", "-1") or period <= 0:
                return None
            return float(quota) / period
        except (OSError, ValueError, IndexError):
            continue
    return None


def read_machine_cpus() -> int:
    """CPUs this process can run on: the CPU affinity mask (a ``taskset`` or a cpuset), capped
    by a container's CPU quota. ``os.cpu_count()`` counts the whole host's logical CPUs."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity mask
        cpus = os.cpu_count() or 1
    quota = read_cgroup_cpu_limit()
    return max(1, min(cpus, math.ceil(quota))) if quota else cpus
