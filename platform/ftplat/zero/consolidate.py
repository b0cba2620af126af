"""Turning a DeepSpeed ZeRO checkpoint into ordinary weights that load without DeepSpeed.

With ``stage3_gather_16bit_weights_on_model_save: true`` (the ftplat presets) the Trainer
already writes a whole ``model.safetensors`` into each checkpoint and nothing is needed. A
user's own ZeRO-3 JSON without it leaves only the partitioned ``global_step*/`` shards of
each rank; those are merged here with DeepSpeed's ``zero_to_fp32``.
"""

from __future__ import annotations

import os
import posixpath
import tempfile

import pyarrow.fs as pafs

from ftplat.storage import mask_uri_credentials, resolve_storage
from ftplat.zero.config import check_deepspeed_installed

#: DeepSpeed names the shard folder of the newest save in this file.
LATEST_TAG_FILE = "latest"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def has_whole_weights(names: list[str]) -> bool:
    return any(name in WEIGHT_FILES for name in names)


def is_zero_checkpoint(checkpoint_uri: str) -> bool:
    fs, path = resolve_storage(checkpoint_uri)
    return fs.get_file_info(posixpath.join(path, LATEST_TAG_FILE)).type == pafs.FileType.File


def run_consolidate_zero_checkpoint(checkpoint_uri: str, dest: str) -> list[str]:
    """Write the fp32 weights of a ZeRO checkpoint (local or in remote storage) to ``dest``
    as safetensors; return the names written."""
    check_deepspeed_installed(f"the ZeRO checkpoint {mask_uri_credentials(checkpoint_uri)!r}")
    from deepspeed.utils.zero_to_fp32 import convert_zero_checkpoint_to_state_dict

    fs, path = resolve_storage(checkpoint_uri)
    before = set(os.listdir(dest)) if os.path.isdir(dest) else set()
    if isinstance(fs, pafs.LocalFileSystem):
        convert_zero_checkpoint_to_state_dict(path, dest, safe_serialization=True)
    else:
        # zero_to_fp32 reads local files only; the shards come down once to a scratch folder.
        with tempfile.TemporaryDirectory() as tmp:
            pafs.copy_files(path, tmp, source_filesystem=fs, destination_filesystem=pafs.LocalFileSystem())
            convert_zero_checkpoint_to_state_dict(tmp, dest, safe_serialization=True)
    return sorted(set(os.listdir(dest)) - before)
