"""Static checks of cluster/: every YAML parses, the recipes agree with each other, with the
image that cluster/docker builds and with the job config they run, and the scripts are sound.
Nothing here needs Kubernetes, AWS, Docker or a Ray cluster."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "cluster"
DOCKERFILE = CLUSTER / "docker" / "Dockerfile"
BUILD_SH = CLUSTER / "docker" / "build.sh"
RAYCLUSTER = CLUSTER / "kuberay" / "raycluster.yaml"
RAYJOB = CLUSTER / "kuberay" / "rayjob-sweep.yaml"
LAUNCHER = CLUSTER / "launcher" / "aws-gpu.yaml"
RUNTIME_ENV = CLUSTER / "local" / "runtime_env.yaml"

YAML_FILES = sorted(p for p in CLUSTER.rglob("*") if p.suffix in {".yaml", ".yml"})
SCRIPTS = sorted(CLUSTER.rglob("*.sh"))
LOOPBACK = {"127.0.0.1", "localhost"}


def load_one(path: Path) -> dict:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1, f"{path}: expected one YAML document, got {len(docs)}"
    return docs[0]


def project_version() -> str:
    match = re.search(r'^version\s*=\s*"([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert match, "no version in pyproject.toml"
    return match.group(1)


def image_repo() -> str:
    match = re.search(r'^IMAGE_REPO="\$\{IMAGE_REPO:-([^}]+)\}"', BUILD_SH.read_text(), re.M)
    assert match, "cluster/docker/build.sh must set IMAGE_REPO=\"${IMAGE_REPO:-<default>}\""
    return match.group(1)


def expected_image(variant: str) -> str:
    return f"{image_repo()}:{project_version()}-{variant}"


def ray_cluster_specs() -> dict[str, dict]:
    """The RayClusterSpecs: raycluster.yaml's spec and the RayJob's rayClusterSpec."""
    cluster, job = load_one(RAYCLUSTER), load_one(RAYJOB)
    return {"raycluster": cluster["spec"], "rayjob": job["spec"]["rayClusterSpec"]}


def group_containers(group: dict) -> list[dict]:
    return group["template"]["spec"]["containers"]


def parse_quantity(value) -> float:
    """Kubernetes CPU quantities: "8", 8, "500m"."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def shell_code_lines(path: Path) -> list[str]:
    """The lines of a shell script that are not comments (heredoc text included: conservative)."""
    return [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]


# --- every file parses -------------------------------------------------------------------


def test_cluster_dir_has_the_recipes():
    for path in (DOCKERFILE, BUILD_SH, RAYCLUSTER, RAYJOB, LAUNCHER, RUNTIME_ENV,
                 CLUSTER / "local" / "start.sh", CLUSTER / "local" / "stop.sh",
                 CLUSTER / "local" / "add_worker.sh", CLUSTER / "README.md"):
        assert path.is_file(), path


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_yaml_parses(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs and all(isinstance(d, dict) for d in docs)


def test_kuberay_kinds_and_api_version():
    assert load_one(RAYCLUSTER)["apiVersion"] == "ray.io/v1" and load_one(RAYCLUSTER)["kind"] == "RayCluster"
    assert load_one(RAYJOB)["apiVersion"] == "ray.io/v1" and load_one(RAYJOB)["kind"] == "RayJob"
    for name, spec in ray_cluster_specs().items():
        assert spec["rayVersion"].startswith("2.60"), name


def test_launcher_config_matches_rays_schema():
    jsonschema = pytest.importorskip("jsonschema")
    import ray.autoscaler

    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(load_one(LAUNCHER), schema)


# --- images ------------------------------------------------------------------------------


def collect_images() -> dict[str, str]:
    images = {}
    for name, spec in ray_cluster_specs().items():
        for c in group_containers(spec["headGroupSpec"]):
            images[f"{name}/head/{c['name']}"] = c["image"]
        for group in spec["workerGroupSpecs"]:
            for c in group_containers(group):
                images[f"{name}/{group['groupName']}/{c['name']}"] = c["image"]
    docker = load_one(LAUNCHER)["docker"]
    for key in ("image", "head_image", "worker_image"):
        if key in docker:
            images[f"launcher/{key}"] = docker[key]
    return images


def test_images_are_the_ones_the_dockerfile_builds():
    allowed = {expected_image("cpu"), expected_image("gpu")}
    images = collect_images()
    assert images
    for where, image in images.items():
        assert image in allowed, f"{where}: {image} is not built by cluster/docker/build.sh ({sorted(allowed)})"


def test_gpu_nodes_run_the_gpu_image_and_a_cluster_runs_one_image():
    for name, spec in ray_cluster_specs().items():
        images = {c["image"] for g in [spec["headGroupSpec"], *spec["workerGroupSpecs"]] for c in group_containers(g)}
        assert len(images) == 1, f"{name}: mixed images {images} (Ray/Python/ftplat versions must match)"
        for group in spec["workerGroupSpecs"]:
            for c in group_containers(group):
                if "nvidia.com/gpu" in c["resources"].get("limits", {}):
                    assert c["image"] == expected_image("gpu"), f"{name}/{group['groupName']}"
    assert load_one(LAUNCHER)["docker"]["image"] == expected_image("gpu")


def test_dockerfile_installs_the_project():
    text = DOCKERFILE.read_text()
    steps = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    torch_at = next(i for i, s in enumerate(steps) if re.search(r"pip install .*torch==", s))
    project_at = next(i for i, s in enumerate(steps) if re.search(r"pip install (--no-deps )?\.( |$)", s))
    assert torch_at < project_at, "PyTorch must be installed before the project (or pip pulls another build)"
    assert "download.pytorch.org/whl/cpu" in text
    # Every COPY source exists (docker build fails otherwise) and lies in the build context filter.
    for line in steps:
        if line.startswith("COPY"):
            sources = [t for t in line.split()[1:-1] if not t.startswith("--")]
            for source in sources:
                assert (REPO / source).exists(), f"Dockerfile copies {source}, which does not exist"
    assert "WORKDIR /home/ray/ftplat" in text
    ignore = (CLUSTER / "docker" / "Dockerfile.dockerignore").read_text()
    for needed in ("pyproject.toml", "README.md", "platform/", "jobs/", "search_spaces/", "cluster/"):
        assert f"!{needed}" in ignore, needed


# --- resources ---------------------------------------------------------------------------


def test_containers_request_what_they_limit():
    for name, spec in ray_cluster_specs().items():
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            for c in group_containers(group):
                res = c["resources"]
                for key in ("cpu", "memory", "nvidia.com/gpu"):
                    if key in res.get("limits", {}) or key in res.get("requests", {}):
                        assert str(res["limits"][key]) == str(res["requests"][key]), f"{name}/{c['name']}/{key}"


def test_gpu_worker_groups_are_consistent():
    for name, spec in ray_cluster_specs().items():
        gpu_groups = [g for g in spec["workerGroupSpecs"]
                      if any("nvidia.com/gpu" in c["resources"].get("limits", {}) for c in group_containers(g))]
        assert gpu_groups, f"{name}: no worker group requests nvidia.com/gpu"
        for group in gpu_groups:
            (container,) = group_containers(group)
            limits = container["resources"]["limits"]
            params = group["rayStartParams"]
            assert int(params["num-gpus"]) == int(limits["nvidia.com/gpu"]) >= 1, f"{name}/{group['groupName']}"
            assert parse_quantity(params["num-cpus"]) <= parse_quantity(limits["cpu"]), f"{name}/{group['groupName']}"
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
            tolerations = group["template"]["spec"].get("tolerations", [])
            assert any(t.get("key") == "nvidia.com/gpu" for t in tolerations), "GPU nodes are usually tainted"
        head = spec["headGroupSpec"]
        (head_container,) = group_containers(head)
        assert "nvidia.com/gpu" not in head_container["resources"].get("limits", {}), "the head is CPU-only"
        assert str(head["rayStartParams"].get("num-cpus")) == "0", "trials must not land on the head"


def test_launcher_resources_match_its_start_commands():
    cfg = load_one(LAUNCHER)
    nodes = cfg["available_node_types"]
    head = nodes[cfg["head_node_type"]]
    assert head["resources"].get("CPU") == 0 and "GPU" not in head["resources"]
    assert "--num-cpus=0" in " ".join(cfg["head_start_ray_commands"])
    gpu_types = {n: t for n, t in nodes.items() if t["resources"].get("GPU", 0) >= 1}
    assert gpu_types, "no GPU node type"
    worker_start = " ".join(cfg["worker_start_ray_commands"])
    for name, node in gpu_types.items():
        res = node["resources"]
        assert f"--num-gpus={res['GPU']}" in worker_start and f"--num-cpus={res['CPU']}" in worker_start, name
        assert node["max_workers"] <= cfg["max_workers"]


def trial_needs(entrypoint: str) -> tuple[float, float]:
    """CPUs and GPUs of one trial of the sweep an entrypoint runs (loaded like the CLI does)."""
    from ftplat.cli.sweep import build_overrides, build_parser
    from ftplat.config.loading import load_sweep_configs

    argv = shlex.split(entrypoint)
    args = build_parser().parse_args(argv[2:])
    job, _ = load_sweep_configs(args.config, args.search_space, build_overrides(args))
    gpus = job.resources.num_workers * job.resources.gpus_per_worker if job.resources.use_gpu else 0.0
    return job.resources.cpus_per_trial, gpus


# --- the RayJob's entrypoint -------------------------------------------------------------


def test_rayjob_entrypoint_runs_a_valid_sweep(monkeypatch):
    spec = load_one(RAYJOB)["spec"]
    argv = shlex.split(spec["entrypoint"])
    assert argv[:2] == ["python", "jobs/imdb_sweep.py"]
    assert (REPO / argv[1]).is_file()
    for flag in ("--config", "--search-space"):
        if flag in argv:
            assert (REPO / argv[argv.index(flag) + 1]).is_file(), flag
    storage = [a for a in argv if a.startswith(("storage.storage_path=", "--storage"))]
    assert storage and "s3://" in spec["entrypoint"], "multi-node sweeps need shared storage (S3)"
    # The job config and search space load and validate, as the CLI would load them.
    monkeypatch.chdir(REPO)
    cpus, gpus = trial_needs(spec["entrypoint"])
    # One trial fits on one GPU worker (its driver and all its Ray Train workers).
    for name, cluster in ray_cluster_specs().items():
        fits = [g for g in cluster["workerGroupSpecs"]
                if parse_quantity(g["rayStartParams"]["num-cpus"]) >= cpus
                and float(g["rayStartParams"].get("num-gpus", 0)) >= gpus]
        assert fits, f"{name}: no worker group fits a trial ({cpus} CPUs, {gpus} GPUs)"


def test_job_recipes_give_ray_job_stop_time_for_the_orderly_stop():
    """Ray kills a stopped job's driver RAY_JOB_STOP_WAIT_TIME_S after its SIGTERM (3 s by
    default), before the sweep has saved Tune's state, stopped its trials and marked its MLflow
    runs KILLED; each recipe that submits a job gives it a minute."""
    rayjob_env = yaml.safe_load(load_one(RAYJOB)["spec"]["runtimeEnvYAML"])["env_vars"]
    local_env = load_one(RUNTIME_ENV)["env_vars"]
    for where, env in (("rayjob-sweep.yaml", rayjob_env), ("local/runtime_env.yaml", local_env)):
        assert int(env["RAY_JOB_STOP_WAIT_TIME_S"]) >= 60, where
    for doc in (LAUNCHER, CLUSTER / "README.md"):
        submits = re.findall(r"--runtime-env-json '([^']*)'", doc.read_text().replace("\n#", "").replace("#  ", ""))
        assert submits, doc
        for text in submits:
            env = json.loads(re.sub(r"\s+", " ", text)).get("env_vars", {})
            assert int(env.get("RAY_JOB_STOP_WAIT_TIME_S", 0)) >= 60, (doc, text)


def test_the_rayjob_tracks_to_a_server_not_the_head_pods_disk():
    """The RayJob deletes its head pod with the cluster: a sqlite file there would go with it."""
    argv = shlex.split(load_one(RAYJOB)["spec"]["entrypoint"])
    tracking = [a.split("=", 1)[1] for a in argv if a.startswith("tracking.tracking_uri=")]
    assert tracking and tracking[0].startswith(("http://", "https://")), tracking


def test_rayjob_runs_in_the_images_project_dir():
    spec = load_one(RAYJOB)["spec"]
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    workdir = re.search(r"^WORKDIR\s+(\S+)", DOCKERFILE.read_text(), re.M).group(1)
    assert runtime_env["working_dir"] == f"local://{workdir}"
    assert spec["shutdownAfterJobFinishes"] is True


def test_rayjob_cluster_is_raycluster_yaml():
    specs = ray_cluster_specs()
    assert specs["rayjob"] == specs["raycluster"], "keep rayjob-sweep.yaml's rayClusterSpec a copy of raycluster.yaml"


# --- auth, dashboard exposure, storage secrets ------------------------------------------


def test_token_auth_is_on_everywhere():
    for name, spec in ray_cluster_specs().items():
        assert spec["authOptions"]["mode"] == "token", name
    cfg = load_one(LAUNCHER)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in cfg[key] if "ray start" in c]
        assert start and all("RAY_AUTH_MODE=token" in c for c in start), key
    assert "~/.ray/auth_token" in cfg["file_mounts"].values()
    assert yaml.safe_load(RUNTIME_ENV.read_text())["env_vars"]["RAY_AUTH_MODE"] == "token"
    start_sh = (CLUSTER / "local" / "start.sh").read_text()
    assert "export RAY_AUTH_MODE=token" in start_sh and "RAY_AUTH_MODE=disabled" not in start_sh


def dashboard_hosts() -> list[tuple[Path, str]]:
    hosts = []
    for name, spec in ray_cluster_specs().items():
        hosts.append((RAYCLUSTER if name == "raycluster" else RAYJOB,
                      str(spec["headGroupSpec"]["rayStartParams"].get("dashboard-host", "127.0.0.1"))))
    for cmd in load_one(LAUNCHER)["head_start_ray_commands"]:
        for match in re.finditer(r"--dashboard-host[= ](\S+)", cmd):
            hosts.append((LAUNCHER, match.group(1)))
    return hosts


def test_dashboard_is_on_loopback_unless_documented():
    readme = (CLUSTER / "README.md").read_text()
    hosts = dashboard_hosts()
    assert hosts
    for path, host in hosts:
        if host in LOOPBACK:
            continue
        assert host == "0.0.0.0", f"{path}: dashboard-host {host}"
        # A comment in the file says why, and the README names the file.
        comments = [line for line in path.read_text().splitlines()
                    if line.lstrip().startswith("#") and "dashboard-host 0.0.0.0" in line]
        assert comments, f"{path}: dashboard-host 0.0.0.0 without a comment explaining it"
        assert path.name in readme and "0.0.0.0" in readme, f"cluster/README.md must document {path.name}"
    # The local scripts default to loopback.
    assert "DASHBOARD_HOST=127.0.0.1" in (CLUSTER / "local" / "start.sh").read_text()


def test_no_secret_values_in_recipes():
    for name, spec in ray_cluster_specs().items():
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            for c in group_containers(group):
                for env in c.get("env", []):
                    if re.search(r"SECRET|TOKEN|PASSWORD|ACCESS_KEY", env["name"]):
                        assert "value" not in env and "secretKeyRef" in env["valueFrom"], f"{name}: {env['name']}"
    for path in YAML_FILES:
        text = path.read_text()
        assert not re.search(r"AKIA[0-9A-Z]{16}", text), f"{path}: looks like an AWS access key id"
        assert not re.search(r"\b[0-9a-f]{64}\b", text), f"{path}: looks like a Ray auth token"


# --- scripts -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_script_passes_bash_n(path):
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_script_is_executable_unless_sourced(path):
    # _common.sh is a library the other scripts source.
    if path.name.startswith("_"):
        assert not os.access(path, os.X_OK), f"{path} is sourced, not run"
        return
    assert os.access(path, os.X_OK), f"{path} is not executable (git update-index --chmod=+x)"
    assert path.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in path.read_text()


def test_local_scripts_never_run_a_bare_ray_stop():
    # `ray stop` kills every Ray on the machine; stop.sh stops only its own cluster.
    for path in sorted((CLUSTER / "local").glob("*.sh")):
        for line in shell_code_lines(path):
            code = line.split("#", 1)[0]
            assert not re.search(r"\bray\s+stop\b", code.replace('"$RAY"', "ray")), f"{path}: {line.strip()}"
            assert not re.search(r"\b(pkill|killall)\b", code), f"{path}: {line.strip()}"


def test_scripts_help_exits_zero():
    for name in ("start.sh", "stop.sh", "add_worker.sh"):
        result = subprocess.run([str(CLUSTER / "local" / name), "--help"], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0 and "usage" in result.stdout, name


def test_start_sh_rejects_a_state_dir_too_long_for_ray_sockets(tmp_path):
    long_dir = tmp_path / ("x" * 60)
    result = subprocess.run([str(CLUSTER / "local" / "start.sh"), "--state-dir", str(long_dir)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "too long" in result.stderr


def test_stop_sh_without_a_cluster_is_a_no_op(tmp_path):
    result = subprocess.run([str(CLUSTER / "local" / "stop.sh"), "--state-dir", str(tmp_path / "none")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "nothing to stop" in result.stdout


def test_add_worker_needs_the_token_a_head_was_started_with_from_the_environment(tmp_path):
    """A head started with RAY_AUTH_TOKEN records only the default token path, which may hold
    another token or none: the node would fail to join with Ray's authentication error."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "cluster.env").write_text(f"HEAD_PID={os.getpid()}\nGCS_ADDRESS=127.0.0.1:1\n"
                                       f"TOKEN_PATH={tmp_path / 'none'}\nTOKEN_FROM_ENV=1\n")
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"}
    result = subprocess.run([str(CLUSTER / "local" / "add_worker.sh"), "--state-dir", str(state)],
                            capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == ("error: the head was started with RAY_AUTH_TOKEN set; export the same "
                                     "RAY_AUTH_TOKEN and run add_worker.sh again")


def test_runtime_env_puts_the_uploaded_platform_on_pythonpath():
    env = yaml.safe_load(RUNTIME_ENV.read_text())
    assert env["env_vars"]["PYTHONPATH"] == "platform"
    # Ray's upload honours .gitignore only; the GPU sessions' bundles are excluded locally
    assert ".gpu/" in env["excludes"] and "**/.gpu" in load_one(LAUNCHER)["rsync_exclude"]
    assert (REPO / "platform" / "ftplat" / "__init__.py").is_file()
    assert not (REPO / "platform" / "__init__.py").exists()


def test_stop_sh_kills_this_clusters_leftovers_but_not_a_tail_of_its_logs(tmp_path):
    """A process is this cluster's when it carries the tag start.sh exports to the cluster; a
    user's `tail -f` of the logs the README points at names the state dir too, and must live."""
    import time

    state = tmp_path / "state"
    logs = state / "ray" / "session_latest" / "logs"
    logs.mkdir(parents=True)
    (state / "head.log").write_text("")
    (logs / "raylet.out").write_text("")
    tail = subprocess.Popen(["tail", "-f", str(logs / "raylet.out")])
    leftover = subprocess.Popen(["bash", "-c", f'exec -a "raylet --temp-dir={state}/ray" sleep 300'],
                                env={**os.environ, "FTPLAT_CLUSTER_STATE_DIR": str(state.resolve())})
    try:
        time.sleep(0.3)
        result = subprocess.run([str(CLUSTER / "local" / "stop.sh"), "--state-dir", str(state)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert leftover.wait(timeout=10) is not None  # killed
        assert tail.poll() is None, "stop.sh killed a tail of the cluster's logs"
    finally:
        for proc in (tail, leftover):
            if proc.poll() is None:
                proc.kill()
