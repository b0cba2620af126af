"""What a trial pays to load its base model, and how much of it loading the weights once per
node could save (issue #18's lever).

Every trial's worker is a fresh process that calls ``from_pretrained`` once. A fresh
process is timed for each model, in this order:
- the imports of torch and the Auto class;
- the import of the model's own modeling module (transformers imports it lazily, on the first
  ``from_pretrained``);
- the first ``from_pretrained``;
- a second one, with the module and the file's pages already warm.

Weights kept in the object store or in shared memory would save only the part of a load
that reads the weights. The module import stays with every new process.

The models are a random-init bert-base-sized classifier (written to a temporary folder: no
download) and, when present, ``../shared/models/all-MiniLM-L6-v2``. The repeats interleave the
models, each in a new process:

  python benchmarks/model_load.py --repeats 3 --json /tmp/model_load.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--model", action="append", help="a local model folder (repeatable); default: see above")
    p.add_argument("--json", help="write the whole report here")
    p.add_argument("--one", help=argparse.SUPPRESS)
    return p


def run_one(path: str) -> dict:
    """The four timings, in this (fresh) process."""
    import importlib

    start = time.perf_counter()
    import torch  # noqa: F401 - timed with the Auto class
    from transformers import AutoConfig, AutoModelForSequenceClassification

    out = {"imports_s": time.perf_counter() - start}
    model_type = AutoConfig.from_pretrained(path).model_type
    start = time.perf_counter()
    importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    out["modeling_module_import_s"] = time.perf_counter() - start
    for which in ("first", "second"):
        start = time.perf_counter()
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2)
        out[f"{which}_from_pretrained_s"] = time.perf_counter() - start
    out["parameters"] = sum(p.numel() for p in model.parameters())
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.one:
        print(json.dumps(run_one(a.one)))
        return 0
    from _common import (DEFAULT_MODEL, build_machine_record, run_json_process, summarize, write_random_bert_base,
                         write_report)

    machine = build_machine_record()
    with tempfile.TemporaryDirectory(prefix="model-load-") as tmp:
        models = a.model or [write_random_bert_base(os.path.join(tmp, "bert-base-random")),
                             *([DEFAULT_MODEL] if os.path.isdir(DEFAULT_MODEL) else [])]
        runs: dict[str, list[dict]] = {m: [] for m in models}
        for i in range(a.repeats):
            for m in models:
                r = run_json_process([sys.executable, os.path.abspath(__file__), "--one", m], None)
                runs[m].append(r)
                print(f"{i + 1}/{a.repeats} {m}: module import {r['modeling_module_import_s']} s, "
                      f"from_pretrained {r['first_from_pretrained_s']} s then {r['second_from_pretrained_s']} s",
                      flush=True)
    keys = ("imports_s", "modeling_module_import_s", "first_from_pretrained_s", "second_from_pretrained_s")
    report = {"config": {k: v for k, v in vars(a).items() if k != "one"}, "machine": machine,
              "load_avg_at_end": [round(x, 2) for x in os.getloadavg()], "runs": runs,
              "aggregate": {m: {"parameters": rs[0]["parameters"], **{k: summarize([r[k] for r in rs]) for k in keys}}
                            for m, rs in runs.items()}}
    write_report(report, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
