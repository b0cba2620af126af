# After 1_install_a.sh and 4_next_probe.sh (which leaves /tmp/site and /tmp/bert-base-random), if
# device time is left: evaluation off the training path against in-loop evaluation on the GPU
# (benchmarks/eval_offpath.py: the worker on half the GPU, each validation task on the other
# half; bert-base at bf16, max_length 160, batch 32, 4,096 held-out reviews evaluated 4 times; with
# the 12,000-review train sample of 0_prepare_here.sh the held-out reviews are train rows not trained on).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/c2/*.whl 2>/dev/null || true
export PYTHONPATH=/tmp/site:$PWD/platform:$PWD/benchmarks PYTHONUNBUFFERED=1
date -u; uptime
python3 benchmarks/eval_offpath.py --use-gpu --model /tmp/bert-base-random --data /tmp/imdb --train-rows 4096 \
  --eval-rows 4096 --max-length 160 --batch 32 --steps 128 --evals 4 --repeats 2 --json $OUT/eval_offpath_gpu.json 2>&1 \
  | grep -v -E "it/s\]|s/it\]" | tail -20
date -u; uptime
