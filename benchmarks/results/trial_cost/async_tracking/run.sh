#!/bin/bash
# Async MLflow logging: after (this tree) and before (HEAD~1 worktree), interleaved A B A B A B.
cd /work/main
for i in 1 2 3; do
  for side in after before; do
    if [ $side = before ]; then export PYTHONPATH=/tmp/before_track/platform; else unset PYTHONPATH; fi
    uptime
    timeout 600 python benchmarks/worker_context.py --model /tmp/tinybert --threads 1 --train-size 512 \
      --contexts ftplat,ftplat_untracked --deadline-s 80 --json /tmp/track_bench/${side}_$i.json > /tmp/track_bench/${side}_$i.log 2>&1
    echo "$side $i rc $?"
  done
done
