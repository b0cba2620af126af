"""The private local Ray cluster the integration tests share (see tests/integration/conftest.py)."""

from __future__ import annotations

from ftplat.ray_internals import run_init_private_cluster


def run_init_test_cluster() -> None:
    # address="local" always starts a new private cluster: a bare ray.init() could attach to
    # any cluster this host runs. Logical CPUs above the 2 real cores let a 2-worker trial
    # and its driver be scheduled; the OS shares the cores.
    # Ray's own processes are told which cluster they are in (see run_init_private_cluster),
    # and its state API answers through this cluster's own dashboard: without one it falls
    # back to 127.0.0.1:8265, which can be another cluster's on a shared host.
    run_init_private_cluster(num_cpus=4, include_dashboard=True, dashboard_host="127.0.0.1",
                             object_store_memory=512 * 1024 * 1024, logging_level="WARNING")
