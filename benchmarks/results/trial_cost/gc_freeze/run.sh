#!/bin/bash
# P1/P2 without (d6f290a) and with the worker freezing its imports for the cyclic GC (gc.freeze),
# interleaved A B A B A B, one overhead.py pair per run, each run on its own fresh local cluster.
# Clones of d6f290a in /tmp/ab/{before,after}, gc_freeze.patch applied to "after"; results land in this folder.
cd /work/main
OUT=benchmarks/results/trial_cost/gc_freeze
for round in 1 2 3; do
  for side in before after; do
    echo "$(date -u +%T) round $round $side load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/progress.txt
    PYTHONPATH=/tmp/ab/$side/platform timeout 900 python /tmp/ab/$side/benchmarks/overhead.py --repeats 1 \
      --json $OUT/${side}_$round.json > /tmp/ab/${side}_$round.log 2>&1
    echo "$(date -u +%T) rc=$?" >> $OUT/progress.txt
  done
done
