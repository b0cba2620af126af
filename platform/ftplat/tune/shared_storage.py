"""Whether every node of the cluster sees the sweep's local storage folder.

A local path (``/mnt/nfs/ftplat``) serves a cluster of several nodes only when it is one shared
folder (NFS) on each. Ray Train's own check cannot tell: a trial's Train controller runs in the
trial's driver, on the node of its workers, so it writes and reads its marker on one disk. A
trial on a node whose folder is its own keeps its checkpoints there, where the sweep driver's
summary, retention, test score and export never find them (the sweep "succeeds" with every
checkpoint "gone"). So before the first trial the sweep driver writes a probe holding a random
token, and a zero-CPU task pinned to each alive node reads it. Object storage (``s3://``) is
the same everywhere and is not probed; nodes that join later (an autoscaler's) are not either.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import secrets

import ray

from ftplat.errors import UserError
from ftplat.storage import resolve_storage
from ftplat.tune.every_node import build_alive_nodes, run_on_every_node

logger = logging.getLogger(__name__)

PROBE_NAME = ".ftplat-shared-storage-probe"
#: Seconds the nodes have to answer (a zero-CPU task starts a worker process on each).
ANSWER_TIMEOUT_S = 120.0


def read_probe(path: str, token: str) -> bool:
    """Whether this node sees the probe the sweep driver wrote (runs on each node)."""
    try:
        with open(path) as f:
            return f.read() == token
    except OSError:
        return False


_read_probe_on_node = ray.remote(num_cpus=0, max_retries=0)(read_probe)


def read_probe_on_nodes(path: str, token: str, *, timeout_s: float = ANSWER_TIMEOUT_S) -> list[tuple[str, bool | None]]:
    """``(node address, sees the probe)`` for each alive node; None for a node that did not
    answer within ``timeout_s``."""
    refs = run_on_every_node(_read_probe_on_node, path, token)
    done, _ = ray.wait([ref for _, ref in refs], num_returns=len(refs), timeout=timeout_s)
    done_ids = set(done)
    answers = []
    for address, ref in refs:
        try:
            answers.append((address, bool(ray.get(ref)) if ref in done_ids else None))
        except Exception:  # noqa: BLE001 - a node that left while answering: unknown, not blind
            answers.append((address, None))
    return answers


def build_unshared_storage_message(uri: str, blind: list[str], nodes: int) -> str:
    """The refusal: which nodes do not see the driver's folder, and what to give instead."""
    where = ", ".join(sorted(set(blind)))
    return (f"storage.storage_path {uri!r} is a folder of this node only: {len(blind)} of the cluster's {nodes} nodes "
            f"({where}) do not see what the sweep driver writes there, so trials placed on them would keep their "
            "checkpoints on their own disks, out of reach of the summary, retention, test scoring and export; give "
            "a folder mounted on every node (NFS) or object storage (s3://...)")


def check_storage_shared(uri: str, *, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
    """Refuse a local storage folder that some alive node of the cluster does not share
    (``UserError`` naming ``storage.storage_path``). Call after Ray is initialised and the
    folder is known writable; a one-node cluster is not probed."""
    fs, root = resolve_storage(uri)
    if fs.type_name != "local" or not ray.is_initialized():
        return
    nodes = len(build_alive_nodes())
    if nodes < 2:
        return
    token = secrets.token_hex(16)
    # A name of its own: two sweeps starting on one storage root must not read each other's.
    probe = posixpath.join(root, f"{PROBE_NAME}-{token}")
    with open(probe, "w") as f:
        f.write(token)
    try:
        answers = read_probe_on_nodes(probe, token, timeout_s=timeout_s)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(probe)
    blind = [address for address, sees in answers if sees is False]
    if blind:
        raise UserError(build_unshared_storage_message(uri, blind, nodes))
    silent = [address for address, sees in answers if sees is None]
    if silent:
        logger.warning("storage.storage_path %r: %d node(s) (%s) did not say within %.0f s whether they see it; "
                       "a trial on a node without the shared folder keeps its checkpoints out of the sweep's reach",
                       uri, len(silent), ", ".join(sorted(set(silent))), timeout_s)
