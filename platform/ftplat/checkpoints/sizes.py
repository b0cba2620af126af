"""How big a checkpoint is, and how much of it is the model: the summary and MLflow report
it per trial, so a sweep shows what its checkpoints cost (a peft adapter's are megabytes)."""

from __future__ import annotations

import os

#: Checkpoint files that hold training state rather than the model (a resume needs them).
TRAINING_STATE_FILES = ("optimizer.pt", "scheduler.pt", "rng_state", "training_args.bin", "trainer_state.json")


def build_checkpoint_bytes(folder: str) -> dict[str, int]:
    """A checkpoint folder's size in bytes: ``total``, and ``model`` without the optimizer,
    scheduler and RNG state (what export and scoring use; an adapter's is megabytes)."""
    total = model = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            size = os.path.getsize(os.path.join(dirpath, name))
            total += size
            is_state = name.startswith(TRAINING_STATE_FILES) or "global_step" in dirpath  # ZeRO's shards
            model += 0 if is_state else size
    return {"total": total, "model": model}
