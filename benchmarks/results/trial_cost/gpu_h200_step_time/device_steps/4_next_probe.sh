# The next GPU session's run, after 1_install_a.sh: 3_first_steps.sh (as it ran) with the
# tracked trial and the first-steps probe (benchmarks/first_steps_probe.py).
CTX=process,ftplat,ftplat_untracked EXTRA_ARGS=--probe-first-steps DL=${DL:-215} \
  bash benchmarks/results/trial_cost/gpu_h200_step_time/device_steps/3_first_steps.sh
