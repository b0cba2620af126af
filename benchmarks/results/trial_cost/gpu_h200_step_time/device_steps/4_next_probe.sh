# The next GPU session's run, after 1_install_a.sh: 3_first_steps.sh (as it ran) with the
# tracked trial and the first-steps probe (benchmarks/first_steps_probe.py).
CTX=process,ftplat,ftplat_untracked EXTRA_ARGS=--probe-first-steps DL=${DL:-215} \
  bash benchmarks/results/trial_cost/gpu_h200_step_time/device_steps/3_first_steps.sh
# Ray's copy of a bert-base checkpoint (1.3 GB) against ftplat's hard link, on the GPU machine's
# disk (about 20 s; benchmarks/checkpoint_persist.py, added with the links in d3a3928).
PYTHONPATH=/tmp/site:$PWD/platform:$PWD/benchmarks python3 benchmarks/checkpoint_persist.py --model bert-base \
  --repeats 5 --json $OUT/checkpoint_persist_gpu.json 2>&1 | tail -3
