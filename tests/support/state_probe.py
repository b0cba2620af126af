"""Run as a script: start a private cluster while another one runs on the host, and ask Ray's
state API from inside the cluster (as Train V2's PlacementGroupCleaner does) whether one of
its own actors is alive. Prints ``found`` or ``error: ...``; ``plain`` uses a bare
``ray.init(address="local")`` to show what happens without ``run_init_private_cluster``."""

from __future__ import annotations

import subprocess
import sys

import ray

OTHER = ("import ray, time; ray.init(address='local', num_cpus=1, include_dashboard=True, "
         "dashboard_host='127.0.0.1'); print('up', flush=True); time.sleep(300)")


@ray.remote(num_cpus=0)
class Probe:
    def check(self, actor_id: str) -> str:
        from ray.util.state import get_actor

        try:
            actor = get_actor(actor_id, timeout=20)
        except Exception as exc:  # noqa: BLE001 - the probe reports whatever the lookup raised
            return f"error: {type(exc).__name__}"
        return "found" if actor is not None and actor.state == "ALIVE" else "error: not found"


def main(mode: str) -> None:
    other = subprocess.Popen([sys.executable, "-c", OTHER], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "up"
        kwargs = dict(num_cpus=1, include_dashboard=True, dashboard_host="127.0.0.1", logging_level="ERROR")
        if mode == "pinned":
            from ftplat.ray_internals import run_init_private_cluster

            run_init_private_cluster(**kwargs)
        else:
            ray.init(address="local", **kwargs)
        probe = Probe.remote()
        print(ray.get(probe.check.remote(probe._actor_id.hex())), flush=True)
        ray.shutdown()
    finally:
        other.kill()
        other.wait()


if __name__ == "__main__":
    main(sys.argv[1])
