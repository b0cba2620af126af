set -e
cp .gpu/c4/part.* /tmp/parts/; cat /tmp/parts/part.a1 /tmp/parts/part.a2 /tmp/parts/part.a3 /tmp/parts/part.a4 > /tmp/minilm/model.safetensors
echo "$(cat .gpu/c4/sha256)  /tmp/minilm/model.safetensors" | sha256sum -c
export PYTHONPATH=/tmp/site:$PWD/platform:$PWD/benchmarks PYTHONUNBUFFERED=1
date -u; uptime
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 5 > $OUT/imdb_sweep_gpu_util.csv 2>&1 &
set -o pipefail
python3 jobs/imdb_sweep.py --config jobs/configs/imdb.yaml --search-space search_spaces/imdb.yaml \
  --model /tmp/minilm --dataset /tmp/imdb --storage /tmp/ftplat_results --name gpu-minilm-256 \
  training.fp16=false training.bf16=true tracking.tracking_uri=sqlite:////tmp/mlflow.db \
  data.max_length=${LEN:-256} training.num_train_epochs=${EPOCHS:-3} \
  resources.max_concurrent_trials=${N:-6} resources.gpus_per_worker=${G:-0.16} resources.cpus_per_worker=2 \
  search.num_samples=${N:-6} \
  "search.parameters={training.learning_rate: {type: loguniform, low: 3.0e-5, high: 2.0e-4}, training.warmup_steps: {type: uniform, low: 0.0, high: 0.2}, training.weight_decay: {type: uniform, low: 0.0, high: 0.1}}" \
  "search.points_to_evaluate=[{training.learning_rate: 8.59e-5, training.warmup_steps: 0.137, training.weight_decay: 0.0551}]" \
  2>&1 | tee $OUT/imdb_sweep.log
cp /tmp/ftplat_results/gpu-minilm-256/summary.json $OUT/imdb_sweep_summary.json
date -u; uptime; du -sh /tmp/ftplat_results/gpu-minilm-256
