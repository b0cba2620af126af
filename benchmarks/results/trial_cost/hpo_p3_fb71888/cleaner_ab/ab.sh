#!/bin/bash
# ftplat one-at-a-time P3 pieces, before (a96599a) and after (a876f00), interleaved per seed.
set -u
for seed in 0 1; do
  for side in before after; do
    echo "$(date -u +%T) seed $seed $side load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3/ab_progress.txt
    (cd /tmp/ab2/$side && PYTHONPATH=/tmp/ab2/$side/platform timeout 900 python benchmarks/hpo.py --method ftplat_random \
        --seed $seed --trials 4 --results /tmp/p3/ab_$side > /tmp/p3/ab_${side}_$seed.log 2>&1)
  done
done
echo "$(date -u +%T) done" >> /tmp/p3/ab_progress.txt
