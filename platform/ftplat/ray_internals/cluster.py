"""The connected cluster's dashboard, and private local clusters that know their own address."""

from __future__ import annotations

from typing import Any

from ftplat.environment import scoped_environ


def read_dashboard_url() -> str | None:
    """The dashboard address of the connected cluster (Ray has no public accessor)."""
    from ray._private.worker import get_dashboard_url

    return get_dashboard_url()


#: ``ray._private.ray_constants.GCS_PORT_ENVIRONMENT_VARIABLE``: the port a new head's GCS binds.
GCS_PORT_ENV = "RAY_GCS_SERVER_PORT"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run_init_private_cluster(**init_kwargs: Any):
    """``ray.init(address="local", ...)`` whose own processes know which cluster they are in.

    Ray's processes look their cluster up when they call the state API without an address
    (Train V2's PlacementGroupCleaner checks that its controller is alive that way). With
    several clusters on one host the lookup finds another one, the controller seems dead, and
    the cleaner removes the placement group of a trial that is still training. The GCS port is
    chosen here and ``RAY_ADDRESS`` names it while Ray spawns its processes, which inherit it;
    this process's environment is put back afterwards.
    """
    import ray

    port = _free_port()
    address = f"{ray.util.get_node_ip_address()}:{port}"
    with scoped_environ({GCS_PORT_ENV: str(port), "RAY_ADDRESS": address}):
        return ray.init(address="local", **init_kwargs)
