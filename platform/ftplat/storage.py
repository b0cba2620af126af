"""Reading and writing the sweep's storage (local path, NFS mount or s3://) through pyarrow."""

from __future__ import annotations

import json
import posixpath
from typing import Any

import pyarrow.fs as pafs

from ftplat.errors import UserError


def resolve_storage(uri: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and in-filesystem path of a storage URI or local path."""
    return pafs.FileSystem.from_uri(uri)


def join_uri(base: str, *parts: str) -> str:
    return posixpath.join(base.rstrip("/"), *parts)


def path_exists(uri: str) -> bool:
    fs, path = resolve_storage(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def write_json(uri: str, payload: Any) -> None:
    fs, path = resolve_storage(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(json.dumps(payload, indent=2, sort_keys=False, default=str).encode())


def read_json(uri: str) -> Any:
    fs, path = resolve_storage(uri)
    with fs.open_input_stream(path) as src:
        return json.loads(src.read().decode())


def read_text(uri: str) -> str:
    fs, path = resolve_storage(uri)
    with fs.open_input_stream(path) as src:
        return src.read().decode("utf-8")


def list_dir_names(uri: str) -> list[str]:
    """Names of the folders directly under ``uri`` (empty when it does not exist)."""
    fs, path = resolve_storage(uri)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=False))
    return sorted(posixpath.basename(i.path) for i in infos if i.type == pafs.FileType.Directory)


def check_writable(uri: str) -> None:
    """Create ``uri`` and write then delete a probe file; ``UserError`` naming the field if not."""
    try:
        fs, path = resolve_storage(uri)
        fs.create_dir(path, recursive=True)
        probe = posixpath.join(path, ".ftplat-write-probe")
        with fs.open_output_stream(probe) as out:
            out.write(b"ok")
        fs.delete_file(probe)
    except OSError as exc:
        raise UserError(f"storage.storage_path {uri!r} is not writable: {exc}") from None
