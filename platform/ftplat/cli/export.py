"""``ftplat export SWEEP OUT_DIR``: the sweep's winner as a Hugging Face model directory."""

from __future__ import annotations

import argparse
import sys

from ftplat.errors import EXIT_USAGE, UserError

WEIGHT_WORDS = {"merged": " (adapter merged into its base model)",
                "adapter": " (adapter only: loading needs its base model)"}


def main(argv: list[str] | None = None, *, prog: str = "ftplat export") -> int:
    p = argparse.ArgumentParser(prog=prog, description="Export a finished sweep's winner (its best checkpoint) "
                                "as a model directory with a model card and its task (ftplat_task.json).")
    p.add_argument("sweep", help="the sweep folder: <storage_path>/<sweep_name> (local path or s3://)")
    p.add_argument("out_dir", help="a new or empty folder")
    p.add_argument("--adapter-only", action="store_true",
                   help="for a model.peft sweep: export the adapter alone (megabytes; needs peft and the base "
                        "model to load) instead of the base model with the adapter merged in")
    args = p.parse_args(argv)
    from ftplat.checkpoints.export import run_export

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
    return 0
