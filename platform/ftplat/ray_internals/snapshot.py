"""Train V2's checkpoint snapshot (``checkpoint_manager_snapshot.json`` in each Train run),
read and rewritten without the folders retention deletes."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

#: ``ray.train.v2._internal.constants.CHECKPOINT_MANAGER_SNAPSHOT_FILENAME``
SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"

_SNAPSHOT_KEYS = ("checkpoint_results", "checkpoint_report_indices", "latest_checkpoint_result",
                  "pending_training_results", "pending_validation_specs")
_SNAPSHOT_NAME_LISTS = ("validated_checkpoint_dir_names", "timed_out_validation_checkpoint_dir_names",
                        "failed_validation_checkpoint_dir_names")


def _parse_snapshot(snapshot_json: str) -> dict[str, Any]:
    state = json.loads(snapshot_json)
    missing = [k for k in _SNAPSHOT_KEYS if k not in state]
    if missing or len(state["checkpoint_results"]) != len(state["checkpoint_report_indices"]):
        # Another Ray version's layout: better to stop than to write a snapshot Ray rejects.
        raise ValueError(f"unrecognised Ray checkpoint manager snapshot (missing {missing or 'consistency'})")
    return state


def select_snapshot_latest(snapshot_json: str) -> str | None:
    """The checkpoint a restore of the run resumes from: the latest one Ray registered."""
    latest = _parse_snapshot(snapshot_json)["latest_checkpoint_result"]
    return None if latest is None else latest["checkpoint_dir_name"]


def select_snapshot_names(snapshot_json: str) -> set[str]:
    """Every checkpoint folder a Ray Train V2 snapshot refers to."""
    state = _parse_snapshot(snapshot_json)
    entries = [*state["checkpoint_results"], *state["pending_training_results"]]
    if state["latest_checkpoint_result"] is not None:
        entries.append(state["latest_checkpoint_result"])
    return {entry["checkpoint_dir_name"] for entry in entries}


def build_pruned_snapshot(snapshot_json: str, kept_names: Collection[str]) -> str:
    """A Ray Train V2 ``checkpoint_manager_snapshot.json`` without the checkpoints not in
    ``kept_names``, still loadable by Ray's ``CheckpointManager._load_state``.

    The per-checkpoint lists stay parallel (results with report indices, pending results with
    validation specs). If the latest checkpoint goes, the latest becomes the surviving
    checkpoint reported last (none if nothing survives): Ray looks the latest up among the
    results, and a restore resumes from it. Everything else (``ray_version``,
    ``current_report_index``, unknown keys) is left as it was.
    """
    state = _parse_snapshot(snapshot_json)
    kept_names = set(kept_names)

    def keep(entry: dict) -> bool:
        return entry["checkpoint_dir_name"] in kept_names

    results = [(r, i) for r, i in zip(state["checkpoint_results"], state["checkpoint_report_indices"]) if keep(r)]
    state["checkpoint_results"] = [r for r, _ in results]
    state["checkpoint_report_indices"] = [i for _, i in results]
    pending = [(r, v) for r, v in zip(state["pending_training_results"], state["pending_validation_specs"]) if keep(r)]
    state["pending_training_results"] = [r for r, _ in pending]
    state["pending_validation_specs"] = [v for _, v in pending]
    for key in _SNAPSHOT_NAME_LISTS:
        if key in state:
            state[key] = [name for name in state[key] if name in kept_names]
    latest = state["latest_checkpoint_result"]
    if latest is not None and not keep(latest):
        state["latest_checkpoint_result"] = max(results, key=lambda ri: ri[1])[0] if results else None
    return json.dumps(state, separators=(",", ":"))
