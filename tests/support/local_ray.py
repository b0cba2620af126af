"""The private local Ray cluster the integration tests share (see tests/integration/conftest.py)."""

from __future__ import annotations

import ray


def run_init_test_cluster() -> None:
    # address="local" always starts a new private cluster: a bare ray.init() could attach to
    # any cluster this host runs. Logical CPUs above the 2 real cores let a 2-worker trial
    # and its driver be scheduled; the OS shares the cores.
    ray.init(address="local", num_cpus=4, include_dashboard=False,
             object_store_memory=512 * 1024 * 1024, logging_level="WARNING")
