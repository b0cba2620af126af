#!/usr/bin/env bash
# Start a local Ray head (and optionally one extra worker node) for ftplat, with the dashboard
# and the job server on 127.0.0.1 and token authentication on. Prints the address and the
# exact `ray job submit` command. Stop it with cluster/local/stop.sh (never `ray stop`, which
# kills every Ray cluster on the host).
#
#   cluster/local/start.sh                              # head: all cores, 2 GB object store
#   cluster/local/start.sh --num-cpus 4 --worker        # head + a 2-CPU worker node
#   cluster/local/start.sh --random-ports --state-dir /tmp/r2   # a second, private cluster
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=_common.sh
source "$HERE/_common.sh"

usage() {
    cat <<EOF
usage: cluster/local/start.sh [options]

  --state-dir DIR             pid files, logs and Ray's temp dir (default $FTPLAT_DEFAULT_STATE_DIR;
                              env FTPLAT_RAY_STATE_DIR); keep it short: Ray's socket paths live under it
  --port N                    GCS port (default 6379)
  --dashboard-host HOST       dashboard + job API bind address (default 127.0.0.1)
  --dashboard-port N          dashboard + job API port (default 8265)
  --client-port N             Ray Client server port (default 10001)
  --dashboard-agent-port N    dashboard agent HTTP port (default 52365)
  --random-ports              pick free ports for all four ports above
  --node-ip-address IP        this node's address in the cluster (default: what Ray detects;
                              Ray never uses 127.0.0.1 here, only the dashboard is on loopback)
  --num-cpus N                logical CPUs of the head (default: this machine's cores)
  --num-gpus N                GPUs of the head (default: what Ray detects)
  --object-store-memory BYTES object store of the head (default 2000000000)
  --worker                    also start one worker node on this box (cluster/local/add_worker.sh)
  --worker-num-cpus N         its logical CPUs (default 2)
  --worker-num-gpus N         its GPUs (default 0)
  --worker-object-store-memory BYTES   (default 1000000000)
  --timeout SECONDS           wait this long for the job server (default 120)
  -h, --help

Auth: RAY_AUTH_MODE=token for every process. The token is read from \$RAY_AUTH_TOKEN, else the
file \$RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token (generated here when missing).
EOF
}

STATE_DIR="$FTPLAT_DEFAULT_STATE_DIR"
PORT=6379
DASHBOARD_HOST=127.0.0.1
DASHBOARD_PORT=8265
CLIENT_PORT=10001
AGENT_PORT=52365
RANDOM_PORTS=0
NODE_IP=""
# nproc follows OMP_NUM_THREADS (1 in many ML shells), which would give the head one CPU.
NUM_CPUS="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
NUM_GPUS=""
OBJECT_STORE_MEMORY=2000000000
WORKER=0
WORKER_ARGS=()
TIMEOUT=120

while [[ $# -gt 0 ]]; do
    case "$1" in
        --state-dir) STATE_DIR="$2"; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --dashboard-host) DASHBOARD_HOST="$2"; shift 2 ;;
        --dashboard-port) DASHBOARD_PORT="$2"; shift 2 ;;
        --client-port) CLIENT_PORT="$2"; shift 2 ;;
        --dashboard-agent-port) AGENT_PORT="$2"; shift 2 ;;
        --random-ports) RANDOM_PORTS=1; shift ;;
        --node-ip-address) NODE_IP="$2"; shift 2 ;;
        --num-cpus) NUM_CPUS="$2"; shift 2 ;;
        --num-gpus) NUM_GPUS="$2"; shift 2 ;;
        --object-store-memory) OBJECT_STORE_MEMORY="$2"; shift 2 ;;
        --worker) WORKER=1; shift ;;
        --worker-num-cpus) WORKER_ARGS+=(--num-cpus "$2"); shift 2 ;;
        --worker-num-gpus) WORKER_ARGS+=(--num-gpus "$2"); shift 2 ;;
        --worker-object-store-memory) WORKER_ARGS+=(--object-store-memory "$2"); shift 2 ;;
        --timeout) TIMEOUT="$2"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
done

mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd -P)"
TEMP_DIR="$STATE_DIR/ray"
# Unix socket paths are limited to 107 bytes; Ray puts
# <temp-dir>/session_<date>_<time>_<usec>_<pid>/sockets/plasma_store; worker nodes use
# <state dir>/ray-wN, a few characters longer.
if ((${#TEMP_DIR} > 40)); then
    die "state dir path too long for Ray's socket paths (${#TEMP_DIR} > 40 chars): $TEMP_DIR"
fi

if [[ -f "$STATE_DIR/head.pid" ]] && is_our_ray_start "$(cat "$STATE_DIR/head.pid")"; then
    die "a head from $STATE_DIR is already running (pid $(cat "$STATE_DIR/head.pid")); run cluster/local/stop.sh --state-dir $STATE_DIR first"
fi
rm -f "$STATE_DIR"/head.pid "$STATE_DIR"/worker-*.pid "$STATE_DIR/cluster.env"

if ((RANDOM_PORTS)); then
    PORT="$(free_port)"
    DASHBOARD_PORT="$(free_port)"
    CLIENT_PORT="$(free_port)"
    AGENT_PORT="$(free_port)"
fi

if [[ "$DASHBOARD_HOST" != "127.0.0.1" && "$DASHBOARD_HOST" != "localhost" ]]; then
    log "WARNING: dashboard-host $DASHBOARD_HOST exposes the dashboard and the job API (which runs"
    log "         arbitrary code) beyond this machine; the auth token is then the only guard."
fi

export RAY_AUTH_MODE=token
export "$CLUSTER_TAG_VAR=$STATE_DIR"  # what stop.sh knows this cluster's processes by
# Local nodes stop at once on SIGTERM (draining is for Ray Serve; it only delays stop.sh).
export RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="${RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S:-0}"
ensure_token
RAY="$(find_ray_bin)"

# The GCS address is fixed before start-up and exported as RAY_ADDRESS to every process of the
# cluster: Ray code that looks the cluster up by itself (Train V2's PlacementGroupCleaner uses
# the state API) otherwise fails with "ConnectionError: Found multiple active Ray instances"
# whenever another Ray runs on this machine.
if [[ -z "$NODE_IP" ]]; then
    NODE_IP="$("$(find_python)" -c 'from ray._private.services import get_node_ip_address; print(get_node_ip_address())')"
fi
GCS_ADDRESS="$NODE_IP:$PORT"
export RAY_ADDRESS="$GCS_ADDRESS"

args=(start --head --block
    --temp-dir="$TEMP_DIR"
    --node-ip-address="$NODE_IP"
    --port="$PORT"
    --include-dashboard=true
    --dashboard-host="$DASHBOARD_HOST"
    --dashboard-port="$DASHBOARD_PORT"
    --ray-client-server-port="$CLIENT_PORT"
    --dashboard-agent-listen-port="$AGENT_PORT"
    --num-cpus="$NUM_CPUS"
    --object-store-memory="$OBJECT_STORE_MEMORY"
    --disable-usage-stats
    --log-color=false)
if [[ -n "$NUM_GPUS" ]]; then
    args+=(--num-gpus="$NUM_GPUS")
fi

log "starting the Ray head (state dir $STATE_DIR)"
launch_detached "$STATE_DIR/head.log" "$RAY" "${args[@]}"
echo "$LAUNCHED_PID" >"$STATE_DIR/head.pid"

DASHBOARD_URL="http://$DASHBOARD_HOST:$DASHBOARD_PORT"
if [[ "$DASHBOARD_HOST" == "0.0.0.0" ]]; then
    DASHBOARD_URL="http://127.0.0.1:$DASHBOARD_PORT"
fi
rc=0
wait_http_ok "$DASHBOARD_URL/api/jobs/" "$LAUNCHED_PID" "$TIMEOUT" || rc=$?
if ((rc != 0)); then
    tail -n 30 "$STATE_DIR/head.log" >&2 || true
    "$HERE/stop.sh" --state-dir "$STATE_DIR" >&2 || true
    if ((rc == 2)); then
        die "the Ray head exited during start-up (log: $STATE_DIR/head.log)"
    fi
    die "the job server did not answer on $DASHBOARD_URL within ${TIMEOUT}s (log: $STATE_DIR/head.log)"
fi

# The job server answers before the raylet is up; `ray start` then prints "Ray runtime
# started." and "ray start --address='<node ip>:<port>'" (the GCS address for joining nodes).
deadline=$((SECONDS + TIMEOUT))
until grep -q "Ray runtime started" "$STATE_DIR/head.log" 2>/dev/null; do
    if ! pid_alive "$LAUNCHED_PID" || ((SECONDS > deadline)); then
        tail -n 30 "$STATE_DIR/head.log" >&2 || true
        "$HERE/stop.sh" --state-dir "$STATE_DIR" >&2 || true
        die "the Ray head did not finish starting (log: $STATE_DIR/head.log)"
    fi
    sleep 1
done
PRINTED_ADDRESS="$(sed -n "s/.*ray start --address='\([^']*\)'.*/\1/p" "$STATE_DIR/head.log" | head -n 1)"
if [[ "$PRINTED_ADDRESS" != "$GCS_ADDRESS" ]]; then
    log "WARNING: ray start reports the address '$PRINTED_ADDRESS', expected $GCS_ADDRESS"
fi

{
    echo "# Written by cluster/local/start.sh for add_worker.sh and you; stop.sh deletes it."
    printf '%s=%q\n' HEAD_PID "$LAUNCHED_PID" GCS_ADDRESS "$GCS_ADDRESS" \
        DASHBOARD_URL "$DASHBOARD_URL" TEMP_DIR "$TEMP_DIR" CLIENT_PORT "$CLIENT_PORT" \
        TOKEN_PATH "$(default_token_path)" TOKEN_FROM_ENV "$([[ -n "${RAY_AUTH_TOKEN:-}" ]] && echo 1 || echo 0)"
} >"$STATE_DIR/cluster.env"

if ((WORKER)); then
    "$HERE/add_worker.sh" --state-dir "$STATE_DIR" ${WORKER_ARGS[@]+"${WORKER_ARGS[@]}"} --quiet
fi

# How to submit: the token env vars only when they differ from the defaults.
AUTH_ENV="RAY_AUTH_MODE=token"
if [[ -n "${RAY_AUTH_TOKEN_PATH:-}" ]]; then
    AUTH_ENV="$AUTH_ENV RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH"
fi
TOKEN_WHERE="$(default_token_path)"
if [[ -n "${RAY_AUTH_TOKEN:-}" ]]; then
    TOKEN_WHERE="the RAY_AUTH_TOKEN this script was started with; export it for clients and add_worker.sh"
fi
# The first job: the CPU recipe, on the offline copies beside the checkout when they are there,
# else on the hub. A job runs in an uploaded copy of the repository that Ray deletes after it:
# model, data, storage and the MLflow store are given as absolute paths outside it.
SHARED="$(cd "$REPO/.." && pwd)/shared"
MODEL="sentence-transformers/all-MiniLM-L6-v2"
DATA="stanfordnlp/imdb"
if [[ -d "$SHARED/models/all-MiniLM-L6-v2" && -d "$SHARED/data/imdb" ]]; then
    MODEL="$SHARED/models/all-MiniLM-L6-v2"
    DATA="$SHARED/data/imdb"
fi
RESULTS="$HOME/ftplat_results"
STOP_ARGS=""
if [[ "$STATE_DIR" != "$FTPLAT_DEFAULT_STATE_DIR" ]]; then
    STOP_ARGS=" --state-dir $STATE_DIR"
fi

cat <<EOF

Ray cluster is up.
  Dashboard + job API  $DASHBOARD_URL   (the UI asks once for the token: $TOKEN_WHERE)
  GCS address          $GCS_ADDRESS     (RAY_ADDRESS for drivers on this box; ray start --address for nodes)
  Logs                 $TEMP_DIR/session_latest/logs
  State                $STATE_DIR

Submit a sweep (from the repository root, $REPO):

  $AUTH_ENV ray job submit --address $DASHBOARD_URL \\
      --submission-id "imdb-local-\$(date +%Y%m%d-%H%M%S)" \\
      --working-dir . --runtime-env cluster/local/runtime_env.yaml \\
      -- env FTPLAT_GIT_COMMIT=\$(git rev-parse HEAD) python jobs/imdb_sweep.py --config jobs/configs/imdb_cpu.yaml \\
         --search-space search_spaces/imdb_cpu.yaml --name "imdb-local-\$(date +%Y%m%d-%H%M%S)" \\
         --model $MODEL --dataset $DATA \\
         --storage $RESULTS tracking.tracking_uri=sqlite:///$RESULTS/mlflow.db

  $AUTH_ENV ray job list --address $DASHBOARD_URL
  $AUTH_ENV ray job logs --address $DASHBOARD_URL <submission id> --follow
  $AUTH_ENV ray status --address $GCS_ADDRESS

Add a worker node:  cluster/local/add_worker.sh$STOP_ARGS --num-cpus 2
Stop this cluster:  cluster/local/stop.sh$STOP_ARGS
EOF
