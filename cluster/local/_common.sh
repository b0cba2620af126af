# Shared helpers for cluster/local/{start,add_worker,stop}.sh. Sourced, not executed.
#
# Every local cluster lives in one state directory (default /tmp/ftplat-ray-<uid>):
#   head.pid / head.log        the `ray start --head --block` process (its own session and
#                              process group) and its output
#   worker-N.pid / worker-N.log   extra worker nodes on this box (add_worker.sh)
#   cluster.env                addresses of the running cluster, sourced by the scripts
#   ray/                       the head's Ray --temp-dir: session_*/logs, sockets, job working dirs
#   ray-wN/                    worker node N's --temp-dir (nodes must not share one)
# stop.sh only ever signals the process groups recorded here and processes whose working
# directory or command line lies under this directory: never a bare `ray stop`.

FTPLAT_DEFAULT_STATE_DIR="${FTPLAT_RAY_STATE_DIR:-/tmp/ftplat-ray-$(id -u)}"

die() {
    echo "error: $*" >&2
    exit 1
}

log() {
    echo "[$(date +%H:%M:%S)] $*" >&2
}

# The `ray` CLI next to the python that has ray installed (override with RAY_BIN).
find_ray_bin() {
    if [[ -n "${RAY_BIN:-}" ]]; then
        echo "$RAY_BIN"
    elif command -v ray >/dev/null 2>&1; then
        command -v ray
    else
        die "the 'ray' command is not on PATH (pip install -e '.[dev]' or set RAY_BIN)"
    fi
}

find_python() {
    if [[ -n "${PYTHON:-}" ]]; then
        echo "$PYTHON"
    elif command -v python >/dev/null 2>&1; then
        command -v python
    else
        command -v python3 || die "no python on PATH (set PYTHON)"
    fi
}

# Token auth (on by default in Ray 2.60) stays on: every process of the cluster, and every
# client, runs with RAY_AUTH_MODE=token and reads the same token file.
default_token_path() {
    echo "${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token}"
}

ensure_token() {
    local path
    path="$(default_token_path)"
    if [[ -n "${RAY_AUTH_TOKEN:-}" ]]; then
        return 0 # the token itself is in the environment
    fi
    if [[ ! -s "$path" ]]; then
        log "no auth token at $path: generating one"
        mkdir -p "$(dirname "$path")"
        (umask 077 && "$(find_python)" -c 'import secrets; print(secrets.token_hex(32), end="")' >"$path")
    fi
}

# Print a free TCP port on 127.0.0.1 (the kernel picks it; a race is possible but rare).
free_port() {
    "$(find_python)" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Start "$@" in a new session (pid == process group id == session id), output to $LOG.
# Sets LAUNCHED_PID. The cwd is the state directory, so a job submitted without
# --working-dir also runs under it (and stop.sh finds it).
launch_detached() {
    local log_file="$1"
    shift
    (cd "$STATE_DIR" && exec "$(find_python)" -c \
        'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' "$@" \
        </dev/null >"$log_file" 2>&1) &
    LAUNCHED_PID=$!
}

pid_alive() {
    [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null
}

# True when $1 is a `ray start` process that belongs to this state directory (guards against
# a recycled pid).
is_our_ray_start() {
    local pid="$1" cmd
    pid_alive "$pid" || return 1
    cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmd" == *" start "* && "$cmd" == *"--temp-dir=$STATE_DIR/ray"* ]]
}

# Every process of a cluster started here inherits FTPLAT_CLUSTER_STATE_DIR=<its state dir>
# (Ray's daemons, workers and the job drivers they start), which stop.sh looks for: a shell or
# a `tail` of its logs mentions the state dir too, but never carries the variable.
CLUSTER_TAG_VAR=FTPLAT_CLUSTER_STATE_DIR

# True when process $1's environment carries this state dir's tag.
has_cluster_tag() {
    local environ="/proc/$1/environ"
    [[ -r "$environ" ]] && tr '\0' '\n' <"$environ" 2>/dev/null | grep -qxF "$CLUSTER_TAG_VAR=$STATE_DIR"
}

# Pids (one per line) in process group $1.
group_pids() {
    ps -eo pid=,pgid= | awk -v g="$1" '$2 == g { print $1 }'
}

# Wait until HTTP $1 answers 200 with the bearer token, the launched pid $2 still alive.
wait_http_ok() {
    local url="$1" pid="$2" timeout="$3"
    "$(find_python)" - "$url" "$pid" "$timeout" "$(default_token_path)" <<'PY'
import os, sys, time, urllib.error, urllib.request

url, pid, timeout, token_path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
token = os.environ.get("RAY_AUTH_TOKEN") or open(token_path).read().strip()
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(2)
    try:
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            if resp.status == 200:
                sys.exit(0)
    except (urllib.error.URLError, OSError):
        pass
    time.sleep(1)
sys.exit(1)
PY
}
