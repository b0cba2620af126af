"""A trial's node-local scratch folder: the Trainer's ``output_dir`` on each node it runs on.

It holds full checkpoints (optimizer state included) until Ray uploads them, so one is
several times the model's size. A trial that ends normally removes it; a trial that Tune
stops (ASHA) or that fails is killed before it can, so the sweep driver removes those (see
``ftplat.tune.scratch``), and a restarted worker removes what its killed predecessor left.

Kept free of torch and transformers: the driver's cleanup tasks import this module on every
node.
"""

from __future__ import annotations

import os
import shutil
import tempfile

SCRATCH_ROOT = "ftplat-scratch"


def build_scratch_dir(run_name: str) -> str:
    """Node-local HF output_dir, shared by the ranks of one node (like torchrun)."""
    return os.path.join(tempfile.gettempdir(), SCRATCH_ROOT, run_name)


def run_remove_scratch(run_names: list[str]) -> list[str]:
    """Remove these runs' scratch folders on this node; return the ones that were there.

    Every folder is tried; an ``OSError`` naming the ones that could not be removed comes last.
    """
    removed, failed = [], []
    for name in run_names:
        path = build_scratch_dir(name)
        if not os.path.lexists(path):
            continue
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass  # a rank of the same node removed it meanwhile
        except OSError as exc:
            failed.append(f"{path}: {exc}")
            continue
        removed.append(path)
    if failed:
        raise OSError("could not remove scratch folder(s): " + "; ".join(failed))
    return removed
