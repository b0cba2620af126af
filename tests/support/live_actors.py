"""The actors alive while a sweep runs, as the dashboard's Actors page lists them, polled from a
thread of the test process. Tests ask during the sweep, not after it: after a sweep, Ray's state
API has at times listed none of its dead trial drivers (seen on this 2-core machine; the GCS
kept the Train controllers and workers of the same trials)."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class SeenActor:
    actor_id: str
    class_name: str
    repr_name: str


def list_live_actors(**filters: str) -> list[SeenActor]:
    from ray.util.state import list_actors

    from ftplat.ray_internals import read_dashboard_url

    # Addressed: with none, the state API looks for any cluster on this host, and may find two.
    alive = list_actors(address=f"http://{read_dashboard_url()}",
                        filters=[("state", "=", "ALIVE"), *((k, "=", v) for k, v in filters.items())],
                        detail=True, limit=1000, raise_on_missing_output=False)
    return [SeenActor(a.actor_id, a.class_name, a.repr_name) for a in alive]


class LiveActors(threading.Thread):
    """``with LiveActors() as live:`` collects in ``live.seen`` every actor seen alive, every
    ``period_s``, until the block ends (and once more then)."""

    def __init__(self, period_s: float = 0.5):
        super().__init__(daemon=True)
        self.period_s, self.seen, self.stop = period_s, set(), threading.Event()

    def poll(self) -> None:
        try:
            self.seen |= set(list_live_actors())
        except Exception:  # noqa: BLE001  (the dashboard not serving yet)
            pass

    def run(self) -> None:
        while not self.stop.wait(self.period_s):
            self.poll()

    def __enter__(self) -> LiveActors:
        self.poll()
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.join()
        self.poll()

    def named(self, class_name: str) -> set[SeenActor]:
        """Actors of ``class_name``, however Ray scoped it (``select_actor_class_name``)."""
        from ftplat.ray_internals import select_actor_class_name

        return {a for a in self.seen if select_actor_class_name(a.class_name) == class_name}
