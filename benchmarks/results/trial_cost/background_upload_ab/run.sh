#!/bin/bash
# P1/P2 with storage on another filesystem than the scratch (/dev/shm, tmpfs): Ray's copy in the
# training loop (d3a3928) against Ray's copy in the background from staged links (30653a9),
# interleaved A B A B A B, one overhead.py pair per run, each run on its own fresh cluster.
# Clones in /tmp/ab/bg_{before,after}; the benchmark script is this tree's (it has --storage-root).
cd /work/main
OUT=/tmp/ab/bg_out; mkdir -p $OUT
for round in 1 2 3; do
  for side in before after; do
    echo "$(date -u +%T) round $round $side load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/progress.txt
    PYTHONPATH=/tmp/ab/bg_$side/platform timeout 900 python benchmarks/overhead.py --repeats 1 \
      --storage-root /dev/shm --json $OUT/${side}_$round.json > $OUT/${side}_$round.log 2>&1
    echo "$(date -u +%T) rc=$?" >> $OUT/progress.txt
  done
done
