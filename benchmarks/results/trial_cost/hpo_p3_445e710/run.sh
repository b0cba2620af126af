#!/bin/bash
# P3 pieces at HEAD (product code of 4cf956b), from a clone in /tmp/p3h/repo
# (P3DIR names another folder holding repo/, for another commit's clone): per seed, plain HF,
# ftplat one trial at a time, ftplat two packed.
P3DIR=${P3DIR:-/tmp/p3h} exec bash "$(dirname "$0")/../p3_pieces.sh" \
    "hf|c1|--method hf_random" "c1|c1|--method ftplat_random" "c2|c2|--method ftplat_random --concurrent 2"
