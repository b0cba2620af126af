#!/bin/bash
# P3 packed with Ray's checkpoint copy (eebf1cb) and with hard links (d3a3928): hpo_p3_ab_run.sh
# in /tmp/p3l. Then: python summarize.py /tmp/p3l
bash "$(dirname "$0")/../hpo_p3_ab_run.sh" /tmp/p3l eebf1cb d3a3928
