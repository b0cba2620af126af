"""``ftplat predict MODEL_DIR TEXT ... [--file F]``: labels and scores from a text-classification pipeline."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ftplat.errors import EXIT_USAGE


def main(argv: list[str] | None = None, *, prog: str = "ftplat predict") -> int:
    p = argparse.ArgumentParser(prog=prog, description="Classify texts with an exported model.")
    p.add_argument("model_dir", help="a model directory (ftplat export, or any HF text classifier)")
    p.add_argument("texts", nargs="*", help="texts to classify")
    p.add_argument("--file", help="also classify each non-empty line of this file ('-' for stdin)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = p.parse_args(argv)
    texts = list(args.texts)
    if args.file:
        stream = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
        texts += [line.strip() for line in stream if line.strip()]
    if not texts:
        print("error: no texts: give them as arguments or with --file", file=sys.stderr)
        return EXIT_USAGE
    if not os.path.isfile(os.path.join(args.model_dir, "config.json")):
        print(f"error: MODEL_DIR {args.model_dir!r} holds no config.json: not a model directory", file=sys.stderr)
        return EXIT_USAGE
    from transformers import pipeline

    clf = pipeline("text-classification", model=args.model_dir, device="cpu")
    results = clf(texts, batch_size=args.batch_size, truncation=True)
    for text, res in zip(texts, results):
        if args.json:
            print(json.dumps({"text": text, "label": res["label"], "score": round(res["score"], 6)}))
        else:
            print(f"{res['label']}\t{res['score']:.4f}\t{text}")
    return 0
