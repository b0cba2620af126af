#!/bin/bash
# P1/P2 with Ray's checkpoint copy (eebf1cb) against hard links (d3a3928), interleaved A B A B A B,
# one overhead.py pair per run, each run on its own fresh local cluster. Clones in /tmp/ab.
cd /work/main
OUT=/tmp/ab/out; mkdir -p $OUT
for round in 1 2 3; do
  for side in before after; do
    echo "$(date -u +%T) round $round $side load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/progress.txt
    PYTHONPATH=/tmp/ab/$side/platform timeout 900 python benchmarks/overhead.py --repeats 1 \
      --json $OUT/${side}_$round.json > $OUT/${side}_$round.log 2>&1
    echo "$(date -u +%T) rc=$?" >> $OUT/progress.txt
  done
done
