"""``ftplat sweeps list [STORAGE]`` and ``ftplat sweeps show SWEEP``: how far sweeps are, read
from storage alone (no Ray connection), as text or ``--json``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from ftplat.cli.parsing import OneLineErrorParser
from ftplat.errors import EXIT_OK, EXIT_USAGE, UserError
from ftplat.units import format_bytes, format_duration


def build_default_storage() -> str:
    from ftplat.config.schema import StorageConfig

    return StorageConfig.model_fields["storage_path"].default


def is_sweep_path(sweep: str) -> bool:
    """A URI or a path (one with a ``/``, or starting with ``~`` or ``.``), not a bare name."""
    return "://" in sweep or "/" in sweep or sweep.startswith(("~", "."))


def build_sweep_uri(sweep: str, storage: str) -> str:
    """A URI or a path as given; a bare name is a sweep under ``storage``, or a folder here when
    ``storage`` has none of that name."""
    from ftplat.layout import build_sweep_config_uri
    from ftplat.storage import join_uri, path_exists

    if is_sweep_path(sweep):
        return sweep
    under_root = join_uri(storage, sweep)
    if not path_exists(build_sweep_config_uri(under_root)) and os.path.isdir(sweep):
        return sweep
    return under_root


def read_storage_type(uri: str, what: str):
    """What ``uri`` is (pyarrow's FileType); ``UserError`` naming ``what`` when its storage cannot
    be reached. It only reads: read-only storage passes (``storage.check_storage_reachable``,
    the sweep's check, also needs write permission)."""
    import pyarrow as pa

    from ftplat.storage import mask_uri_credentials, resolve_storage

    try:
        fs, path = resolve_storage(uri)
        return fs.get_file_info(path).type
    except (OSError, pa.ArrowException) as exc:
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        fix = ("check the bucket, AWS_ENDPOINT_URL and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
               "AWS_DEFAULT_REGION) in this environment" if "://" in uri and not uri.startswith("file://")
               else "give a folder you can read")
        raise UserError(mask_uri_credentials(f"{what} {uri!r} is not reachable ({first[:300]}); {fix}")) from None


@dataclass(frozen=True)
class UnreadableSweep:
    """A sweep under the storage root whose files cannot be read: listed as such, so that one
    cut-short or foreign ``sweep_config.json`` does not hide the other sweeps."""

    name: str
    path: str
    reason: str

    @property
    def status(self) -> str:
        return f"unreadable: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "status": self.status, "errors": [self.reason]}


def read_sweep_statuses(root: str, *, now: float, stale_after_s: float) -> list:
    """Every sweep under ``root``, in name order: its status, or an ``UnreadableSweep``."""
    import pyarrow.fs as pafs

    from ftplat.storage import join_uri, mask_uri_credentials
    from ftplat.tune.status import read_sweep_names, read_sweep_status

    kind = read_storage_type(root, "STORAGE")
    if kind == pafs.FileType.NotFound:
        raise UserError(f"STORAGE {mask_uri_credentials(root)!r} does not exist")
    if kind != pafs.FileType.Directory:
        raise UserError(f"STORAGE {mask_uri_credentials(root)!r} is a file; give the folder (or s3:// prefix) "
                        "that holds the sweep folders")
    try:
        names = read_sweep_names(root)
    except OSError as exc:
        why = " ".join(str(exc).split())
        raise UserError(mask_uri_credentials(f"STORAGE {root!r} cannot be listed ({why})")) from None
    statuses = []
    for name in names:
        uri = join_uri(root, name)
        try:
            statuses.append(read_sweep_status(uri, now=now, stale_after_s=stale_after_s))
        except UserError as exc:  # also a folder whose config went away since it was listed
            statuses.append(UnreadableSweep(name, uri, getattr(exc, "reason", str(exc))))
    return statuses


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if value != 0 and abs(value) < 1e-2 else f"{value:.4f}"
    return str(value)


def format_age(then: float | None, now: float) -> str:
    return "-" if then is None else f"{format_duration(max(now - then, 0.0))} ago"


def format_sweep_status(status, now: float) -> str:
    """The sweep's head lines, then a table of its trials (the leader marked ``*``)."""
    done = status.trials_done
    running = sum(1 for t in status.trials if t.status == "RUNNING")
    lines = [f"Sweep {status.name}: {status.status} (last change {format_age(status.last_change, now)}) "
             f"{status.path}",
             f"objective {status.metric} ({status.mode}), scope {status.scope}; trials {done} done of "
             f"{status.num_samples}, {running} running",
             f"elapsed {format_duration(status.elapsed_s)}, estimated remaining {format_duration(status.remaining_s)}; "
             f"storage {format_bytes(status.storage_bytes)} in {status.storage_files} files"]
    leader = status.leader_trial()
    if leader:
        params = ", ".join(f"{k}={format_value(v)}" for k, v in leader.hyperparameters.items())
        lines.append(f"leader: trial {leader.trial_id} {status.metric}[{status.scope}]={format_value(leader.score)} "
                     f"[{params}]")
    else:
        lines.append("leader: none yet (no trial has a finite score)")
    lines += [f"error: {e}" for e in status.errors]
    params = list(dict.fromkeys(k for t in status.trials for k in t.hyperparameters))
    headers = ["", "trial", "status", *[p.split(".")[-1] for p in params], "evals", f"score[{status.scope}]", "best",
               "time", "ended"]
    rows = [["*" if t.trial_id == status.leader else "", t.trial_id, t.status,
             *[format_value(t.hyperparameters.get(p)) for p in params], str(t.num_evaluations),
             format_value(t.score), format_value(t.best), format_duration(t.duration_s),
             (t.ended or "-") + (f": {t.error}" if t.error else "")] for t in status.trials]
    widths = [max(len(x) for x in col) for col in zip(headers, *rows)]
    lines += ["", *("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in [headers, *rows])]
    return "\n".join(lines)


def format_sweep_list(statuses: list, now: float) -> str:
    headers = ["sweep", "status", "trials", "leader score", "size", "last change"]
    rows = []
    for s in statuses:
        if isinstance(s, UnreadableSweep):  # why on a line of its own below, as it is long
            rows.append([s.name, "unreadable", "-", "-", "-", "-"])
            continue
        leader = s.leader_trial()
        rows.append([s.name, s.status, f"{s.trials_done}/{s.num_samples}",
                     f"{format_value(leader.score)} ({s.metric}[{s.scope}])" if leader else "-",
                     format_bytes(s.storage_bytes), format_age(s.last_change, now)])
    widths = [max(len(x) for x in col) for col in zip(headers, *rows)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip() for r in [headers, *rows]]
    return "\n".join(lines + [f"{s.name}: {s.status}" for s in statuses if isinstance(s, UnreadableSweep)])


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ftplat.tune.status import DEFAULT_STALE_AFTER_S

    p = OneLineErrorParser(prog=prog, description="How far sweeps are, read from storage (no Ray connection).")
    sub = p.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="one line per sweep under a storage root")
    ls.add_argument("storage", nargs="?", help="the storage root (local path or s3://; default: the job default, "
                    f"{build_default_storage()})")
    show = sub.add_parser("show", help="a sweep's status, trials, leader, time and storage")
    show.add_argument("sweep", help="a sweep name under --storage, or the sweep folder (local path or s3://)")
    show.add_argument("--storage", help=f"the storage root a sweep name is under (default {build_default_storage()})")
    for action in (ls, show):
        action.add_argument("--json", action="store_true", help="print one JSON object")
        action.add_argument("--stale-after", type=float, default=DEFAULT_STALE_AFTER_S, metavar="SECONDS",
                            help="a sweep without a summary whose folder has not changed for this long is "
                                 "reported interrupted, not running (default %(default)s)")
    return p


def main(argv: list[str] | None = None, *, prog: str = "ftplat sweeps") -> int:
    args = build_parser(prog).parse_args(argv)
    from ftplat.storage import mask_uri_credentials
    from ftplat.tune.status import read_sweep_status

    now = time.time()
    try:
        if args.action == "show":
            storage = args.storage or build_default_storage()
            if not is_sweep_path(args.sweep):  # the name is looked up under the root first
                read_storage_type(storage, "--storage")
            uri = build_sweep_uri(args.sweep, storage)
            read_storage_type(uri, "SWEEP")
            status = read_sweep_status(uri, now=now, stale_after_s=args.stale_after)
            text = json.dumps(status.to_dict(), indent=2) if args.json else format_sweep_status(status, now)
        else:
            root = args.storage or build_default_storage()
            statuses = read_sweep_statuses(root, now=now, stale_after_s=args.stale_after)
            text = (json.dumps({"storage": root, "sweeps": [s.to_dict() for s in statuses]}, indent=2) if args.json
                    else format_sweep_list(statuses, now) if statuses else f"no sweeps under {root}")
    except UserError as exc:
        print(f"error: {mask_uri_credentials(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    print(mask_uri_credentials(text))
    return EXIT_OK
