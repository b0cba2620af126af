"""``ftplat checkpoints gc SWEEP [--dry-run]``: apply a retention policy to a finished sweep."""

from __future__ import annotations

import argparse
import sys

from ftplat.errors import EXIT_OK, EXIT_USAGE, UserError


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Manage a sweep's checkpoints in storage.")
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
    from ftplat.checkpoints.gc import format_gc_plan, read_gc_plan, run_gc_plan
    from ftplat.checkpoints.retention import RetentionPolicy
    from ftplat.ray_internals import check_ray_version
    from ftplat.records import SweepSummary

    try:
        check_ray_version()  # gc rewrites Ray's checkpoint snapshots
        summary = SweepSummary.read(args.sweep)
        saved = summary.retention
        policy = RetentionPolicy(
            save_total_limit=args.save_total_limit or summary.save_total_limit or 2,
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
    print(format_gc_plan(plan))
    applied = run_gc_plan(plan, dry_run=args.dry_run)
    print("dry run: nothing deleted" if args.dry_run else f"applied {len(applied)} actions")
    return EXIT_OK
