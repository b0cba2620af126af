set -e
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/d2/*.whl
export PYTHONPATH=/tmp/site:$PWD/platform:$PWD/benchmarks PYTHONUNBUFFERED=1
python3 -m compileall -q -j 0 /tmp/site platform benchmarks jobs > /dev/null 2>&1 || true
date -u; uptime
python3 -c "from overhead import write_bert_base as w; w('/tmp/minilm', '/tmp/bert-base-random')"
set -o pipefail
python3 benchmarks/worker_context.py --use-gpu --model /tmp/bert-base-random --data /tmp/imdb --deadline-s ${DL:-160} --json $OUT/worker_context_gpu.json 2>&1 | grep -v -E "it/s\]|s/it\]" | tee $OUT/worker_context_gpu.log
date -u; uptime
