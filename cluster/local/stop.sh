#!/usr/bin/env bash
# Stop the local cluster that cluster/local/start.sh started, and only that one.
#
# `ray stop` is never used: it kills every Ray process on the host, including other users'
# clusters and test runs. Instead, for each recorded node (workers first, then the head):
#   1. SIGTERM to the `ray start --block` process, which shuts its node's processes down;
#   2. after --grace seconds, SIGTERM and then SIGKILL to that node's process group;
# then any process left whose command line names one of the nodes' Ray temp dirs (<state>/ray,
# <state>/ray-wN), or whose working directory is a job's working-dir copy
# (<state>/ray/session_*/runtime_resources/...: job drivers run in their own session), is
# killed by pid.
#
#   cluster/local/stop.sh                      # the default state dir
#   cluster/local/stop.sh --state-dir /tmp/r2  # a cluster started with --state-dir /tmp/r2
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=_common.sh
source "$HERE/_common.sh"

STATE_DIR="$FTPLAT_DEFAULT_STATE_DIR"
GRACE=30
KEEP_LOGS=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --state-dir) STATE_DIR="$2"; shift 2 ;;
        --grace) GRACE="$2"; shift 2 ;;
        --purge) KEEP_LOGS=0; shift ;;
        -h | --help)
            echo "usage: cluster/local/stop.sh [--state-dir DIR] [--grace SECONDS] [--purge]"
            echo "  --purge  also delete the state dir (logs, Ray temp dir) once everything is stopped"
            exit 0 ;;
        *) die "unknown option: $1" ;;
    esac
done

if [[ ! -d "$STATE_DIR" ]]; then
    echo "nothing to stop: no state dir $STATE_DIR"
    exit 0
fi
STATE_DIR="$(cd "$STATE_DIR" && pwd -P)"

# Wait up to $2 seconds for process group $1 to be empty.
wait_group_gone() {
    local pgid="$1" timeout="$2" waited=0
    while [[ -n "$(group_pids "$pgid")" ]]; do
        if ((waited >= timeout)); then
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

# True when process group $1 holds a process of this cluster (a command line naming one of its
# temp dirs, or a cwd in the state dir): a recorded pid that was since reused by an unrelated
# process group is never signalled.
group_is_ours() {
    local member cmd cwd
    for member in $(group_pids "$1"); do
        cmd="$(tr '\0' ' ' <"/proc/$member/cmdline" 2>/dev/null || true)"
        cwd="$(readlink "/proc/$member/cwd" 2>/dev/null || true)"
        if [[ "$cmd" == *"$STATE_DIR/ray"* || "$cwd" == "$STATE_DIR" || "$cwd" == "$STATE_DIR"/* ]]; then
            return 0
        fi
    done
    return 1
}

stop_node() {
    local name="$1" pid_file="$2" pid
    pid="$(cat "$pid_file" 2>/dev/null || true)"
    if [[ -z "$pid" ]]; then
        rm -f "$pid_file"
        return 0
    fi
    # The group id is the leader's pid (launch_detached starts a new session). Members can
    # outlive the leader, so the group is handled even when the leader is gone.
    if is_our_ray_start "$pid"; then
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
    elif group_is_ours "$pid"; then
        log "$name: leader $pid is gone, its process group is not"
    else
        log "$name (pid $pid) is not running"
        rm -f "$pid_file"
        return 0
    fi
    if ! wait_group_gone "$pid" "$GRACE"; then
        if group_is_ours "$pid"; then
            log "$name: process group $pid still alive after ${GRACE}s: SIGTERM to the group"
            kill -TERM -- "-$pid" 2>/dev/null || true
        fi
        if ! wait_group_gone "$pid" 10 && group_is_ours "$pid"; then
            log "$name: SIGKILL to process group $pid"
            kill -KILL -- "-$pid" 2>/dev/null || true
            wait_group_gone "$pid" 5 || log "WARNING: process group $pid survived SIGKILL"
        fi
    fi
    rm -f "$pid_file"
}

# Processes outside the recorded groups that belong to this cluster: Ray processes whose
# command line names a node's temp dir (<state>/ray, <state>/ray-wN), and job drivers running
# in a job's working-dir copy (Ray's own watcher normally kills those once their supervisor
# dies). Never this script or its parents.
stray_pids() {
    local pid cwd cmd
    for proc in /proc/[0-9]*; do
        pid="${proc#/proc/}"
        [[ "$pid" == "$$" || "$pid" == "$PPID" ]] && continue
        cwd="$(readlink "$proc/cwd" 2>/dev/null || true)"
        cmd="$(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null || true)"
        if [[ "$cwd" == "$STATE_DIR"/ray*/session_*/runtime_resources/* || "$cmd" == *"$STATE_DIR/ray"* ]] &&
            has_cluster_tag "$pid"; then
            echo "$pid"
        fi
    done
}

shopt -s nullglob
for pid_file in "$STATE_DIR"/worker-*.pid; do
    name="$(basename "$pid_file" .pid)"
    stop_node "worker node ${name#worker-}" "$pid_file"
done
if [[ -f "$STATE_DIR/head.pid" ]]; then
    stop_node "head" "$STATE_DIR/head.pid"
fi

strays="$(stray_pids)"
if [[ -n "$strays" ]]; then
    log "killing leftover processes of this cluster: $(echo $strays)"
    # shellcheck disable=SC2086
    kill -TERM $strays 2>/dev/null || true
    sleep 3
    strays="$(stray_pids)"
    # shellcheck disable=SC2086
    [[ -z "$strays" ]] || kill -KILL $strays 2>/dev/null || true
fi

rm -f "$STATE_DIR/cluster.env"
if ((KEEP_LOGS)); then
    echo "stopped; logs kept in $STATE_DIR (head.log, ray/session_latest/logs)"
elif [[ "$STATE_DIR" == / || "$STATE_DIR" == "$HOME" ]] || [[ ! -e "$STATE_DIR/head.log" && ! -d "$STATE_DIR/ray" ]]; then
    echo "stopped; not removing $STATE_DIR: it does not look like a state dir of start.sh" >&2
else
    rm -rf "$STATE_DIR"
    echo "stopped; removed $STATE_DIR"
fi
