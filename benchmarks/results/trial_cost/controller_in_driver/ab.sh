#!/bin/bash
# P2 A/B for the Train controller in the trial driver: before = 574b07f, after = 574b07f with in_process.patch (git worktree add /tmp/before_ctl 574b07f; git worktree add /tmp/after_ctl 574b07f && git -C /tmp/after_ctl apply in_process.patch).
exec bash "$(dirname "$0")/../p2_ab.sh" "$(dirname "$0")" /tmp/after_ctl /tmp/before_ctl
