"""First steps of a fresh process vs a warm one: MiniLM, batch 16, seq 128, 2 threads, AdamW."""
import json, os, sys, time
t0 = time.perf_counter()
import torch
from transformers import AutoModelForSequenceClassification
imp = time.perf_counter() - t0
torch.set_num_threads(2)
MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../../shared/models/all-MiniLM-L6-v2")

def run(steps=30):
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(MODEL, num_labels=2)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    g = torch.Generator().manual_seed(0)
    times = []
    for _ in range(steps):
        ids = torch.randint(1000, 20000, (16, 128), generator=g)
        labels = torch.randint(0, 2, (16,), generator=g)
        t = time.perf_counter()
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
        out.loss.backward()
        opt.step(); opt.zero_grad()
        times.append(time.perf_counter() - t)
    return {"first10": round(sum(times[:10]), 3), "steady_mean": round(sum(times[10:]) / (steps - 10), 4),
            "first": round(times[0], 3)}

cold = run()
warm = run()
print(json.dumps({"variant": sys.argv[1] if len(sys.argv) > 1 else "default", "import_s": round(imp, 2),
                  "cold": cold, "warm": warm}))
