"""``ftplat export SWEEP OUT_DIR [--push-to-hub REPO_ID]``: the sweep's winner as a Hugging Face
model directory, uploaded to the hub when asked.

Exit codes: 0 exported (and pushed); 2 a user error, HF_HUB_OFFLINE=1 with --push-to-hub and an
invalid repo id included (known before any work, so nothing is written); 1 exported to OUT_DIR but the push failed (hub
unreachable, or auth refused): the error line gives the command that pushes it later."""

from __future__ import annotations

import shlex
import sys

from ftplat.cli.parsing import OneLineErrorParser
from ftplat.errors import EXIT_FAILURE, EXIT_USAGE, UserError

WEIGHT_WORDS = {"merged": " (adapter merged into its base model)",
                "adapter": " (adapter only: loading needs its base model)"}


def main(argv: list[str] | None = None, *, prog: str = "ftplat export") -> int:
    p = OneLineErrorParser(prog=prog, description="Export a finished sweep's winner (its best checkpoint) "
                           "as a model directory with a model card and its task (ftplat_task.json).")
    p.add_argument("sweep", help="the sweep folder: <storage_path>/<sweep_name> (local path or s3://)")
    p.add_argument("out_dir", help="a new or empty folder")
    p.add_argument("--adapter-only", action="store_true",
                   help="for a model.peft sweep: export the adapter alone (megabytes; needs peft and the base "
                        "model to load) instead of the base model with the adapter merged in")
    p.add_argument("--push-to-hub", metavar="REPO_ID",
                   help="after writing OUT_DIR, upload it to this Hugging Face model repo (created if missing; "
                        "token from HF_TOKEN or `hf auth login`)")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create the repo private")
    args = p.parse_args(argv)
    if args.private and not args.push_to_hub:
        p.error("--private needs --push-to-hub REPO_ID")
    if args.push_to_hub:
        from huggingface_hub.errors import HFValidationError
        from huggingface_hub.utils import validate_repo_id

        try:  # before the export: a bad id found only at the push would leave OUT_DIR written for nothing
            validate_repo_id(args.push_to_hub)
        except HFValidationError as exc:
            print(f"error: --push-to-hub {args.push_to_hub!r} is not a Hugging Face repo id ({exc}); give "
                  "NAMESPACE/NAME, e.g. me/my-model", file=sys.stderr)
            return EXIT_USAGE
    from huggingface_hub import constants

    if args.push_to_hub and constants.HF_HUB_OFFLINE:
        print("error: --push-to-hub needs the Hugging Face Hub but HF_HUB_OFFLINE=1; unset HF_HUB_OFFLINE, or "
              "export without --push-to-hub and upload OUT_DIR later with `hf upload`", file=sys.stderr)
        return EXIT_USAGE
    from ftplat.checkpoints.export import EXPORT_RECORD, run_export, run_push_to_hub

    try:
        record = run_export(args.sweep, args.out_dir, adapter_only=args.adapter_only)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    trial = record["trial"]
    test = (record.get("test") or {}).get("metrics") or {}
    shown = "".join(f", {k} = {v}" for k, v in test.items())
    print(f"Exported trial {trial['trial_id']} ({record['objective']['metric']}[{record['scope']}] = "
          f"{trial['scores'].get(record['scope'])}{shown}) from {trial['best_checkpoint']['path']} to {args.out_dir} "
          f"as a {record['task']['type']} model{WEIGHT_WORDS.get(record['weights']['weights'], '')}")
    if not args.push_to_hub:
        return 0
    try:
        url = run_push_to_hub(args.out_dir, args.push_to_hub, private=args.private)
    except UserError as exc:
        # The export record names this machine's paths; the push leaves it out, and so must this.
        later = (f"hf upload {'--private ' if args.private else ''}--exclude {EXPORT_RECORD} {args.push_to_hub} "
                 f"{shlex.quote(args.out_dir)} .")
        print(f"error: the export is complete at {args.out_dir}, but pushing it to {args.push_to_hub} failed: {exc}; "
              f"push it later with: {later}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"Pushed {args.out_dir} to {url}")
    return 0
