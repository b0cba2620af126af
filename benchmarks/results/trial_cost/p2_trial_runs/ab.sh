#!/bin/bash
# P2 A/B for the TrialRuns actor and the skipped DeepSpeed import: before = b252b83, after = 81429ec, each a worktree (git worktree add /tmp/before_tr b252b83; git worktree add /tmp/after_p2 81429ec).
exec bash "$(dirname "$0")/../p2_ab.sh" "$(dirname "$0")" /tmp/after_p2 /tmp/before_tr
