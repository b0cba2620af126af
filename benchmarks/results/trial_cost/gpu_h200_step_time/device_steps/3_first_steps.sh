set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/c2/*.whl
export PYTHONPATH=/tmp/site:$PWD/platform:$PWD/benchmarks PYTHONUNBUFFERED=1
python3 -m compileall -q -j 0 /tmp/site platform benchmarks jobs > /dev/null 2>&1 || true
date -u; uptime
python3 -c "import ray, ftplat, transformers, torch; print(ray.__version__, transformers.__version__, torch.__version__, torch.cuda.is_available())"
python3 -c "from overhead import write_bert_base as w; w('/tmp/minilm', '/tmp/bert-base-random')"
python3 benchmarks/results/trial_cost/gpu_h200_step_time/device_steps/2_gpu_warmup.py
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -lms 500 > $OUT/first_steps_gpu_util.csv 2>&1 &
# Which processes hold a CUDA context while the trials start (each sample: every process on the GPU).
nvidia-smi --query-compute-apps=timestamp,pid,used_gpu_memory --format=csv -lms 250 > $OUT/first_steps_compute_apps.csv 2>&1 &
(top -b -d 1 -n 300 -c -w 160 | grep -A 8 "PID USER" > $OUT/first_steps_top.txt) &
set -o pipefail
python3 benchmarks/worker_context.py --use-gpu --model /tmp/bert-base-random --data /tmp/imdb --deadline-s ${DL:-230} \
  --contexts ${CTX:-process,ftplat_untracked} ${EXTRA_ARGS:-} --json $OUT/first_steps_gpu.json 2>&1 \
  | grep -v -E "it/s\]|s/it\]" | tee $OUT/first_steps_gpu.log
date -u; uptime
kill $(jobs -p) 2>/dev/null || true
