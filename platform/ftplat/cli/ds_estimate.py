"""``ftplat ds-estimate --model M --num-gpus N [--num-nodes K] [--task T]``: ZeRO-2/3 memory needs."""

from __future__ import annotations

import os
import sys

from ftplat.cli.parsing import OneLineErrorParser
from ftplat.errors import EXIT_USAGE, UserError
from ftplat.tasks import TASK_NAMES


def main(argv: list[str] | None = None, *, prog: str = "ftplat ds-estimate") -> int:
    p = OneLineErrorParser(prog=prog, description="Print DeepSpeed's estimate of the memory that the model "
                           "states (parameters, gradients, Adam states) need per GPU and per node under "
                           "ZeRO-2 and ZeRO-3, with and without offload. Activations, temporary buffers "
                           "and the CUDA context come on top.")
    p.add_argument("--model", required=True, help="hub id or local model directory (only its config is read)")
    p.add_argument("--task", default="text-classification", choices=TASK_NAMES,
                   help="the job's task.type: its model class decides the head counted (default text-classification)")
    p.add_argument("--num-gpus", type=int, required=True, help="GPUs per node")
    p.add_argument("--num-nodes", type=int, default=1, help="nodes (default 1)")
    p.add_argument("--trust-remote-code", action="store_true", help="run code shipped with a hub model")
    args = p.parse_args(argv)
    for flag, value in (("--num-gpus", args.num_gpus), ("--num-nodes", args.num_nodes)):
        if value < 1:
            print(f"error: {flag} must be at least 1, got {value}", file=sys.stderr)
            return EXIT_USAGE
    from ftplat.config.base import looks_like_local_path
    from ftplat.zero.config import check_deepspeed_installed
    from ftplat.zero.estimate import build_estimate_report, build_meta_model

    model_path = args.model
    # The sweep's rule for model.name_or_path: a value written as a path is never a hub id, so a
    # missing one is named as such (transformers would call it a malformed repo id).
    if looks_like_local_path(args.model):
        model_path = os.path.expanduser(args.model)  # transformers does not expand ~
        if not os.path.exists(model_path):
            print(f"error: --model {args.model!r} does not exist; give a local model directory or a hub id",
                  file=sys.stderr)
            return EXIT_USAGE
    try:
        check_deepspeed_installed("ftplat ds-estimate")
        model = build_meta_model(model_path, task_type=args.task, trust_remote_code=args.trust_remote_code)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(build_estimate_report(model, num_gpus=args.num_gpus, num_nodes=args.num_nodes), end="")
    return 0
