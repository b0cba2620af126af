"""Connecting to Ray: the cluster in RAY_ADDRESS, or a private local one."""

from __future__ import annotations

import logging
import math
import os

import ray

from ftplat.config.schema import ResourcesConfig

logger = logging.getLogger(__name__)


def build_local_num_cpus(res: ResourcesConfig) -> int:
    """Logical CPUs for a local cluster: enough for the concurrent trials, never fewer than
    the machine has (logical CPUs are scheduling slots, the OS shares the real cores)."""
    if res.local_num_cpus is not None:
        return res.local_num_cpus
    needed = math.ceil(res.cpus_per_trial * res.max_concurrent_trials)
    return max(os.cpu_count() or 1, needed)


def run_ray_init(res: ResourcesConfig) -> bool:
    """Make sure Ray is initialised; return True when this call started it.

    ``RAY_ADDRESS`` (set by ``ray job submit`` and by users) selects an existing cluster;
    otherwise a new local cluster starts. A bare ``ray.init()`` would silently attach to
    whatever cluster this host started last, so it is never used.
    """
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ctx = ray.init(address=address, logging_level=logging.WARNING)
    else:
        ctx = ray.init(
            address="local",
            num_cpus=build_local_num_cpus(res),
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            logging_level=logging.WARNING,
        )
    if ctx.dashboard_url:
        logger.info("Ray dashboard: http://%s", ctx.dashboard_url)
    return True
