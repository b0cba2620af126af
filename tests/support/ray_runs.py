"""Train runs in a fake sweep folder, written the way a real sweep writes them: checkpoint
folders with a Trainer state, and the snapshot Ray Train V2's own CheckpointManager keeps
(configured as ftplat's trial driver configures it; no cluster needed)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

METRIC = "eval_accuracy"


def write_checkpoint_files(path: Path, log_history: list[dict] | None = None, *, weights: bool = True) -> None:
    """A checkpoint folder; without ``weights``, an upload cut short (Trainer state only)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}")
    if weights:
        (path / "model.safetensors").write_bytes(b"\0" * 64)
    if log_history is not None:
        (path / "trainer_state.json").write_text(json.dumps({"log_history": log_history}))


class RayRun:
    """One trial's Train run: ``report`` writes a checkpoint and registers it with Ray's
    CheckpointManager, which rewrites the run's snapshot as the controller does."""

    def __init__(self, sweep: Path, trial_id: str, metric: str = METRIC):
        self.sweep, self.trial_id, self.metric = sweep, trial_id, metric
        self.run_dir = sweep / f"train-{trial_id}"
        self._loop = asyncio.new_event_loop()
        self._manager = self._call(self._new_manager)

    def _call(self, fn, *args):
        async def call():
            return fn(*args)

        return self._loop.run_until_complete(call())

    def _new_manager(self):
        from ray.train import CheckpointConfig
        from ray.train.v2._internal.execution.checkpoint.checkpoint_manager import CheckpointManager
        from ray.train.v2._internal.execution.storage import StorageContext

        self._storage = StorageContext(storage_path=str(self.sweep), experiment_dir_name=self.run_dir.name)
        return CheckpointManager(
            CheckpointConfig(num_to_keep=None, checkpoint_score_attribute=self.metric, checkpoint_score_order="max"),
            self._storage,
        )

    def report(self, row: dict, log_history: list[dict] | None = None) -> None:
        """Write ``row``'s checkpoint (with ``log_history`` as its Trainer state) and register it."""
        from ray.train import Checkpoint
        from ray.train.v2._internal.execution.training_report import _TrainingReport

        path = Path(self._storage.build_checkpoint_path_from_name(row["checkpoint_name"]))
        write_checkpoint_files(path, log_history)
        metrics = {**row, self.metric: math.nan if row[self.metric] is None else row[self.metric]}
        self._call(self._manager.register_checkpoint, _TrainingReport(Checkpoint(str(path)), metrics, validation=False))

    def restore(self) -> None:
        """What a restarted trial driver does: repair the snapshot, then a new controller's
        CheckpointManager loads it."""
        from ftplat.checkpoints.gc import run_repair_snapshot

        run_repair_snapshot(str(self.run_dir))
        self._manager = self._call(self._new_manager)

    def latest_registered(self) -> str | None:
        latest = self._manager.latest_checkpoint_result
        return None if latest is None else Path(latest.checkpoint.path).name


def write_ray_run(sweep: Path, trial_id: str, rows: list[dict], metric: str = METRIC) -> None:
    """A whole run at once: every row's checkpoint reported in order."""
    run = RayRun(sweep, trial_id, metric)
    for row in rows:
        run.report(row)
