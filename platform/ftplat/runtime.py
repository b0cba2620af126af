"""Connecting to Ray: the cluster in RAY_ADDRESS, or a private local one."""

from __future__ import annotations

import logging
import math
import os

import ray

from ftplat.config.schema import ResourcesConfig
from ftplat.environment import read_machine_cpus
from ftplat.errors import UserError
from ftplat.ray_internals import run_init_private_cluster

logger = logging.getLogger(__name__)
# Ray keeps resources to four decimals; a sum like 0.25 + 3 x 1.25 must not miss by 1e-16.
_EPS = 1e-6
#: What a trial driver with ``resources.trial_driver_cpus: 0`` reserves instead (Tune refuses
#: a trial that reserves nothing); about what a driver process holds (Ray, torch, MLflow).
DRIVER_MEMORY_BYTES = 512 * 2**20


def build_local_num_cpus(res: ResourcesConfig) -> int:
    """Logical CPUs for a local cluster: enough for the concurrent trials, never fewer than
    the machine has (logical CPUs are scheduling slots, the OS shares the real cores).
    ``check_trial_fits_machine`` has refused a trial whose workers the machine cannot run."""
    if res.local_num_cpus is not None:
        return res.local_num_cpus
    needed = math.ceil(res.cpus_per_trial * res.max_concurrent_trials)
    return max(read_machine_cpus(), needed)


def read_machine_gpus() -> int:
    """CUDA GPUs this process sees (``CUDA_VISIBLE_DEVICES`` applies), as Ray would detect them."""
    import torch  # seconds to import: only when a trial asks for GPUs

    return torch.cuda.device_count()


def read_private_cluster_planned() -> bool:
    """True when ``run_ray_init`` will start a private local cluster on this machine (no
    ``RAY_ADDRESS`` and Ray not yet initialised); checking never starts Ray."""
    return not os.environ.get("RAY_ADDRESS") and not ray.is_initialized()


def format_gpu_fix(fp16: bool) -> str:
    """The fix for a trial asking more GPUs than there are; float16 cannot run without them."""
    return ("set resources.use_gpu=false" + (" and training.fp16=false (float16 needs a GPU)" if fp16 else ""))


def check_trial_fits_machine(res: ResourcesConfig, *, cpus: int, gpus: int, fp16: bool = False) -> list[str]:
    """Refuse a trial that this machine cannot run on the private cluster it will start; return
    the warnings to log once every check has passed.

    Without ``resources.local_num_cpus`` the cluster is sized to what the sweep asks for, so Ray
    would place any trial and start every worker process on too few cores: the workers must
    fit the machine's CPUs. The trial driver only waits on its workers, so its fraction of a
    CPU is not counted here (the cluster gets a slot for it). An explicit
    ``resources.local_num_cpus`` oversubscribes on purpose (one warning), but a trial larger
    than it could never be placed. ``gpus`` counts only when ``resources.use_gpu`` is on.
    """
    workers = res.num_workers * res.cpus_per_worker
    warnings = []
    if res.local_num_cpus is not None and res.cpus_per_trial > res.local_num_cpus + _EPS:
        raise UserError(
            f"resources.local_num_cpus: a trial needs {res.cpus_per_trial:g} CPUs (trial_driver_cpus "
            f"{res.trial_driver_cpus:g} + num_workers {res.num_workers} x cpus_per_worker {res.cpus_per_worker:g}) "
            f"but the local cluster gets {res.local_num_cpus}, so it could never start; raise "
            f"resources.local_num_cpus to {math.ceil(res.cpus_per_trial - _EPS)}, or lower resources.num_workers "
            "or resources.cpus_per_worker"
        )
    if workers > cpus + _EPS:
        if res.local_num_cpus is None:
            raise UserError(
                f"resources.num_workers x resources.cpus_per_worker: a trial's {res.num_workers} workers x "
                f"{res.cpus_per_worker:g} CPUs need {workers:g} CPUs but this machine has {cpus}; lower "
                "resources.num_workers or resources.cpus_per_worker, run on a cluster (RAY_ADDRESS), or set "
                "resources.local_num_cpus to oversubscribe this machine on purpose"
            )
        warnings.append(
            f"resources.local_num_cpus={res.local_num_cpus}: a trial's workers use {workers:g} CPUs on a machine "
            f"with {cpus}; they share its cores and train slower than the CPU count says"
        )
    if res.use_gpu and res.num_workers * res.gpus_per_worker > gpus + _EPS:
        raise UserError(
            f"resources.use_gpu: a trial's {res.num_workers} workers need "
            f"{res.num_workers * res.gpus_per_worker:g} GPUs (resources.gpus_per_worker "
            f"{res.gpus_per_worker:g} each) but this machine has {gpus}; {format_gpu_fix(fp16)}, lower "
            "resources.num_workers, or run on a GPU cluster (RAY_ADDRESS)"
        )
    return warnings


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


def build_trial_driver_resources(res: ResourcesConfig) -> dict[str, float]:
    """What Tune reserves for a trial's driver. Its CPUs, or with ``trial_driver_cpus: 0`` only
    memory: on a cluster of packed trials every fraction of a CPU a driver takes splits a node
    (2 drivers of 0.25 on a 2-CPU node leave room for one 1-CPU worker, not two)."""
    if res.trial_driver_cpus > 0:
        return {"CPU": res.trial_driver_cpus}
    return {"CPU": 0, "memory": DRIVER_MEMORY_BYTES}


def read_alive_node_resources() -> list[dict[str, float]]:
    """Each alive node's total resources (``CPU``, ``GPU``, ...), as Ray reports them."""
    return [node["Resources"] for node in ray.nodes() if node.get("Alive")]


def build_worker_need(res: ResourcesConfig) -> dict[str, float]:
    """One worker's resources, in the terms of ``build_worker_slots``."""
    return {"CPU": res.cpus_per_worker, "GPU": res.gpus_per_worker if res.use_gpu else 0.0}


def build_worker_slots(node: dict[str, float], need: dict[str, float]) -> int:
    """How many copies of ``need`` (one worker's or the driver's resources) one node holds;
    ``node`` is the node's total resources, since the question is whether it can ever fit."""
    # Nothing needed (a driver with 0 CPUs) fits any number of times.
    return min((math.floor(node.get(name, 0.0) / amount + _EPS) for name, amount in need.items() if amount > 0),
               default=2**31)


def check_trial_fits_nodes(res: ResourcesConfig, nodes: list[dict[str, float]], *, fp16: bool = False) -> None:
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
            f"{total['GPU']:g}; {format_gpu_fix(fp16)}, or add GPU nodes"
        )
    worker = build_worker_need(res)
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
