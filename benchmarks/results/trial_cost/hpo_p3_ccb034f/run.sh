#!/bin/bash
# P3 pieces at ccb034f's product code, from a clone in /tmp/p3s/repo (with /tmp/p3s/shared ->
# the shared folder): the 445e710 run's script. Then: python summarize.py (in this folder).
P3DIR=/tmp/p3s exec bash "$(dirname "$0")/../hpo_p3_445e710/run.sh"
