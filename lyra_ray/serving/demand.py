"""Serving demand: how many whole inference servers one service needs, from Serve's metrics.

WHY this exists: live capacity loaning lends idle inference servers to training and reclaims
them when a service needs them back. Every lend or reclaim costs real work (a training job
checkpoints and resizes, Serve moves replicas), so the demand that drives it must be steady:

- an EWMA over the raw samples, so that one burst of requests (a single scrape that saw a
  queue) does not reclaim a server that would be idle again a moment later;
- hysteresis on the whole-server level: it rises only once the smoothed need has stayed above
  it for ``up_after_s``, and falls only once the need has stayed, for ``down_after_s``, a
  margin below the lower level it falls to. Noise around a boundary therefore does not flap
  a loan back and forth.

Rising is meant to be quick and falling slow: a service short of replicas misses its latency
target at once, while training that waits a little longer for a loan loses little.

Pure: no Ray, no clock (time arrives with each sample), no I/O. The whole state is a JSON-safe
dict (``to_state`` / ``from_state``) so that a restarted scheduler resumes where it stopped.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

from lyra_ray.serving.checks import finite as _number

logger = logging.getLogger(__name__)

State = dict[str, int | float | None]
"""The JSON-safe form of a :class:`DemandEstimator`'s state."""

_STATE_VERSION = 1
# ceil() of a need that is a whole number plus float noise must not add a server.
_CEIL_EPS = 1e-9
_FLOAT_KEYS = (
    "last_t",
    "ongoing_avg",
    "ongoing_t",
    "rps_avg",
    "rps_t",
    "above_since",
    "below_since",
)
_STATE_KEYS = ("version", "level", *_FLOAT_KEYS, "below_peak")


def _non_negative(name: str, value: object) -> float:
    out = _number(name, value)
    if out < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return out


def _positive(name: str, value: object) -> float:
    out = _number(name, value)
    if out <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return out


def _integer(name: str, value: object, lowest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < lowest:
        raise ValueError(f"{name} must be >= {lowest}, got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class DemandConfig:
    """How one service's load turns into a number of servers.

    ``target_ongoing_per_replica`` (and optionally ``target_rps_per_replica``) is the load one
    replica should carry, as in Ray Serve's own autoscaling config; when both are given the
    larger need wins, because a replica saturated on either count is saturated.
    ``min_servers`` is at least 1: a Serve deployment at zero replicas makes requests hang,
    so a service is never lent out completely.
    """

    target_ongoing_per_replica: float
    target_rps_per_replica: float | None = None
    replicas_per_server: int = 1
    smoothing_s: float = 30.0
    up_after_s: float = 0.0
    down_after_s: float = 300.0
    down_margin: float = 0.1
    min_servers: int = 1
    max_servers: int

    def __post_init__(self) -> None:
        _positive("target_ongoing_per_replica", self.target_ongoing_per_replica)
        if self.target_rps_per_replica is not None:
            _positive("target_rps_per_replica", self.target_rps_per_replica)
        _integer("replicas_per_server", self.replicas_per_server, 1)
        _positive("smoothing_s", self.smoothing_s)
        _non_negative("up_after_s", self.up_after_s)
        _non_negative("down_after_s", self.down_after_s)
        margin = _non_negative("down_margin", self.down_margin)
        if margin >= 1:
            raise ValueError(f"down_margin must be < 1, got {self.down_margin!r}")
        _integer("min_servers", self.min_servers, 1)
        _integer("max_servers", self.max_servers, 1)
        if self.max_servers < self.min_servers:
            raise ValueError(
                f"max_servers ({self.max_servers}) must be >= min_servers ({self.min_servers})"
            )


def _ewma(
    avg: float | None, avg_t: float | None, x: float, t: float, tau: float
) -> tuple[float, float]:
    """Continuous-time EWMA: a sample's weight grows with the time it stands for.

    Samples arrive at irregular intervals (scrapes are missed, the scheduler loop stalls), so a
    fixed per-sample weight would smooth over a varying time span; ``1 - exp(-dt / tau)``
    keeps the time constant ``tau`` whatever the sampling. The first sample starts the average.
    """
    if avg is None or avg_t is None:
        return x, t
    alpha = 1.0 - math.exp(-(t - avg_t) / tau)
    return avg + alpha * (x - avg), t


class DemandEstimator:
    """Smoothed, hysteretic demand of one service, in whole servers.

    Feed it one aggregated sample per scheduling cycle with :meth:`update`; it answers the
    current demand. The level starts at ``initial_servers`` (default ``max_servers``): until
    the estimator has watched the service for ``down_after_s`` it has no evidence that any
    server is idle, so nothing is lent on a guess.
    """

    def __init__(self, config: DemandConfig, *, initial_servers: int | None = None) -> None:
        self.config = config
        if initial_servers is None:
            level = config.max_servers
        else:
            level = _integer("initial_servers", initial_servers, config.min_servers)
            if level > config.max_servers:
                raise ValueError(
                    f"initial_servers must be <= max_servers ({config.max_servers}), "
                    f"got {initial_servers!r}"
                )
        self._level = level
        self._last_t: float | None = None
        self._ongoing_avg: float | None = None
        self._ongoing_t: float | None = None
        self._rps_avg: float | None = None
        self._rps_t: float | None = None
        # Start of the current run of samples whose need was above (below) the level.
        self._above_since: float | None = None
        self._below_since: float | None = None
        # Highest whole-server need seen during the current run below the level.
        self._below_peak: int | None = None

    @property
    def level(self) -> int:
        """The current demand in whole servers (what :meth:`update` last answered)."""
        return self._level

    @property
    def need_servers(self) -> float | None:
        """The smoothed need in (fractional) servers before hysteresis; None before any load.

        Exposed for telemetry: comparing it with :attr:`level` shows how much head-room the
        hysteresis is holding.
        """
        cfg = self.config
        replicas: float | None = None
        if self._ongoing_avg is not None:
            replicas = self._ongoing_avg / cfg.target_ongoing_per_replica
        if cfg.target_rps_per_replica is not None and self._rps_avg is not None:
            from_rps = self._rps_avg / cfg.target_rps_per_replica
            replicas = from_rps if replicas is None else max(replicas, from_rps)
        return None if replicas is None else replicas / cfg.replicas_per_server

    def update(self, t_s: float, ongoing: float | None, rps: float | None) -> int:
        """Fold in one sample and return the demand in whole servers.

        ``ongoing`` is the number of requests in flight and ``rps`` the request rate, both
        summed over the service's replicas; either may be None when a scrape lacked it (the
        last smoothed value then stands). A sample with time going backwards, or a value that
        is NaN, infinite or negative, is refused with a ValueError naming the field, and the
        state is left as it was.
        """
        t = _non_negative("t_s", t_s)
        if self._last_t is not None and t < self._last_t:
            raise ValueError(f"t_s must not go backwards: got {t_s!r} after {self._last_t!r}")
        o = None if ongoing is None else _non_negative("ongoing_requests", ongoing)
        r = None if rps is None else _non_negative("requests_per_s", rps)

        tau = self.config.smoothing_s
        self._last_t = t
        if o is not None:
            self._ongoing_avg, self._ongoing_t = _ewma(
                self._ongoing_avg, self._ongoing_t, o, t, tau
            )
        if r is not None:
            self._rps_avg, self._rps_t = _ewma(self._rps_avg, self._rps_t, r, t, tau)
        need = self.need_servers
        if need is not None:
            self._step(t, need)
        return self._level

    def _step(self, t: float, need: float) -> None:
        """Move the level by the hysteresis rules.

        Up to ``ceil(need)``; down only to a level that the need stays ``down_margin``
        below (``need <= level * (1 - down_margin)``), so that the level just lent down
        to is not exceeded by the same load's noise. WHY: the margin was once checked
        against the level being left, not the one reached: down from 3 to 2 at a need of
        1.99, up again at 2.01. Under a CPU hog a lent server's drain moved a service's
        need across its boundary, and a server was lent and reclaimed every 13 s for
        three minutes, never lent long enough for training to use it (the serving chaos
        test's lost-server wait, docs/testing.md)."""
        cfg = self.config

        def servers(x: float) -> int:
            return min(max(math.ceil(x - _CEIL_EPS), cfg.min_servers), cfg.max_servers)

        want, down_to = servers(need), servers(need / (1.0 - cfg.down_margin))
        if want > self._level:
            self._below_since = self._below_peak = None
            if self._above_since is None:
                self._above_since = t
            if t - self._above_since >= cfg.up_after_s:
                logger.debug("demand up %d -> %d at t=%.3f", self._level, want, t)
                # Up to the current need, not the window's lowest: being short hurts serving.
                self._level = want
                self._above_since = None
        elif down_to < self._level:
            self._above_since = None
            if self._below_since is None or self._below_peak is None:
                self._below_since, self._below_peak = t, down_to
            else:
                self._below_peak = max(self._below_peak, down_to)
            if t - self._below_since >= cfg.down_after_s:
                # Down only to the highest need of the whole window, so a need that wavers
                # inside the window does not lend a server it will take back at once.
                logger.debug("demand down %d -> %d at t=%.3f", self._level, self._below_peak, t)
                self._level = self._below_peak
                self._below_since = self._below_peak = None
        else:
            self._above_since = self._below_since = self._below_peak = None

    def to_state(self) -> State:
        """The whole mutable state as a JSON-safe dict (finite floats, ints and None)."""
        return {
            "version": _STATE_VERSION,
            "level": self._level,
            "last_t": self._last_t,
            "ongoing_avg": self._ongoing_avg,
            "ongoing_t": self._ongoing_t,
            "rps_avg": self._rps_avg,
            "rps_t": self._rps_t,
            "above_since": self._above_since,
            "below_since": self._below_since,
            "below_peak": self._below_peak,
        }

    @classmethod
    def from_state(cls, config: DemandConfig, state: Mapping[str, object]) -> DemandEstimator:
        """Rebuild an estimator from :meth:`to_state`'s dict (e.g. after a JSON round trip).

        The config is not part of the state: it comes from the cluster's config, which may have
        changed across the restart. A saved level outside the new ``[min_servers,
        max_servers]`` is clamped into it rather than refused, since that is a config change,
        not corrupt state. Anything malformed is refused with a ValueError naming the key.
        """
        version = state.get("version")
        if version != _STATE_VERSION:
            raise ValueError(f"state.version must be {_STATE_VERSION}, got {version!r}")
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"state is missing {', '.join('state.' + k for k in missing)}")

        level = _integer("state.level", state["level"], 1)
        peak_raw = state["below_peak"]
        below_peak = None if peak_raw is None else _integer("state.below_peak", peak_raw, 1)
        floats = {
            key: None if state[key] is None else _non_negative(f"state.{key}", state[key])
            for key in _FLOAT_KEYS
        }
        for a, b in (("ongoing_avg", "ongoing_t"), ("rps_avg", "rps_t")):
            if (floats[a] is None) != (floats[b] is None):
                raise ValueError(f"state.{a} and state.{b} must be both set or both None")
        if (floats["below_since"] is None) != (below_peak is None):
            raise ValueError("state.below_since and state.below_peak must be both set or both None")
        last_t = floats["last_t"]
        for key in ("ongoing_t", "rps_t", "above_since", "below_since"):
            value = floats[key]
            if value is not None and (last_t is None or value > last_t):
                raise ValueError(f"state.{key} must not be later than state.last_t")

        out = cls(config)
        out._last_t = last_t
        out._ongoing_avg, out._ongoing_t = floats["ongoing_avg"], floats["ongoing_t"]
        out._rps_avg, out._rps_t = floats["rps_avg"], floats["rps_t"]
        out._above_since, out._below_since = floats["above_since"], floats["below_since"]
        out._below_peak = below_peak
        clamped = min(max(level, config.min_servers), config.max_servers)
        if clamped != level:
            logger.info("saved demand level %d clamped to %d by the config", level, clamped)
            out._below_since = out._below_peak = out._above_since = None
        elif below_peak is not None and not config.min_servers <= below_peak < level:
            # The config moved min_servers past the window's target: start the window again.
            out._below_since = out._below_peak = None
        out._level = clamped
        return out


def total_demand(per_service: Mapping[str, int]) -> int:
    """The servers all services need together: the pool that is not free to lend."""
    total = 0
    for name, servers in per_service.items():
        if isinstance(servers, bool) or not isinstance(servers, int) or servers < 0:
            raise ValueError(f"per_service[{name!r}] must be an int >= 0, got {servers!r}")
        total += servers
    return total
