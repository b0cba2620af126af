#!/bin/bash
# P2 A/B for starting Train's autoscaling coordinator from the sweep driver: before = 5f16145, after = 5f16145 with coordinator.patch (git worktree add /tmp/before_co 5f16145; git worktree add /tmp/after_co 5f16145 && git -C /tmp/after_co apply coordinator.patch).
exec bash "$(dirname "$0")/../p2_ab.sh" "$(dirname "$0")" /tmp/after_co /tmp/before_co
