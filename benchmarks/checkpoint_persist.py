"""How long the training loop waits for each checkpoint to reach storage: Ray's copy against
ftplat's hard link (issue #18's lever "checkpoint persistence off the training path").

A real Trainer-format checkpoint (the model's safetensors, AdamW's two moments per weight in
optimizer.pt, scheduler and RNG state) is written to a scratch folder, then put into a Ray
Train storage folder on the same filesystem, alternately by
- ``copy``: ``StorageContext.persist_current_checkpoint``, Ray's own upload (what a report
  does where a link cannot reach storage), and
- ``link``: ``ftplat.train.persist.CheckpointPersister`` (what a report does now when storage
  shares the scratch's filesystem),
in interleaved rounds (copy first in odd rounds, link first in even ones). Each time is the
call the training loop waits for; ``sync_after_s`` is an ``os.sync()`` right after it: the
writing a copy leaves to the kernel, which shares the machine's cores and disk with training.
Every stored copy is deleted and synced away before the next measurement.

  python benchmarks/checkpoint_persist.py --repeats 5 --json /tmp/checkpoint_persist.json

Models: ``minilm`` (../shared/models/all-MiniLM-L6-v2, the CPU benchmarks' model: about 260 MB
a checkpoint) and ``bert-base`` (random init, 110 M parameters: about 1.3 GB, the GPU goal's
model).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
MODES = ("copy", "link")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--model", action="append", choices=("minilm", "bert-base"),
                   help="repeatable; default both (minilm only when its folder is present)")
    p.add_argument("--workdir", help="where scratch and storage go (one filesystem; default: the temp folder)")
    p.add_argument("--json", help="write the whole report here")
    return p


def write_trainer_checkpoint(model_dir: str, dest: str) -> int:
    """The files a Trainer save writes for this model (weights, AdamW state after a step,
    scheduler, RNG, trainer state); returns their bytes."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    model.save_pretrained(dest)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    torch.save(optimizer.state_dict(), os.path.join(dest, "optimizer.pt"))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    torch.save(scheduler.state_dict(), os.path.join(dest, "scheduler.pt"))
    torch.save({"cpu": torch.get_rng_state()}, os.path.join(dest, "rng_state.pth"))
    with open(os.path.join(dest, "trainer_state.json"), "w") as f:
        json.dump({"global_step": 1, "log_history": []}, f)
    return sum(os.path.getsize(os.path.join(dest, n)) for n in os.listdir(dest))


def run_persist(mode: str, storage, source: str, name: str) -> dict:
    """One measured persist of ``source`` as checkpoint ``name``; the stored copy is removed after."""
    import ray.train

    from ftplat.train.persist import CheckpointPersister

    os.sync()
    checkpoint = ray.train.Checkpoint.from_directory(source)
    started = time.perf_counter()
    if mode == "copy":
        stored = storage.persist_current_checkpoint(checkpoint, name)
    else:
        persister = CheckpointPersister()
        stored = persister(checkpoint, name)
        assert persister.counts.linked == 1, persister.counts.to_dict()
    took = time.perf_counter() - started
    started = time.perf_counter()
    os.sync()
    synced = time.perf_counter() - started
    shutil.rmtree(stored.path)
    os.sync()
    return {"persist_s": round(took, 4), "sync_after_s": round(synced, 4)}


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    import ray.train
    from ray.train.v2._internal.execution.storage import StorageContext

    from _common import DEFAULT_MODEL, build_machine_record, summarize, write_random_bert_base, write_report

    machine = build_machine_record()
    models = a.model or ["bert-base", *(["minilm"] if os.path.isdir(DEFAULT_MODEL) else [])]
    runs: dict[str, dict[str, list[dict]]] = {}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="checkpoint-persist-", dir=a.workdir) as tmp:
        storage = StorageContext(storage_path=os.path.join(tmp, "storage"), experiment_dir_name="train-bench")
        # The persister asks Ray's train context for the run's storage, as inside a worker.
        ray.train.get_context = lambda: types.SimpleNamespace(get_storage=lambda: storage)
        for model in models:
            model_dir = DEFAULT_MODEL if model == "minilm" else write_random_bert_base(os.path.join(tmp, "bert-base"))
            source = os.path.join(tmp, "scratch", model, "checkpoint-1")
            sizes[model] = write_trainer_checkpoint(model_dir, source)
            runs[model] = {m: [] for m in MODES}
            for i in range(a.repeats):
                for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                    r = run_persist(mode, storage, source, f"checkpoint-{model}-{mode}-{i}")
                    r["load_avg"] = round(os.getloadavg()[0], 2)
                    runs[model][mode].append(r)
                    print(f"{model} round {i + 1}/{a.repeats} {mode}: {r['persist_s']} s in the call, "
                          f"{r['sync_after_s']} s to sync after", flush=True)
    keys = ("persist_s", "sync_after_s")
    report = {"config": vars(a), "machine": machine, "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
              "runs": runs,
              "aggregate": {m: {"checkpoint_bytes": sizes[m],
                                **{mode: {k: summarize([r[k] for r in rs]) for k in keys}
                                   for mode, rs in modes.items()}}
                            for m, modes in runs.items()}}
    write_report(report, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
