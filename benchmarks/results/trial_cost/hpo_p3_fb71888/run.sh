#!/bin/bash
# P3 pieces at fb71888's product code (a876f00; fb71888 added only docs and results), from a clone of a876f00 in /tmp/ab2/after.
set -u
cd /tmp/ab2/after
export PYTHONPATH=/tmp/ab2/after/platform
for seed in 0 1 2; do
  echo "$(date -u +%T) seed $seed hf load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3/progress.txt
  timeout 900 python benchmarks/hpo.py --method hf_random --seed $seed --trials 4 --results /tmp/p3/c1 > /tmp/p3/hf_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --results /tmp/p3/c1 > /tmp/p3/c1_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --concurrent 2 --results /tmp/p3/c2 > /tmp/p3/c2_$seed.log 2>&1
done
echo "$(date -u +%T) done" >> /tmp/p3/progress.txt
