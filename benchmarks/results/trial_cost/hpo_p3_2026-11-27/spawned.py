import json, multiprocessing, os, runpy, sys, subprocess
from concurrent.futures import ProcessPoolExecutor

def child():
    sys.argv = ["twice.py"]
    import io, contextlib
    env = dict(os.environ)
    runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "twice.py"), run_name="__main__")
    return env

if __name__ == "__main__":
    base = dict(os.environ)
    from ftplat.config.loading import load_sweep_configs
    from ftplat.runtime import run_ray_init
    job, _ = load_sweep_configs(None, None, ["tracking.enabled=false", "storage.storage_path=/tmp/warm/s"])
    run_ray_init(job.resources)
    after = dict(os.environ)
    print("env set by run_ray_init:", {k: v for k, v in after.items() if base.get(k) != v}, flush=True)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(child).result()
