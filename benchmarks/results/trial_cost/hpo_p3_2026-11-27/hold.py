import time
from ftplat.config.loading import load_sweep_configs
from ftplat.runtime import run_ray_init
job, _ = load_sweep_configs(None, None, ["tracking.enabled=false", "storage.storage_path=/tmp/warm/s"])
run_ray_init(job.resources)
print("up", flush=True)
time.sleep(150)
