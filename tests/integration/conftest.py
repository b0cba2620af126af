"""A real local Ray cluster for the integration tests, started once and stopped by us."""

from __future__ import annotations

import pytest
import ray


@pytest.fixture(scope="session")
def ray_cluster():
    # address="local" always starts a new private cluster: a bare ray.init() could attach to
    # any cluster this host runs. Logical CPUs above the 2 real cores let a 2-worker trial
    # and its driver be scheduled; the OS shares the cores.
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=4, include_dashboard=False,
                 object_store_memory=512 * 1024 * 1024, logging_level="WARNING")
    yield
    if started:
        ray.shutdown()
