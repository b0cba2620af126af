"""``ftplat checkpoints gc SWEEP [--dry-run]``: apply a retention policy to a finished sweep.

A sweep that Tune has run again since its ``summary.json`` (a ``--resume`` running, or one that
died) gets its plan printed with every action deferred: its summary no longer says which
trials run."""

from __future__ import annotations

import argparse
import sys

from ftplat.cli.parsing import OneLineErrorParser
from ftplat.errors import EXIT_OK, EXIT_USAGE, UserError


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = OneLineErrorParser(prog=prog, description="Manage a sweep's checkpoints in storage.")
    sub = p.add_subparsers(dest="action", required=True)
    gc = sub.add_parser("gc", help="delete the checkpoints the retention policy does not keep")
    gc.add_argument("sweep", help="the sweep folder: <storage_path>/<sweep_name> (local path or s3://)")
    gc.add_argument("--dry-run", action="store_true", help="print what would be kept and deleted, and why")
    gc.add_argument("--save-total-limit", type=int, help="per-trial limit (default: the sweep's)")
    gc.add_argument("--keep-top-k-trials", type=int, help="trials keeping their full set (default: the sweep's)")
    gc.add_argument("--no-trial-best", action="store_true", help="trials outside the top K drop their best")
    gc.add_argument("--no-trial-latest", action="store_true", help="trials outside the top K drop their latest")
    gc.add_argument("--keep-optimizer-state", action="store_true",
                    help="completed trials keep their checkpoints' optimizer state (default: the sweep's)")
    return p


def main(argv: list[str] | None = None, *, prog: str = "ftplat checkpoints") -> int:
    args = build_parser(prog).parse_args(argv)
    from ftplat.checkpoints.gc import (RESUMED_SINCE_SUMMARY, RESUMED_SINCE_SUMMARY_DETAIL, build_deferred_plan,
                                       format_gc_plan, read_gc_plan, read_resumed_since_summary, run_gc_plan)
    from ftplat.checkpoints.retention import RetentionPolicy
    from ftplat.ray_internals import check_ray_version
    from ftplat.records import SweepSummary

    try:
        check_gc_args(args)
        check_ray_version()  # gc rewrites Ray's checkpoint snapshots
        summary = SweepSummary.read(args.sweep)
        saved = summary.retention
        policy = RetentionPolicy(
            save_total_limit=args.save_total_limit if args.save_total_limit is not None
            else summary.save_total_limit or 2,
            keep_top_k_trials=args.keep_top_k_trials if args.keep_top_k_trials is not None
            else saved.get("keep_top_k_trials"),
            keep_trial_best=not args.no_trial_best and saved.get("keep_trial_best", True),
            keep_trial_latest=not args.no_trial_latest and saved.get("keep_trial_latest", True),
            # Sweeps recorded before the setting existed kept the state: keep it.
            keep_optimizer_state=args.keep_optimizer_state or saved.get("keep_optimizer_state", True),
        )
        plan = read_gc_plan(args.sweep, policy, summary.greater_is_better, summary=summary)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # Read after the plan: a resume that starts while gc lists storage is seen too.
    resumed = read_resumed_since_summary(args.sweep)
    if resumed:
        plan = build_deferred_plan(plan, RESUMED_SINCE_SUMMARY)
    print(format_gc_plan(plan))
    applied = run_gc_plan(plan, dry_run=args.dry_run)
    if resumed:
        print(f"nothing applied: {RESUMED_SINCE_SUMMARY_DETAIL}", file=sys.stderr)
    print("dry run: nothing deleted" if args.dry_run else f"applied {len(applied)} actions")
    if applied:
        run_record_gc(args.sweep, summary, plan)
    return EXIT_OK


def run_record_gc(sweep_uri: str, summary, plan) -> None:
    """Bring ``summary.json`` up to what storage holds after a gc, as the sweep's own final
    pass does: each best checkpoint's ``exists`` (read under SWEEP as given: a copied sweep's
    recorded paths are the original's), the plan's counts and what the sweep keeps."""
    import dataclasses

    from ftplat.checkpoints.gc import build_plan_counts
    from ftplat.checkpoints.listing import read_current_checkpoint_existence
    from ftplat.layout import build_summary_uri
    from ftplat.storage import write_json
    from ftplat.tune.accounting import build_sweep_cost, read_folder_bytes

    summary = read_current_checkpoint_existence(summary, sweep_uri)
    counts = build_plan_counts(plan)
    # The policy applied: a failure of the sweep's own final pass, recorded for this, is over.
    summary = dataclasses.replace(summary, checkpoint_gc=counts, retention_error=None)
    try:
        summary = build_sweep_cost(summary, *read_folder_bytes(sweep_uri))
    except OSError as exc:  # what the sweep keeps is information; the gc itself is done
        print(f"warning: could not measure what the sweep keeps now ({exc})", file=sys.stderr)
    write_json(build_summary_uri(sweep_uri), summary.to_dict())


def check_gc_args(args: argparse.Namespace) -> None:
    """Refuse limits the sweep's config would refuse (``UserError`` naming the flag)."""
    if args.save_total_limit is not None and args.save_total_limit < 1:
        raise UserError(f"--save-total-limit must be 1 or more, as training.save_total_limit (each trial keeps N "
                        f"checkpoints, and its best beside them), got {args.save_total_limit}; give 1 to keep the "
                        "fewest")
    if args.keep_top_k_trials is not None and args.keep_top_k_trials < 0:
        raise UserError(f"--keep-top-k-trials must be 0 or more, got {args.keep_top_k_trials}")
