#!/bin/bash
# P1/P2 without (d6f290a) and with the worker freezing its imports for the cyclic GC
# (gc_freeze.patch applied): overhead_ab_run.sh from clones in /tmp/ab/{before,after}; results
# land in this folder.
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/ab/before /tmp/ab/after && mkdir -p /tmp/ab
git clone -q /work/main /tmp/ab/before && git -C /tmp/ab/before checkout -q d6f290a
git clone -q /work/main /tmp/ab/after && git -C /tmp/ab/after checkout -q d6f290a
git -C /tmp/ab/after apply "$HERE/gc_freeze.patch"
bash "$HERE/../overhead_ab_run.sh" "$HERE" /tmp/ab/before /tmp/ab/after
