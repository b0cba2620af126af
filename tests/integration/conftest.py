"""A real local Ray cluster for the integration tests, started once and stopped by us."""

from __future__ import annotations

import pytest
import ray
from local_ray import run_init_test_cluster


@pytest.fixture(scope="session")
def ray_cluster():
    started = not ray.is_initialized()
    if started:
        run_init_test_cluster()
    yield
    if started:
        ray.shutdown()
