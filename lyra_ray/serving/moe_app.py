"""A real MoE model (``transformers``' Mixtral, Qwen2-MoE, DeepSeek-V3, ...) as a lyra
inference service, with Lina's expert replicas, on the servers lyra lends and reclaims.

WHY one deployment per GPU, not one per expert: lyra lends and reclaims whole servers, so
a server's replicas must form one application that can be drained and deleted alone
(:mod:`lyra_ray.serving.apps`); and Lina places expert *replicas on devices*. Each GPU of
a serving server is a deployment ``gpu<k>`` of one replica (:class:`MoEDevice`), pinned
to its server, that holds the experts' slices the plan gives it. The ingress
(:class:`MoEServiceIngress`) runs the model's own forward (``moe_serving.hf_moe``:
embedding, attention, routers, shared experts) in a thread per request; each MoE layer's
routed experts come back to the event loop, which sends every device one call with its
chunks. It plans for the batch regime the service sees (its step-size histogram) over
the devices of the servers that serve (:mod:`lyra_ray.serving.moe_plan`), from what
:mod:`lyra_ray.serving.moe_loads` keeps of the routing seen:
lending a server lowers the replica budget and re-plans onto the devices left; a reclaim
re-plans with the server back; in between, phase 2 re-plans the layers whose actual
routing drifted from the plan, on the ingress's own clock (every ``replan_s``), behind a
hysteresis gate (:mod:`lyra_ray.serving.moe_drift`). A spec with ``uniform: 1`` keeps
every expert at the same number of replicas (the baseline Lina is measured against) and
never re-plans on drift.

A device stands for a GPU running its experts (:mod:`lyra_ray.serving.moe_device`, with
each server's application of them): it computes each chunk (on its GPU where there is
one); a spec with ``emulate: 1`` has each call take the H200 expert-time model instead.

A plan switch drops no request: a request keeps the routing table it started with to
its last layer; the pool deletes a drained server's app only once no request holding a
table with that server is in flight (:meth:`MoEServiceIngress.inflight_on`); and a device
asked for an expert it no longer holds fetches its weights from the object store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import numpy as np
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.exceptions import DeploymentUnavailableError, ReplicaUnavailableError

from lyra_ray.serving.meter import RequestMeter
from lyra_ray.serving.moe_loads import ExpertLoads
from lyra_ray.serving.moe_metrics import ExpertMetrics
from lyra_ray.serving.moe_plan import Device, RoutingTable, devices_of
from lyra_ray.serving.moe_request import request_tokens
from lyra_ray.serving.spec import moe_knobs

log = logging.getLogger(__name__)

WAIT_FOR_TABLE_S = 30.0
"""How long a request that comes before the service's first plan waits for it: the HTTP
route is up before the first server's devices are (seconds apart on a loaded host; a
10 s wait answered 503 to the first requests of a live test under a CPU hog), and a
service being deployed should hold its first requests, well within a client's 60 s."""
LOAD_TIMEOUT_S = 20.0
"""How long a re-plan waits for its devices to load their experts (below the pool's 30 s
call timeout, so a failed re-plan answers the pool, which calls again next poll)."""
DEVICE_CALL_TIMEOUT_S, RETRY_WAIT_S = 15.0, 40.0
"""A layer's expert calls slower than this fail the attempt (a lost server's device never
answers), which then waits this long for a newer plan: in all, under a client's 60 s."""
_GONE = (RayActorError, ReplicaUnavailableError, DeploymentUnavailableError, TimeoutError)


@serve.deployment(max_ongoing_requests=100_000, ray_actor_options={"num_cpus": 0})
class MoEServiceIngress:
    """The service's HTTP route: attention and gating here, experts on the devices."""

    def __init__(self, service: str, config: dict[str, Any]) -> None:
        import concurrent.futures

        import ray
        import torch

        from lyra_ray.moe_serving.hf_arch import arch_spec
        from lyra_ray.moe_serving.hf_moe import HFMoE
        from lyra_ray.moe_serving.popularity_map import zipf_shares

        torch.set_num_threads(1)
        self.torch = torch
        k = moe_knobs(config)
        self.service = service
        self.model = HFMoE(arch_spec(k))
        m = self.model
        self.slots = int(k["slots"])
        self.batch, self.seq = int(k["batch"]), int(k["seq"])
        self.replan_s = float(k["replan_s"])
        self.uniform = bool(k["uniform"])
        self.borrow = bool(k["borrow"]) and not self.uniform
        if "target_load" in k:
            target = np.asarray(k["target_load"], dtype=np.float64)
            target = target / target.sum(1, keepdims=True)
        else:
            target = zipf_shares(m.layers, m.experts, m.top_k, float(k["skew"]), m.spec.seed)
        self.calibration_error = m.calibrate(target)
        """The worst layer's max share error of the routers' calibration (0.01 is the aim)."""
        self.loads = ExpertLoads(m, k)
        """What plans are made from (:mod:`lyra_ray.serving.moe_loads`)."""
        self.weights = [
            [ray.put(m.expert_slice(layer, e)) for e in range(m.experts)]
            for layer in range(m.layers)
        ]
        self.servers: dict[str, tuple[str, int]] = {}
        self.table: RoutingTable | None = None
        self.old: list[RoutingTable] = []
        self.history: list[dict[str, Any]] = []
        self.meter = RequestMeter()
        self.expert_metrics = ExpertMetrics(service)
        self.rng = np.random.default_rng(m.spec.seed + 1)
        self._handles: dict[tuple[str, int], Any] = {}
        self._plan_lock: asyncio.Lock | None = None
        self._planned_for: dict[str, tuple[str, int]] | None = None
        self._phase2: asyncio.Task[None] | None = None
        self.measured: dict[str, Any] | None = None
        """The first device's expert timings the cost model was fitted to (None: emulated
        calls, or not profiled yet); reported in the plan so a plan can be explained."""
        self._threads = concurrent.futures.ThreadPoolExecutor(64, "moe-request")
        """Each request's forward runs in a thread of its own (it waits on its devices)."""

    async def _measure_cost(self, dev: Device) -> None:
        from lyra_ray.moe_serving.expert_time import ExpertCost, host_roofline
        from lyra_ray.serving.moe_device import PROFILE_TOKENS

        one, many = await self._handle(dev).profile.remote([self.weights[0][0]])
        m = self.model
        where = f"measured on device {dev.index} of {dev.node[:12]}"
        roof = host_roofline(m.dim, m.inter, one, PROFILE_TOKENS, many, where)
        self.loads.cost = ExpertCost(m.dim, m.inter, gpu="host", constants=roof)
        us = [one * 1e6, many * 1e6]
        self.measured = {"where": where, "tokens": [1, PROFILE_TOKENS], "us": us}
        log.info(
            "%s: expert time %s: %.0f us at 1 token, %.0f us at %d",
            self.service,
            where,
            one * 1e6,
            many * 1e6,
            PROFILE_TOKENS,
        )

    # ---------------------------------------------------------------- what the pool calls

    async def set_backends(self, backends: dict[str, list[Any]]) -> list[str]:
        """``{node id: [backend app, GPUs]}`` serve from now on: re-plan onto them."""
        servers = {node: (str(app), int(gpus)) for node, (app, gpus) in backends.items()}
        if self._phase2 is None and self.replan_s > 0:
            self._phase2 = asyncio.get_running_loop().create_task(self._phase2_loop())
        # Against what the table in use was planned for, not the last call: a re-plan
        # that failed (a lost server's device not answering) is tried again next call.
        if servers != self._planned_for or self.table is None:
            before, self.servers = sorted(self.servers), servers
            await self._replan(f"servers {len(before)} -> {len(servers)}")
        return sorted(self.servers)

    def inflight_on(self, node: str) -> int:
        """Requests that may still send work to ``node`` (a drain waits for 0)."""
        tables = [t for t in self.old if t.active]
        if self.table is not None and node in self.table.nodes:
            return max(1, self.table.active)  # still planned there: not drained yet
        return sum(t.active for t in tables if node in t.nodes)

    def forget(self, node: str) -> None:
        """A drained server's app is going: drop its handles and the tables nobody
        routes by any more."""
        self.old = [t for t in self.old if t.active]
        if not any(node in t.nodes for t in self.old) and node not in self.servers:
            for key in [k for k in self._handles if k[0] == node]:
                del self._handles[key]

    def stats(self) -> dict[str, Any]:
        return {
            **self.meter.stats(),
            "routing": sorted(self.table.nodes) if self.table else [],
        }

    def plan(self) -> dict[str, Any]:
        """The plan in use and the re-plans so far (newest last)."""
        now = self.table.summary() if self.table else {}
        m = self.model
        model = {
            "arch": m.spec.arch,
            "class": type(m.model).__name__,
            "moe_layers": m.layers,
            "experts": m.experts,
            "top_k": m.top_k,
            "expert_shape": [m.dim, m.inter],
            "calibration_error": round(self.calibration_error, 4),
            "expert_time": None if self.loads.cost is None else self.loads.cost.gpu,
            "expert_time_measured": self.measured,
        }
        return {
            **now,
            "model": model,
            "regime": [list(p) for p in self.loads.batches.regime()],
            "replans": self.history[-50:],
            "checks": self.loads.checks[-50:],
        }

    # ---------------------------------------------------------------- planning

    async def _replan(self, reason: str, drifted: Any = None) -> None:
        """Plan, load the devices, then switch tables.

        Without ``drifted``: Lina's phase 1 onto the devices of ``self.servers``, for the
        load seen lately (phase 1's estimate before any; even loads when ``uniform``).
        ``drifted``: phase 2's placement, used if the devices are still the ones it was
        made for (a lend or reclaim in between re-plans from the load instead).
        """
        if self._plan_lock is None:
            self._plan_lock = asyncio.Lock()
        async with self._plan_lock:
            planned_for = dict(self.servers)
            devices = devices_of({n: g for n, (_app, g) in planned_for.items()})
            if not devices:
                return
            if self.loads.cost is None:
                await self._measure_cost(devices[0])
            if drifted is not None and self.table is not None and devices == self.table.devices:
                placement = drifted
            else:
                placement = self.loads.phase1(len(devices), self.slots, self.uniform)
            table = RoutingTable(devices, placement)
            await self._load(table)
            if self.table is not None and self.table.active:
                self.old.append(self.table)
            self.table, self._planned_for = table, planned_for
            self.old = [t for t in self.old if t.active]
            self.expert_metrics.planned(table.counts)
            entry = {
                "at": time.time(),
                "reason": reason,
                "regime": [[round(t, 1), round(w, 3)] for t, w in self.loads.batches.regime()],
                **table.summary(),
            }
            self.history.append(entry)
            log.info("%s: re-planned (%s): %s", self.service, reason, entry)

    async def _load(self, table: RoutingTable) -> None:
        """Give every device the experts the table puts on it."""
        calls = []
        for i, dev in enumerate(table.devices):
            experts = [(la, e, [self.weights[la][e]]) for la, e in table.hosted(i)]
            calls.append(self._handle(dev).host.remote(experts))
        # A device on a lost server never answers: fail the re-plan (and free its lock)
        # rather than hold every later one behind it; the pool's next call retries.
        await asyncio.wait_for(asyncio.gather(*calls), LOAD_TIMEOUT_S)

    def _handle(self, dev: Device) -> Any:
        """The device's handle; a drained server's stays known while old tables use it."""
        key = (dev.node, dev.index)
        if key not in self._handles:
            app, _ = self.servers[dev.node]
            self._handles[key] = serve.get_deployment_handle(f"gpu{dev.index}", app)
        return self._handles[key]

    async def _phase2_loop(self) -> None:
        """Lina's phase 2 on the ingress's clock: every ``replan_s``, judge the window's
        routing against the plan in use (:class:`DriftGate`) and re-plan if it says so."""
        while True:
            await asyncio.sleep(self.replan_s)
            tab = None if self.uniform else self.table
            check, drifted = self.loads.check(None if tab is None else tab.placement)
            if check is None or drifted is None:
                continue
            try:
                reason = f"phase 2: routing drifted (check {check.check}, gain {check.gain:.2f})"
                await self._replan(reason, drifted)
            except Exception:  # a device restarting: the next round tries again
                log.warning("%s: phase-2 re-plan failed", self.service, exc_info=True)

    # ---------------------------------------------------------------- requests

    async def _run(self, tokens: Any) -> tuple[Any, frozenset[str]]:
        """The request on the plan in use. WHY one retry: a request crosses every device of
        its plan, so one on a lost server fails it; the pool re-plans onto the servers
        left, and the (idempotent) request runs once more on that newer plan."""
        tab = await self._table_after(WAIT_FOR_TABLE_S, None)
        if tab is None:
            self.meter.reject()
            raise RuntimeError("no device serves yet")
        self.meter.begin()
        ok = False
        try:
            try:
                out = await self._run_on(tab, tokens)
            except _GONE:
                log.warning("%s: a device of its plan went mid-request", self.service)
                tab = await self._table_after(RETRY_WAIT_S, tab) or tab
                out = await self._run_on(tab, tokens)
            ok = True
            return out, tab.nodes
        finally:
            self.meter.end(ok)

    async def _table_after(self, wait_s: float, old: RoutingTable | None) -> RoutingTable | None:
        """The plan in use once there is one other than ``old`` (None after ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        while (self.table is None or self.table is old) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return None if self.table is old else self.table

    async def _run_on(self, tab: RoutingTable, tokens: Any) -> Any:
        """The model's own forward in a thread; each MoE layer's routed experts are sent
        from the event loop (``_layer``) while the thread waits for them."""
        loop = asyncio.get_running_loop()
        tokens = np.asarray(tokens, dtype=np.int64)
        self.loads.request(int(tokens.size))

        def experts(layer: int, hidden: Any, idx: Any, w: Any) -> Any:
            fut = asyncio.run_coroutine_threadsafe(self._layer(tab, layer, hidden, idx, w), loop)
            return fut.result()

        tab.active += 1
        try:
            h, _ = await loop.run_in_executor(self._threads, self.model.run, tokens, experts)
            return h.numpy()
        finally:
            tab.active -= 1

    async def _layer(self, tab: RoutingTable, layer: int, hidden: Any, idx: Any, w: Any) -> Any:
        """One MoE layer's routed experts for one request: count, split over the devices
        holding replicas, combine with the routers' weights (what the fused experts module
        computes)."""
        from lyra_ray.moe_serving.dynamic import chunk_hosts, static_hosts

        x = hidden.detach().float().numpy()
        k_idx, wts = idx.numpy(), w.detach().float().numpy()
        counts = np.bincount(k_idx.ravel(), minlength=self.model.experts).astype(np.int64)
        self.loads.routed(layer, counts)
        self.expert_metrics.routed(layer, counts)
        split = chunk_hosts if self.borrow else static_hosts
        where = tab.devices_for(layer, split(counts, tab.counts[layer]))
        picks: list[tuple[int, Any, Any]] = []
        for e in np.flatnonzero(counts):
            rows, slot = np.nonzero(k_idx == e)
            picks.append((int(e), rows, slot))
        ys = await self._experts(tab, layer, [(e, x[rows]) for e, rows, _ in picks], where)
        out = np.zeros_like(x)
        for (_e, rows, slot), y in zip(picks, ys, strict=True):
            np.add.at(out, rows, y * wts[rows, slot][:, None])
        return self.torch.from_numpy(out).to(hidden.dtype)

    async def _experts(
        self, tab: RoutingTable, layer: int, work: list[tuple[int, Any]], where: list[list[int]]
    ) -> list[Any]:
        """Each ``(expert, rows)`` of ``work`` split over its devices (``where[expert]``),
        one :meth:`MoEDevice.run` call per device for all its chunks; the outputs per
        expert, in ``work``'s order."""
        parts: dict[int, list[tuple[int, Any, list[Any]]]] = {}
        spots: list[list[tuple[int, int]]] = []  # per expert: (device, its part) per chunk
        for e, x in work:
            chunks = np.array_split(np.asarray(x), len(where[e]))
            ref = [self.weights[layer][e]]
            row = []
            for c, d in zip(chunks, where[e], strict=True):
                mine = parts.setdefault(d, [])
                row.append((d, len(mine)))
                mine.append((e, c, ref))
            spots.append(row)
        devs = sorted(parts)
        calls = [self._handle(tab.devices[d]).run.remote(layer, parts[d]) for d in devs]
        outs = await asyncio.wait_for(asyncio.gather(*calls), DEVICE_CALL_TIMEOUT_S)
        by_dev = dict(zip(devs, outs, strict=True))
        return [np.concatenate([by_dev[d][i] for d, i in row]) for row in spots]

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        body: Any = {}
        if await request.body():
            try:
                body = await request.json()
            except ValueError:
                return JSONResponse({"error": "body: not JSON"}, status_code=400)
        try:
            tokens = request_tokens(body, self.model, self.rng, self.batch, self.seq)
        except ValueError as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        try:
            out, nodes = await self._run(tokens)
        except RuntimeError as e:
            return JSONResponse({"error": f"service {self.service}: {e}"}, status_code=503)
        return {"outputs": out[:, -1, :].tolist(), "servers": sorted(n[:12] for n in nodes)}


def moe_ingress(service: str, config: dict[str, Any]) -> Any:
    return MoEServiceIngress.options(name="ingress").bind(service, config)  # type: ignore[attr-defined]
