#!/bin/bash
# P3 pieces at ac07279's product code, from a clone in /tmp/p3r/repo (with /tmp/p3r/shared ->
# the shared folder): the 445e710 run's script. Stopped during seed 1 (progress.txt).
P3DIR=/tmp/p3r exec bash "$(dirname "$0")/../hpo_p3_445e710/run.sh"
