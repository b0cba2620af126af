#!/bin/bash
# P3 pieces at HEAD (product code of ac07279), from a clone in /tmp/p3r/repo.
set -u
cd /tmp/p3r/repo
export PYTHONPATH=/tmp/p3r/repo/platform
for seed in 0 1 2; do
  echo "$(date -u +%T) seed $seed hf load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3r/progress.txt
  timeout 900 python benchmarks/hpo.py --method hf_random --seed $seed --trials 4 --results /tmp/p3r/c1 > /tmp/p3r/hf_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c1 load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3r/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --results /tmp/p3r/c1 > /tmp/p3r/c1_$seed.log 2>&1
  echo "$(date -u +%T) seed $seed ftplat c2 load $(cut -d' ' -f1-3 /proc/loadavg)" >> /tmp/p3r/progress.txt
  timeout 900 python benchmarks/hpo.py --method ftplat_random --seed $seed --trials 4 --concurrent 2 --results /tmp/p3r/c2 > /tmp/p3r/c2_$seed.log 2>&1
done
echo "$(date -u +%T) done" >> /tmp/p3r/progress.txt
