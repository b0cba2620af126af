#!/bin/bash
# P2 A/B for the TrialRuns actor and the skipped DeepSpeed import: before = b252b83, after = 81429ec,
# each a worktree (git worktree add /tmp/before_tr b252b83; git worktree add /tmp/after_p2 81429ec).
# overhead.py --repeats 1 from each, interleaved after/before, 3 rounds; JSONs in this folder.
set -u
OUT=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/p2ab/logs
for i in 1 2 3; do
  for side in after before; do
    if [ $side = after ]; then src=/tmp/after_p2; else src=/tmp/before_tr; fi
    echo "$(date -u +%T) round $i $side load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
    (cd $src && PYTHONPATH=$src/platform timeout 900 python benchmarks/overhead.py --repeats 1 \
        --json $OUT/ab_${side}_$i.json > /tmp/p2ab/logs/${side}_$i.log 2>&1)
  done
done
echo "$(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
