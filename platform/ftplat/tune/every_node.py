"""One task on each alive node of the cluster: what only a process on a node can do (read or
delete that node's own files) is done by a zero-CPU task pinned to it."""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def build_alive_nodes() -> list[dict[str, Any]]:
    """``ray.nodes()`` entries of the nodes alive now."""
    return [node for node in ray.nodes() if node.get("Alive")]


def run_on_every_node(remote_function: Any, *args: Any) -> list[tuple[str, ray.ObjectRef]]:
    """Start ``remote_function(*args)`` once on each alive node, pinned there (never moved to
    another node if that one leaves); ``(node address, reference)`` for each."""
    started = []
    for node in build_alive_nodes():
        strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
        started.append((node["NodeManagerAddress"], remote_function.options(scheduling_strategy=strategy).remote(*args)))
    return started
