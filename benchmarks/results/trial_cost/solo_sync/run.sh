#!/bin/bash
# P2 with Train's synchronization actor (79964b2) against the in-process stand-in (c96dac5):
# overhead_ab_run.sh from clones in /tmp/ab/{before,after}; results land in this folder.
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/ab/before /tmp/ab/after && mkdir -p /tmp/ab
git clone -q /work/main /tmp/ab/before && git -C /tmp/ab/before checkout -q 79964b2
git clone -q /work/main /tmp/ab/after && git -C /tmp/ab/after checkout -q c96dac5
bash "$HERE/../overhead_ab_run.sh" "$HERE" /tmp/ab/before /tmp/ab/after
