"""Reading and writing the sweep's storage (local path, NFS mount or s3://) through pyarrow."""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from ftplat.errors import UserError


def resolve_storage(uri: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and in-filesystem path of a storage URI or local path; a relative or
    ``~`` path is taken from the current directory or home (pyarrow refuses both)."""
    if "://" not in uri:
        uri = os.path.abspath(os.path.expanduser(uri))
    return pafs.FileSystem.from_uri(uri)


def join_uri(base: str, *parts: str) -> str:
    return posixpath.join(base.rstrip("/"), *parts)


def path_exists(uri: str) -> bool:
    fs, path = resolve_storage(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


#: pyarrow filesystems whose writes appear whole (``FileSystem.type_name``).
_OBJECT_STORES = frozenset({"s3", "gcs"})


def write_json(uri: str, payload: Any) -> None:
    """Write ``payload`` as JSON, whole or not at all (``run_write_text_atomically``)."""
    fs, path = resolve_storage(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    run_write_text_atomically(fs, path, json.dumps(payload, indent=2, sort_keys=False, default=str))


def run_write_text_atomically(fs: pafs.FileSystem, path: str, text: str) -> None:
    """Replace the file at ``path`` with ``text`` so that readers find the old file or the new
    one, never part of one.

    A file written in place and cut short (a full disk, a killed driver) is invalid JSON that
    stops every later reader. On a local or NFS path the text is written aside and moved over
    (a rename); an object store's PUT makes the object appear whole already, and its "move" is
    a copy and a delete, so there it is written directly.
    """
    if fs.type_name in _OBJECT_STORES:
        with fs.open_output_stream(path) as out:
            out.write(text.encode("utf-8"))
        return
    # Unique per write: two writers of one file must not share the file written aside.
    tmp = f"{path}.ftplat-tmp-{uuid.uuid4().hex[:12]}"
    try:
        with fs.open_output_stream(tmp) as out:
            out.write(text.encode("utf-8"))
        fs.move(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            fs.delete_file(tmp)
        raise


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


#: ``user:password@`` inside a URI (``s3://KEY:SECRET@bucket/prefix``, ``http://user:pw@host``).
URI_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def mask_uri_credentials(text: str) -> str:
    """``text`` with the credentials inside any URI in it replaced by ``***``."""
    return URI_USERINFO.sub("***@", text)


def format_storage_error(uri: str, exc: BaseException, problem: str) -> str:
    """``storage.storage_path '<uri>' <problem> (<first line of exc>)``, credentials masked."""
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    return mask_uri_credentials(f"storage.storage_path {uri!r} {problem} ({first[:300]})")


def check_storage_reachable(uri: str) -> None:
    """Refuse, without writing anything, storage that cannot hold the sweep: an unreachable
    endpoint or bucket, missing credentials, a file where a folder belongs, or a local folder
    without write permission. ``UserError`` naming ``storage.storage_path`` and the fix."""
    remote = "://" in uri and not uri.startswith("file://")
    fix = ("check the bucket, AWS_ENDPOINT_URL and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
           "AWS_DEFAULT_REGION) in this environment" if remote else "give a folder you can write to")
    try:
        fs, path = resolve_storage(uri)
        # The nearest part of the path that exists decides: it must be a folder (or a bucket)
        # that the rest can be created under.
        existing, info = path, fs.get_file_info(path)
        while info.type == pafs.FileType.NotFound and posixpath.dirname(existing.rstrip("/")) not in ("", existing):
            existing = posixpath.dirname(existing.rstrip("/"))
            info = fs.get_file_info(existing)
    except (OSError, pa.ArrowException) as exc:
        raise UserError(f"{format_storage_error(uri, exc, 'is not reachable')}; {fix}") from None
    masked = mask_uri_credentials(uri)
    if info.type == pafs.FileType.NotFound:
        raise UserError(f"storage.storage_path {masked!r}: bucket {existing!r} does not exist; create it, or "
                        "give an existing bucket")
    if info.type != pafs.FileType.Directory:
        raise UserError(f"storage.storage_path {masked!r}: {existing!r} is a file, not a folder; {fix}")
    if not remote and not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"storage.storage_path {masked!r}: no permission to write in {existing!r}; {fix}")


def check_writable(uri: str) -> None:
    """Create ``uri`` and write then delete a probe file; ``UserError`` naming the field if not."""
    try:
        fs, path = resolve_storage(uri)
        fs.create_dir(path, recursive=True)
        probe = posixpath.join(path, ".ftplat-write-probe")
        with fs.open_output_stream(probe) as out:
            out.write(b"ok")
        fs.delete_file(probe)
    except (OSError, pa.ArrowException) as exc:
        raise UserError(f"{format_storage_error(uri, exc, 'is not writable')}; give storage you can write to "
                        "(for s3://, credentials that may write to the bucket)") from None
