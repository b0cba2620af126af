#!/bin/bash
# P2 A/B for the per-run placement-group cleaner: before = a96599a, after = the new commit.
# overhead.py --repeats 1 from each clone, interleaved before/after, 3 rounds.
set -u
cd /tmp/ab2
for i in 1 2 3; do
  for side in before after; do
    echo "$(date -u +%T) round $i $side load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/ab2/progress.txt
    (cd /tmp/ab2/$side && PYTHONPATH=/tmp/ab2/$side/platform timeout 900 python benchmarks/overhead.py --repeats 1 \
        --json /tmp/ab2/results/overhead_${side}_$i.json > /tmp/ab2/logs/${side}_$i.log 2>&1)
  done
done
echo "$(date -u +%T) done" >> /tmp/ab2/progress.txt
