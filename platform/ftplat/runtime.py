"""Connecting to Ray: the cluster in RAY_ADDRESS, or a private local one."""

from __future__ import annotations

import logging
import math
import os

import ray

from ftplat.config.schema import ResourcesConfig
from ftplat.errors import UserError
from ftplat.ray_internals import run_init_private_cluster

logger = logging.getLogger(__name__)
# Ray keeps resources to four decimals; a sum like 0.25 + 3 x 1.25 must not miss by 1e-16.
_EPS = 1e-6


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
        ctx = run_init_private_cluster(
            num_cpus=build_local_num_cpus(res),
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            logging_level=logging.WARNING,
        )
    if ctx.dashboard_url:
        logger.info("Ray dashboard: http://%s", ctx.dashboard_url)
    return True


def build_worker_slots(node: dict[str, float], need: dict[str, float]) -> int:
    """How many copies of ``need`` (one worker's or the driver's resources) one node holds;
    ``node`` is the node's total resources, since the question is whether it can ever fit."""
    # Nothing needed (a driver with 0 CPUs) fits any number of times.
    return min((math.floor(node.get(name, 0.0) / amount + _EPS) for name, amount in need.items() if amount > 0),
               default=2**31)


def check_trial_fits_nodes(res: ResourcesConfig, nodes: list[dict[str, float]]) -> None:
    """Refuse a trial that no placement on these nodes (each node's total ``Resources``) can
    hold: Train V2 would retry the worker group forever and the sweep would never end.

    Workers are all alike and a worker never spans nodes, so the trial fits exactly when some
    node holds the trial driver and the nodes together hold ``num_workers`` workers beside it.
    """
    total = {name: sum(n.get(name, 0.0) for n in nodes) for name in ("CPU", "GPU")}
    if res.cpus_per_trial > total["CPU"] + _EPS:
        raise UserError(
            f"resources: a trial needs {res.cpus_per_trial:g} CPUs (trial_driver_cpus {res.trial_driver_cpus:g} + "
            f"num_workers {res.num_workers} x cpus_per_worker {res.cpus_per_worker:g}) but the cluster has "
            f"{total['CPU']:g}; lower num_workers or cpus_per_worker, or add nodes"
        )
    if res.use_gpu and res.num_workers * res.gpus_per_worker > total["GPU"] + _EPS:
        raise UserError(
            f"resources: a trial needs {res.num_workers * res.gpus_per_worker:g} GPUs but the cluster has "
            f"{total['GPU']:g}; set resources.use_gpu=false or add GPU nodes"
        )
    worker = {"CPU": res.cpus_per_worker, "GPU": res.gpus_per_worker if res.use_gpu else 0.0}
    largest = max(nodes, key=lambda n: (n.get("GPU", 0.0) if res.use_gpu else 0.0, n.get("CPU", 0.0)))
    shown = f"{largest.get('CPU', 0.0):g} CPUs" + (f" and {largest.get('GPU', 0.0):g} GPUs" if res.use_gpu else "")
    if not any(build_worker_slots(n, worker) for n in nodes):
        need = f"{res.cpus_per_worker:g} CPUs" + (f" and {res.gpus_per_worker:g} GPUs" if res.use_gpu else "")
        fields = "resources.cpus_per_worker" + (" / resources.gpus_per_worker" if res.use_gpu else "")
        raise UserError(
            f"{fields}: one worker needs {need} on a single node but the largest node has {shown}; "
            f"lower {fields}, or add a node that large"
        )
    driver = {"CPU": res.trial_driver_cpus}
    if not any(build_worker_slots(n, driver) for n in nodes):
        raise UserError(
            f"resources.trial_driver_cpus: the trial driver needs {res.trial_driver_cpus:g} CPUs on a single node "
            f"but the largest node has {max(n.get('CPU', 0.0) for n in nodes):g} CPUs; "
            "lower resources.trial_driver_cpus"
        )
    # The most workers any placement of the driver leaves room for.
    best = max(
        sum(build_worker_slots({**n, "CPU": n.get("CPU", 0.0) - res.trial_driver_cpus} if i == host else n, worker)
            for i, n in enumerate(nodes))
        for host, node in enumerate(nodes) if build_worker_slots(node, driver)
    )
    if best < res.num_workers:
        raise UserError(
            f"resources.num_workers: {res.num_workers} workers of {res.cpus_per_worker:g} CPUs"
            + (f" and {res.gpus_per_worker:g} GPUs" if res.use_gpu else "")
            + f" each never fit on the nodes beside the trial driver (at most {best}: a worker never spans "
            f"nodes; the largest node has {shown}); lower resources.num_workers or resources.cpus_per_worker, "
            "or add nodes"
        )
