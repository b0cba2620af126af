set -e
cp .gpu/c3/part.* /tmp/parts/; mkdir -p /tmp/imdb /tmp/minilm; cp .gpu/c3/imdb/* /tmp/imdb/; cp .gpu/c3/minilm/* /tmp/minilm/
export PYTHONPATH=/tmp/site:$PWD/platform:$PWD/benchmarks PYTHONUNBUFFERED=1
python3 -m compileall -q -j 0 platform benchmarks jobs > /dev/null
git log --oneline -1 2>/dev/null || true; date -u; uptime; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 5 > $OUT/overhead_gpu_util.csv 2>&1 &
python3 -c "from overhead import write_bert_base as w; w('/tmp/minilm', '/tmp/bert-base-random')"
set -o pipefail
python3 benchmarks/overhead.py --use-gpu --repeats 3 --plain-process fresh --model /tmp/bert-base-random --data /tmp/imdb --json $OUT/overhead_gpu_fresh.json 2>&1 | tee $OUT/overhead_gpu_fresh.log
date -u; uptime
