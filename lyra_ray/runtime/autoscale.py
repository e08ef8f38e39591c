"""The scheduler's side of Ray's autoscaler: hand it lyra's request, count what it costs.

After every scheduling cycle (it is one of the loop's observers) this asks the pure
:func:`lyra_ray.autoscale.request.scale_request` what to request from the cycle's
snapshot, and, when the request changed, hands it to Ray with
``ray.autoscaler.sdk.request_resources`` (one whole-node bundle per node, each with its
node type's label selector). Ray's autoscaler reads the request as a floor on the
cluster's capacity: it starts the nodes missing and, once lyra stops asking for a node
that sits idle, removes it after ``idle_timeout_minutes``. This module decides nothing.

It also accrues the spend (node-seconds above each type's ``min_workers``), keeps it in
``<state_dir>/autoscale.json`` (a restarted scheduler goes on counting), exports the
request and the spend as metrics (``lyra_autoscale_*``) and answers
``lyra status --json`` (``autoscale``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lyra_ray.autoscale.request import ScaleRequest, node_counts, scale_request
from lyra_ray.autoscale.settings import AutoscaleSettings
from lyra_ray.autoscale.spend import Spend, accrue
from lyra_ray.model.prices import provenance
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.loop import Cycle

log = logging.getLogger(__name__)

SAVE_EVERY_S = 10.0
"""How often the spend is written while nodes above min_workers run."""
RESEND_S = 60.0
"""The request is sent again this often even when unchanged: it lives in the GCS, and a
head restarted without fault tolerance starts with none."""
HISTORY = 200


def policy_args(
    policy: str, args: Mapping[str, Any], settings: AutoscaleSettings
) -> dict[str, Any]:
    """``args`` for ``policy``, with the node types' GPU-hour prices as ``prices`` when
    the policy weighs cost (Gavel's ``..._normalized_by_cost_...``) and was given none:
    what the autoscaler pays for a type is what the policy should weigh."""
    from lyra_ray.model.prices import gpu_hour_prices
    from lyra_ray.policies.base import takes_argument

    out = dict(args)
    own = settings.gpu_hour_prices()
    if own and "prices" not in out and takes_argument(policy, "prices"):
        out["prices"] = {**gpu_hour_prices(), **own}
    return out


def send_request(bundles: list[dict[str, float]], selectors: list[dict[str, str]]) -> None:
    """The one call into Ray's autoscaler (replaces whatever lyra asked for before)."""
    from ray.autoscaler.sdk import request_resources

    request_resources(bundles=bundles, bundle_label_selectors=selectors or None)


class AutoscaleDriver:
    """The loop's observer that keeps Ray's autoscaler told what lyra needs."""

    def __init__(
        self,
        settings: AutoscaleSettings,
        state_dir: str,
        serving: Callable[[], frozenset[str]],
        metrics: Any = None,
        send: Callable[[list[dict[str, float]], list[dict[str, str]]], None] = send_request,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.serving, self.metrics, self.send, self.clock = serving, metrics, send, clock
        self.path = Path(state_dir) / "autoscale.json"
        saved = self._load()
        self.spend = Spend.from_dict(saved.get("spend"))
        self.accrued_to: float | None = saved.get("accrued_to")
        self.calls = int(saved.get("calls", 0))
        self.history: list[dict[str, Any]] = list(saved.get("history", []))[-HISTORY:]
        self.request = ScaleRequest()
        self.counts: dict[str, int] | None = None
        """Nodes up per type at the last cycle: what the time since then is charged for."""
        self.sent: list[dict[str, float]] | None = None
        self.sent_at = 0.0
        self.saved_at = 0.0

    def _load(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("autoscale: %s unreadable (%s); counting the spend from 0", self.path, e)
            return {}
        return raw if isinstance(raw, dict) else {}

    def _save(self, now: float) -> None:
        tmp = self.path.with_suffix(".tmp")
        data = {
            "spend": self.spend.to_dict(),
            "accrued_to": self.accrued_to,
            "calls": self.calls,
            "history": self.history[-HISTORY:],
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data))
            os.replace(tmp, self.path)
            self.saved_at = now
        except OSError:
            log.warning("autoscale: could not write %s", self.path, exc_info=True)

    def observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        try:
            self._observe(core, cycle)
        except Exception:  # asking for nodes must never stop scheduling
            log.warning("autoscale: this cycle's request failed", exc_info=True)

    def _observe(self, core: SchedulerCore, cycle: Cycle) -> None:
        if not self.settings.enabled:
            return
        now = self.clock()
        types = self.settings.node_types
        counts = node_counts(core.nodes.values(), types)
        if self.accrued_to is not None:
            # the nodes up since the last cycle (a restarted scheduler: the nodes it finds)
            seen = counts if self.counts is None else self.counts
            self.spend = accrue(self.spend, seen, types, now - self.accrued_to)
        self.accrued_to, self.counts = now, counts
        self.request = scale_request(core.snapshot(), self.settings, self.spend, self.serving())
        bundles = self.request.bundles(types)
        if bundles != self.sent or now - self.sent_at >= RESEND_S:
            self.send(bundles, self.request.selectors(types))
            if bundles != self.sent:
                self.calls += 1
                self.history.append({"at": now, "level": self.request.level()})
                del self.history[:-HISTORY]
                log.info("autoscale: asked for %s", self.request.level())
                self._save(now)
            self.sent, self.sent_at = bundles, now
        if now - self.saved_at >= SAVE_EVERY_S and any(
            counts.get(t.name, 0) > t.min_workers for t in types
        ):
            self._save(now)
        if self.metrics is not None:
            self.metrics.observe_autoscale(self.request, self.spend, types, self.calls)

    def view(self) -> dict[str, Any]:
        """``autoscale`` of ``lyra status --json``: per node type the nodes up, busy and
        asked for, the cap that bound the request, the spend and the budget."""
        s = self.settings
        if not s.enabled:
            return {"enabled": False}
        types = {t.name: t for t in s.node_types}
        usd = self.spend.usd(s.node_types)
        return {
            "enabled": True,
            "node_types": [r.to_json(types[r.node_type]) for r in self.request.types],
            "unserved": dict(self.request.unserved),
            "requests_made": self.calls,
            "last_requests": self.history[-10:],
            "spend": {
                "usd": round(usd, 4),
                "node_hours": round(self.spend.node_hours(), 4),
                "budget_usd": s.budget_usd,
                "budget_node_hours": s.budget_node_hours,
                "max_usd_per_hour": s.max_usd_per_hour,
                "commit_hours": s.commit_hours,
            },
            "prices": {"provenance": provenance()},
        }

    def annotate(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Job rows whose waiting the request explains: ``reason_code`` ``autoscale`` for
        a job the request counts nodes for, ``autoscale_bound`` for one it could not (the
        cap is named); other rows unchanged."""
        req = self.request
        on = {j: r for r in req.types for j in r.jobs}
        out = []
        for row in rows:
            jid = str(row.get("id"))
            r = on.get(jid)
            if row.get("reason_code") not in (None, "no_fit", "capacity"):
                out.append(row)
            elif r is not None and r.nodes > r.busy and r.have < r.nodes:
                out.append(
                    {
                        **row,
                        "reason_code": "autoscale",
                        "reason": f"waits for the autoscaler: lyra asks for {r.nodes} "
                        f"{r.node_type} node(s), {r.have} up",
                    }
                )
            elif jid in req.unserved:
                out.append(
                    {
                        **row,
                        "reason_code": "autoscale_bound",
                        "reason": f"{row.get('reason', 'waits')}; no node can be added: "
                        f"{req.unserved[jid]}",
                    }
                )
            else:
                out.append(row)
        return out
