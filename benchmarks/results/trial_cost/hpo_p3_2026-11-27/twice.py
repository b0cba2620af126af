"""train() twice in one process on a fresh model each time: the cold-process penalty."""
import json, sys, tempfile, time
sys.path.insert(0, "/work/main/benchmarks")
import torch
torch.set_num_threads(2)
from ftplat.config.loading import load_sweep_configs
from ftplat.data.preparation import build_tokenized_tables
from ftplat.train.modeling import build_model
from _common import build_plain_trainer
pad = sys.argv[1] if len(sys.argv) > 1 else "dynamic"
ov = ["tracking.enabled=false", "model.name_or_path=/work/shared/models/all-MiniLM-L6-v2", "data.source=/work/shared/data/imdb",
      "data.max_length=64", "data.train_size=256", "data.eval_size=256", "data.test_split=null",
      "training.num_train_epochs=3", "training.per_device_train_batch_size=16", "training.per_device_eval_batch_size=64",
      "training.save_total_limit=1", "training.logging_steps=10", "storage.storage_path=/tmp/warm/s"]
if pad == "max_length":
    ov.append("data.pad_to_max_length=true")
job, _ = load_sweep_configs(None, None, ov)
data = build_tokenized_tables(job)
out = {"pad": pad}
for i in range(2):
    with tempfile.TemporaryDirectory() as d:
        tr = build_plain_trainer(job, data, d, model=build_model(job))
        t = time.perf_counter(); m = tr.train(); out[f"train_{i}"] = round(time.perf_counter() - t, 1)
print(json.dumps(out))
