import time, psutil, os
from ftplat.config.loading import load_sweep_configs
from ftplat.runtime import run_ray_init
job, _ = load_sweep_configs(None, None, ["tracking.enabled=false", "storage.storage_path=/tmp/warm/s"])
run_ray_init(job.resources)
time.sleep(15)
me = psutil.Process()
def procs():
    return {p.pid: p for p in psutil.process_iter() if p.pid != me.pid}
ps = procs(); t0 = {}
for pid, p in ps.items():
    try: t0[pid] = (p.name(), " ".join(p.cmdline())[:80], sum(p.cpu_times()[:2]))
    except Exception: pass
mine0 = sum(me.cpu_times()[:2]); w = time.time(); time.sleep(30); w = time.time() - w
rows = []
for pid, (n, c, c0) in t0.items():
    try: rows.append((sum(psutil.Process(pid).cpu_times()[:2]) - c0, n, c))
    except Exception: pass
rows.sort(reverse=True)
tot = sum(r[0] for r in rows) + sum(me.cpu_times()[:2]) - mine0
print(f"idle cluster: {tot / w:.3f} cores busy over {w:.0f} s; driver {(sum(me.cpu_times()[:2]) - mine0)/w:.3f}")
for r in rows[:8]: print(f"  {r[0]/w:.3f}  {r[1]}  {r[2]}")
