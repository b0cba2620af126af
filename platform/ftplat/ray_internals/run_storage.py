"""A Train worker's view of its run's storage: Train V2's ``StorageContext`` (reached through
``ray.train.get_context().get_storage()``, a DeveloperAPI that Ray says may change between
minor versions) and the marker file Train writes into a run's folder to prove a node sees it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

#: ``ray.train.v2._internal.constants.VALIDATE_STORAGE_MARKER_FILENAME``: written into the
#: run's storage folder when the run starts; a node that does not see it does not share the
#: storage (Ray's upload then raises Ray's own error about it).
STORAGE_MARKER_FILE = ".validate_storage_marker"


@dataclass(frozen=True)
class RunStorage:
    """Where this worker's run keeps its checkpoints."""

    #: The run's folder in the storage filesystem (a plain path for a local filesystem).
    run_dir: str
    #: The pyarrow filesystem of the storage; a checkpoint Ray manages must be on it.
    filesystem: Any
    #: The folder in storage of a checkpoint, from its name.
    checkpoint_path: Callable[[str], str]
    #: Ray's own upload (a copy) of a checkpoint folder, under a name: returns the stored checkpoint.
    copy_checkpoint: Callable[[Any, str], Any]

    def node_sees_run_dir(self) -> bool:
        """This node sees the run's folder itself (local or NFS storage shared with the driver)."""
        return os.path.exists(os.path.join(self.run_dir, STORAGE_MARKER_FILE))


def read_run_storage() -> RunStorage:
    """The storage of the Train run this worker belongs to."""
    import ray.train

    storage = ray.train.get_context().get_storage()
    return RunStorage(run_dir=storage.experiment_fs_path, filesystem=storage.storage_filesystem,
                      checkpoint_path=storage.build_checkpoint_path_from_name,
                      copy_checkpoint=storage.persist_current_checkpoint)
