"""The sweep's pre-flight (``check_sweep_preflight``: configs, model folder, data read and
tokenized) timed in a fresh process, before (a35f0b1: the model folder's check imported
``ftplat.train.modeling``, so transformers' modeling and peft) and after (f513dba:
``ftplat.config.model_files``), interleaved. On the P3 piece's config (MiniLM, 256 + 256
reviews at max_length 64).

  git worktree add /tmp/pre_before a35f0b1 && git worktree add /tmp/pre_after f513dba
  python benchmarks/results/trial_cost/preflight_imports/preflight_ab.py 5 preflight_ab.json
"""
import subprocess, sys, json, statistics, os
CODE = r'''
import sys, time
sys.path.insert(0, "/work/main/benchmarks")
import hpo
a = hpo.build_parser().parse_args(["--method", "ftplat_random", "--seed", "0", "--trials", "4", "--concurrent", "2", "--results", "/tmp/probe/res"])
from ftplat.config.loading import load_sweep_configs
from ftplat.tune.preflight import check_sweep_preflight
job, space = load_sweep_configs(None, None, hpo.build_overrides(a, "ftplat_random", 0, "/tmp/probe/st_pre", "/tmp/ftplat-bench-imdb"))
t = time.perf_counter()
check_sweep_preflight(job, space, resume=False)
print(time.perf_counter() - t)
'''
sides = {"before": "/tmp/pre_before/platform", "after": "/tmp/pre_after/platform"}
res = {k: [] for k in sides}
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
    for side, path in sides.items():
        env = dict(os.environ, PYTHONPATH=path)
        out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, cwd="/work/main")
        res[side].append(float(out.stdout.strip().splitlines()[-1]))
        print(side, res[side][-1], "load", open("/proc/loadavg").read().split()[:3], flush=True)
for side, xs in res.items():
    print(side, "median", round(statistics.median(xs), 2), "min", round(min(xs), 2), "max", round(max(xs), 2))
json.dump(res, open(sys.argv[2] if len(sys.argv) > 2 else "/tmp/preflight_ab.json", "w"))
