"""What the cluster has: Ray nodes with GPUs, their GPU type and pool, as model.Node.

Each worker node carries two labels set at ``ray start`` / ``add_node`` time:
``gpu-type`` (e.g. ``v100``; also accepted from the ``accelerator_type:X`` resource)
and ``pool`` (``training`` | ``inference``, default ``training``). Nodes without GPUs
(the head) are not schedulable and are left out. The inventory diffs successive reads
into NodeUp / NodeDown events, so the core hears about joins and departures once.
"""

from __future__ import annotations

import logging
import socket
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import ray

from lyra_ray.contract.labels import GPU_TYPE_LABEL, POOL_LABEL
from lyra_ray.model import Event, Node, NodeDown, NodeUp

log = logging.getLogger(__name__)

_ACCEL_PREFIX = "accelerator_type:"

SWEEP_S = 2.0
"""How often every node's raylet port is knocked on (:meth:`Inventory.refresh`)."""
PROBE_TIMEOUT_S = 1.0

Probe = Literal["listening", "refused", "unknown"]


def probe(addr: tuple[str, int], timeout_s: float = PROBE_TIMEOUT_S) -> Probe:
    """Whether something listens at ``addr``: only a refusal (the host answered, nothing
    listens) is sure; a timeout or any other error says nothing (a busy or distant
    host)."""
    try:
        with socket.create_connection(addr, timeout=timeout_s):
            return "listening"
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "unknown"


def node_from_ray(info: dict[str, Any]) -> tuple[Node, str] | None:
    """A model.Node plus the raw ``gpu-type`` label value, or None if not a GPU node."""
    if not info.get("Alive"):
        return None
    resources = info.get("Resources") or {}
    gpus = int(resources.get("GPU", 0))
    if gpus <= 0:
        return None
    labels = info.get("Labels") or {}
    raw = labels.get(GPU_TYPE_LABEL)
    if raw is None:
        accel = [k[len(_ACCEL_PREFIX) :] for k in resources if k.startswith(_ACCEL_PREFIX)]
        raw = accel[0] if accel else "gpu"
    pool = labels.get(POOL_LABEL, "training")
    if pool not in ("training", "inference"):
        pool = "training"
    return Node(id=info["NodeID"], gpu_type=raw.lower(), num_gpus=gpus, pool=pool), raw


@dataclass
class Inventory:
    """The last seen set of GPU nodes; :meth:`refresh` returns what changed."""

    nodes: dict[str, Node] = field(default_factory=dict)
    gpu_label: dict[str, str] = field(default_factory=dict)
    """node id -> the raw ``gpu-type`` label value (selectors must match it exactly)."""
    raylets: dict[str, tuple[str, int]] = field(default_factory=dict)
    """node id -> its raylet's (address, port), as the last read saw them."""
    condemned: set[str] = field(default_factory=set)
    """Nodes whose raylet surely is gone (:meth:`condemn`) that Ray still lists alive:
    left out of every read until Ray lists them no more."""
    sweep_s: float = SWEEP_S
    """Knock on every node's raylet this often (0: never); see :meth:`_sweep`."""
    reachable: set[str] = field(default_factory=set)
    """Nodes whose raylet accepted a connection from here at least once."""
    _probes: dict[str, Future[Probe]] = field(default_factory=dict)
    _pool: ThreadPoolExecutor | None = None
    _swept: float = float("-inf")

    def read(self) -> dict[str, tuple[Node, str]]:
        out: dict[str, tuple[Node, str]] = {}
        for info in ray.nodes():  # type: ignore[no-untyped-call]
            found = node_from_ray(info)
            if found is not None:
                out[found[0].id] = found
                with suppress(KeyError, TypeError, ValueError):
                    self.raylets[found[0].id] = (
                        str(info["NodeManagerAddress"]),
                        int(info["NodeManagerPort"]),
                    )
        self.condemned &= set(out)  # Ray declared them dead: nothing left to hide
        return {nid: found for nid, found in out.items() if nid not in self.condemned}

    def condemn(self, node_id: str) -> bool:
        """Take a node whose raylet surely is gone (:meth:`raylet_gone`) out of the view
        now, before Ray declares it dead; True if it was in the view (the caller then
        reports its NodeDown, once).

        WHY: Ray declares a lost node dead only after its health checks have missed
        (five, three seconds apart by default: 15.1 s measured on an idle host, longer
        on a loaded one). Until then its jobs waited for a NodeDown that was sure to
        come. A refused connection to its raylet is proof enough to move them at once.
        The node stays out of the view until Ray no longer lists it alive; a scheduler
        restarted meanwhile sees it again, and its next run there ends and condemns it
        again."""
        if node_id not in self.nodes:
            return False
        log.warning("node down (its raylet refuses connections; Ray still lists it): %s",
                    node_id)  # fmt: skip
        del self.nodes[node_id]
        self.gpu_label.pop(node_id, None)
        self.condemned.add(node_id)
        return True

    def raylet_gone(self, node_id: str, timeout_s: float = 1.0) -> bool:
        """Whether ``node_id``'s raylet surely is gone although Ray still lists the node:
        its port refused a connection (the host answered; nothing listens there).

        WHY: a node whose machine is lost is declared dead by Ray only once its health
        checks have missed, seconds later and longer on a loaded host. Meanwhile the
        runs on it end, and restarting them in place there counts each failure against
        the job's retry limit: under a one-core CPU hog a lost node's job ran out of
        retries and failed before the NodeDown that would have moved it. A timeout or
        any other error says nothing for sure (a busy or distant host), so it is False:
        the caller keeps its usual path."""
        addr = self.raylets.get(node_id)
        return addr is not None and probe(addr, timeout_s) == "refused"

    def _sweep(self, current: dict[str, tuple[Node, str]]) -> None:
        """Condemn the listed nodes whose raylet refused the last knock after accepting
        an earlier one, and knock again on every node once ``sweep_s`` has passed.

        WHY: Ray declares a lost node dead only once its health checks have missed,
        15 s on an idle host and 50 s measured inside the suite. Until then a lost
        inference server's clients were still routed there, and its replacement (a
        lent server reclaimed) waited for the NodeDown; :meth:`raylet_gone` caught a
        lost node only when a training run there ended. Why only after an accepted
        knock: a raylet port that refuses this process from the first (a firewall that
        rejects) proves nothing about the node; one that listened and now refuses has
        lost its raylet. The knocks run on threads, harvested at the next refresh, so
        that a host that times out never stalls the scheduler's loop."""
        for nid, fut in list(self._probes.items()):
            if not fut.done():
                continue
            del self._probes[nid]
            got = fut.result()
            if got == "listening":
                self.reachable.add(nid)
            elif got == "refused" and nid in self.reachable and nid in current:
                log.warning("node down (its raylet refuses connections; Ray still lists "
                            "it): %s", nid)  # fmt: skip
                self.condemned.add(nid)
        self.reachable &= set(current)
        now = time.monotonic()
        if self.sweep_s <= 0 or now - self._swept < self.sweep_s:
            return
        self._swept = now
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="raylet-probe")
        for nid in current:
            if nid not in self._probes and nid in self.raylets:
                self._probes[nid] = self._pool.submit(probe, self.raylets[nid])

    def refresh(self) -> list[Event]:
        current = self.read()
        self._sweep(current)
        current = {nid: found for nid, found in current.items() if nid not in self.condemned}
        events: list[Event] = []
        for nid in sorted(set(self.nodes) - set(current)):
            log.info("node down: %s", nid)
            del self.nodes[nid]
            self.gpu_label.pop(nid, None)
            self.raylets.pop(nid, None)
            events.append(NodeDown(nid))
        for nid in sorted(current):
            node, raw = current[nid]
            if self.nodes.get(nid) != node:
                if nid in self.nodes:
                    events.append(NodeDown(nid))
                log.info("node up: %s %s x%d (%s)", nid, node.gpu_type, node.num_gpus, node.pool)
                self.nodes[nid] = node
                self.gpu_label[nid] = raw
                events.append(NodeUp(node))
        return events

    def label_for_type(self, gpu_type: str) -> str:
        for nid, node in self.nodes.items():
            if node.gpu_type == gpu_type:
                return self.gpu_label[nid]
        return gpu_type

    def gpus_now(self, live: bool = False) -> dict[str, int]:
        """GPUs per type for a caller outside the loop (the job desk, the teams): the
        view, or Ray's own when ``live`` or before the loop's first refresh. Never a
        refresh: that would take the loop's NodeUp/NodeDown events, and the core would
        never hear of the node."""
        return self.gpus_by_type(live=live or not self.nodes)

    def gpus_by_type(self, live: bool = False) -> dict[str, int]:
        """GPUs per type as last refreshed, or, ``live``, as Ray sees them now (without
        touching the view, whose changes the next cycle must still turn into events)."""
        nodes = [n for n, _ in self.read().values()] if live else self.nodes.values()
        out: dict[str, int] = {}
        for n in nodes:
            out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
        return out
