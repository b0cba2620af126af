#!/bin/bash
# trial_gap.py: 4851992 against the same code with the worker importing transformers' Trainer in
# a thread from its actor's start (preimport_in_actor.patch); 3 one-epoch tiny-BERT trials a
# sweep, 3 interleaved pairs. (As run: "this tree" was /work/main at 4851992.)
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf /tmp/ab/base /tmp/ab/pre && mkdir -p /tmp/ab
git clone -q /work/main /tmp/ab/base && git -C /tmp/ab/base checkout -q 4851992
git clone -q /work/main /tmp/ab/pre && git -C /tmp/ab/pre checkout -q 4851992
git -C /tmp/ab/pre apply "$HERE/preimport_in_actor.patch"
PYTHONPATH=/tmp/ab/base/platform python /tmp/ab/base/benchmarks/trial_gap.py --trials 3 --repeats 3 \
  --compare /tmp/ab/pre/platform --json "$HERE/trial_gap.json"
