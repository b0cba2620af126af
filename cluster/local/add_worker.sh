#!/usr/bin/env bash
# Add a worker node, on this machine, to the cluster that cluster/local/start.sh started:
# a second raylet with its own logical resources, so multi-node placement (trials spread over
# nodes, storage that every node must see) can be tried on one box. Run it again for more nodes.
#
#   cluster/local/add_worker.sh --num-cpus 2 --object-store-memory 1000000000
#   cluster/local/add_worker.sh --num-gpus 1 --resources '{"big_gpu": 1}'
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=_common.sh
source "$HERE/_common.sh"

usage() {
    cat <<EOF
usage: cluster/local/add_worker.sh [options]

  --state-dir DIR             the head's state dir (default $FTPLAT_DEFAULT_STATE_DIR)
  --num-cpus N                logical CPUs of this node (default 2)
  --num-gpus N                GPUs of this node (default 0)
  --object-store-memory BYTES (default 1000000000)
  --resources JSON            custom resources, e.g. '{"worker_node": 1}'
  --timeout SECONDS           wait this long for the node to join (default 90)
  --quiet                     no progress messages (the summary line is still printed)
EOF
}

STATE_DIR="$FTPLAT_DEFAULT_STATE_DIR"
NUM_CPUS=2
NUM_GPUS=0
OBJECT_STORE_MEMORY=1000000000
RESOURCES=""
TIMEOUT=90
QUIET=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --state-dir) STATE_DIR="$2"; shift 2 ;;
        --num-cpus) NUM_CPUS="$2"; shift 2 ;;
        --num-gpus) NUM_GPUS="$2"; shift 2 ;;
        --object-store-memory) OBJECT_STORE_MEMORY="$2"; shift 2 ;;
        --resources) RESOURCES="$2"; shift 2 ;;
        --timeout) TIMEOUT="$2"; shift 2 ;;
        --quiet) QUIET=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
done

[[ -d "$STATE_DIR" ]] || die "no state dir $STATE_DIR: start a head with cluster/local/start.sh first"
STATE_DIR="$(cd "$STATE_DIR" && pwd -P)"
[[ -f "$STATE_DIR/cluster.env" ]] || die "no cluster.env in $STATE_DIR: start a head with cluster/local/start.sh first"
# shellcheck disable=SC1091
source "$STATE_DIR/cluster.env"
# The node must use the head's token: the same RAY_AUTH_TOKEN when the head was started with
# one (its recorded TOKEN_PATH is then only the default, which may hold another token or none),
# else the token file the head was started with.
if [[ "${TOKEN_FROM_ENV:-0}" == 1 && -z "${RAY_AUTH_TOKEN:-}" ]]; then
    die "the head was started with RAY_AUTH_TOKEN set; export the same RAY_AUTH_TOKEN and run add_worker.sh again"
fi
is_our_ray_start "$HEAD_PID" || die "the head recorded in $STATE_DIR (pid $HEAD_PID) is not running"

export RAY_AUTH_MODE=token
export "$CLUSTER_TAG_VAR=$STATE_DIR"  # what stop.sh knows this cluster's processes by
# As on the head: Ray code that looks the cluster up by itself must find this one.
export RAY_ADDRESS="$GCS_ADDRESS"
# Local nodes stop at once on SIGTERM (draining is for Ray Serve; it only delays stop.sh).
export RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="${RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S:-0}"
if [[ -z "${RAY_AUTH_TOKEN:-}" ]]; then
    export RAY_AUTH_TOKEN_PATH="$TOKEN_PATH"
fi
RAY="$(find_ray_bin)"

N=1
while [[ -e "$STATE_DIR/worker-$N.pid" ]]; do
    N=$((N + 1))
done
# Each node gets its own temp dir. Nodes on one machine that share a temp dir share
# session_*/runtime_resources too: when the worker node's runtime-env agent drops a job's
# working_dir it deletes the head's copy as well, and the job driver, whose cwd that is, fails
# with "FileNotFoundError: [Errno 2] No such file or directory" (os.getcwd()). Their log
# monitors would also both stream the same worker logs, printing every line twice.
NODE_TEMP_DIR="$STATE_DIR/ray-w$N"
if ((${#NODE_TEMP_DIR} > 44)); then
    die "state dir path too long for Ray's socket paths (${#NODE_TEMP_DIR} > 44 chars): $NODE_TEMP_DIR"
fi

# Nodes on one machine must not share the fixed default ports (dashboard agent 52365);
# the other per-node ports are picked at random by Ray.
args=(start --block
    --address="$GCS_ADDRESS"
    --temp-dir="$NODE_TEMP_DIR"
    --num-cpus="$NUM_CPUS"
    --num-gpus="$NUM_GPUS"
    --object-store-memory="$OBJECT_STORE_MEMORY"
    --dashboard-agent-listen-port="$(free_port)"
    --disable-usage-stats
    --log-color=false)
if [[ -n "$RESOURCES" ]]; then
    args+=(--resources="$RESOURCES")
fi

((QUIET)) || log "starting worker node $N (${NUM_CPUS} CPUs, ${NUM_GPUS} GPUs) joining $GCS_ADDRESS"
launch_detached "$STATE_DIR/worker-$N.log" "$RAY" "${args[@]}"
echo "$LAUNCHED_PID" >"$STATE_DIR/worker-$N.pid"

deadline=$((SECONDS + TIMEOUT))
until grep -q "Ray runtime started" "$STATE_DIR/worker-$N.log" 2>/dev/null; do
    if ! pid_alive "$LAUNCHED_PID"; then
        tail -n 30 "$STATE_DIR/worker-$N.log" >&2 || true
        rm -f "$STATE_DIR/worker-$N.pid"
        die "worker node $N exited during start-up (log: $STATE_DIR/worker-$N.log)"
    fi
    if ((SECONDS > deadline)); then
        tail -n 30 "$STATE_DIR/worker-$N.log" >&2 || true
        die "worker node $N did not join within ${TIMEOUT}s (log: $STATE_DIR/worker-$N.log)"
    fi
    sleep 1
done
((QUIET)) || log "worker node $N joined (pid $LAUNCHED_PID); 'RAY_AUTH_MODE=token ray status --address $GCS_ADDRESS' lists it"
echo "worker node $N: ${NUM_CPUS} CPUs, ${NUM_GPUS} GPUs, pid $LAUNCHED_PID, log $STATE_DIR/worker-$N.log"
