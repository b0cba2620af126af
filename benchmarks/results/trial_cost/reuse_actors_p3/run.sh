#!/bin/bash
# P3 packed and one at a time: HEAD (b2fe139) vs reuse_actors for FIFO, interleaved.
set -u
for round in 1 2; do
  for side in main reuse; do
    dir=/work/main; [ $side = reuse ] && dir=/tmp/reuse
    for conc in 2; do
      echo "$(date -u +%T) round $round $side conc $conc load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/ab/progress.txt
      (cd $dir && PYTHONPATH=$dir/platform timeout 900 python benchmarks/hpo.py --method ftplat_random --concurrent $conc --seed 0 --trials 4 --results /tmp/ab/${side}_c${conc}_r$round > /tmp/ab/${side}_c${conc}_r$round.log 2>&1)
    done
  done
done
echo "$(date -u +%T) done" >> /tmp/ab/progress.txt
