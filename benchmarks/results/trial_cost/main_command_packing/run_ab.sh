#!/bin/bash
# The README's main command, as shipped (one 2-thread trial at a time) against two packed
# one-thread trials, interleaved A B A B A B, each in a fresh process, from a clean clone.
cd /tmp/ab/repo && export PYTHONPATH=/tmp/ab/repo/platform
for i in 1 2 3; do
  for arm in c1 c2; do
    if [ $arm = c1 ]; then extra=""; else extra="resources.cpus_per_worker=1 resources.max_concurrent_trials=2"; fi
    echo "=== $arm run $i start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a /tmp/ab/log.txt
    /usr/bin/time -v python jobs/imdb_sweep.py --config jobs/configs/imdb_cpu.yaml --search-space search_spaces/imdb_cpu.yaml \
       storage.sweep_name=ab-$arm-$i $extra > /tmp/ab/$arm-$i.out 2>&1
    echo "=== $arm run $i end $(date -u +%H:%M:%S) rc $? load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a /tmp/ab/log.txt
  done
done
