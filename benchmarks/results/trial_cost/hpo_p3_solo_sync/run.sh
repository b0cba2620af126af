#!/bin/bash
# P3 packed with Train's synchronization actor (79964b2) and without it in one-worker trials
# (c058dd5): hpo_p3_ab_run.sh in /tmp/p3s. Then: python summarize.py /tmp/p3s
bash "$(dirname "$0")/../hpo_p3_ab_run.sh" /tmp/p3s 79964b2 c058dd5
