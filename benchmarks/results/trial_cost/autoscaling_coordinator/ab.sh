#!/bin/bash
# P2 A/B for starting Train's autoscaling coordinator from the sweep driver: before = 5f16145,
# after = 5f16145 with coordinator.patch, each a worktree (git worktree add /tmp/before_co 5f16145;
# git worktree add /tmp/after_co 5f16145 && git -C /tmp/after_co apply coordinator.patch).
# overhead.py --repeats 1 from each (a fresh cluster each), interleaved after/before, 3 rounds; JSONs in this folder.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/coab/logs
for i in 1 2 3; do
  for side in after before; do
    if [ $side = after ]; then src=/tmp/after_co; else src=/tmp/before_co; fi
    echo "$(date -u +%T) round $i $side load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
    (cd $src && PYTHONPATH=$src/platform timeout 900 python benchmarks/overhead.py --repeats 1 \
        --json $OUT/ab_${side}_$i.json > /tmp/coab/logs/${side}_$i.log 2>&1)
  done
done
echo "$(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
