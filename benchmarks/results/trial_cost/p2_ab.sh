#!/bin/bash
# P2 A/B: overhead.py --repeats 1 from two checkouts (each its own fresh cluster), interleaved
# after/before, 3 rounds; JSONs ab_<side>_<round>.json and progress.txt in OUT.
#   bash p2_ab.sh OUT AFTER_CHECKOUT BEFORE_CHECKOUT
set -u
OUT=$(cd "$1" && pwd); AFTER=$2; BEFORE=$3
mkdir -p /tmp/p2ab_logs
for i in 1 2 3; do
  for side in after before; do
    if [ $side = after ]; then src=$AFTER; else src=$BEFORE; fi
    echo "$(date -u +%T) round $i $side load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
    (cd $src && PYTHONPATH=$src/platform timeout 900 python benchmarks/overhead.py --repeats 1 \
        --json $OUT/ab_${side}_$i.json > /tmp/p2ab_logs/$(basename $OUT)_${side}_$i.log 2>&1)
  done
done
echo "$(date -u +%T) done load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/progress.txt
