"""What changed since the last commit: the incremental store's memory (issue #33, item 1).

The whole-state commit serialised every job (its spec included) and the round
mechanism's per-job tables every cycle: at 10,000 queued jobs ~10 MB and ~0.4 s a cycle,
though a quiet cycle changes only the running jobs. :class:`Ledger` remembers what the
store holds, cheaply, and hands :meth:`~lyra_ray.runtime.store.StateStore.commit_delta`
only the difference:

- jobs: one tuple per job (:data:`~lyra_ray.model.state.job_fingerprint`), compared with
  the tuple last written; a changed job writes its record (no spec), a new job has its
  spec copied from its inbox row, a job gone from the core (archived) is deleted. Every
  job is compared, so no mutation path of the core can be missed (a dirty set would
  need every writer of a job record to report it); the scan costs ~2-4 ms at 10,000 jobs.
- the nodes and the allocation: serialised only when the object changed (the state
  rebuilds its node tuple when a node comes or goes; the decider replaces its
  allocation when the policy solves);
- the round mechanism's per-entry tables (``job_time``, ``deficits``, ``alloc_ref``,
  ``seen``): entry by entry, against copies of what was written, read in place (not
  copied); ``deficits`` and ``alloc_ref`` only when the object was replaced (a reset);
- everything else (the clock, loans, policy and throughput state, the executor's and the
  serving pool's state, failure reasons): serialised and compared as text.

The ledger learns what was written only once the commit returned (:meth:`accept`): a
commit that fails leaves it as it was, so the next commit writes the same changes again.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from typing import Any

import orjson

from lyra_ray.model import JobSpec
from lyra_ray.model.state import allocation_to_dict, job_fingerprint, job_record, spec_to_dict
from lyra_ray.runtime.store import Delta
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.rounds import RoundMechanism

ROUND_TABLES = ("job_time", "deficits", "alloc_ref", "seen")
"""The round state's mappings keyed by job (or pair): written entry by entry."""
REPLACED_TABLES = ("deficits", "alloc_ref")
"""Of those, the ones the round mechanism replaces at a reset and never edits in between
(:meth:`~lyra_ray.scheduling.round_state.RoundState.tables`): the same object is the same
table, so a backfill does not compare their 10,000 entries with what was written."""


def _dumps(value: Any) -> str:
    """Canonical JSON text (sorted keys: compared as text with what was written).

    orjson, ~8x faster than ``json.dumps`` on a job record: a quiet cycle at 10,000 queued
    jobs writes ~1,000 of them, and a round ~10,000 table rows. Values orjson cannot
    encode (an integer beyond 64 bits, a key that is not a string) take ``json``'s way;
    a NaN or an infinity never reaches here (the boundary refuses them), and orjson
    would write it as ``null``.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, sort_keys=True)


def _spec_json(spec: JobSpec) -> str:
    """A job's spec for a job no inbox row holds (added without the SDK)."""
    return _dumps(spec_to_dict(spec))


@dataclass
class _Accept:
    """What the ledger will know once the commit it describes returned."""

    jobs: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    parts: dict[str, str] = field(default_factory=dict)
    refs: dict[str, object] = field(default_factory=dict)
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows_removed: dict[str, list[str]] = field(default_factory=dict)


class Ledger:
    """The store's contents as this process wrote them; empty (so the first commit
    rewrites everything) until a commit was accepted."""

    def __init__(self) -> None:
        self.jobs: dict[str, tuple[Any, ...]] = {}
        self.parts: dict[str, str] = {}
        self.refs: dict[str, object] = {}
        """The objects the identity-gated parts were serialised from."""
        self.rows: dict[str, dict[str, Any]] = {}
        self.fresh = True

    def delta(self, core: SchedulerCore, extras: Mapping[str, Any]) -> tuple[Delta, _Accept]:
        """The commit that brings the store from what it holds to ``core`` and
        ``extras`` (top-level parts beside ``core``: runtime, serving, reasons, ...)."""
        d, acc = Delta(reset=self.fresh), _Accept()
        self._jobs(core, d, acc)
        state, decider = core.state, core.decider
        allocation, stale, rounds = decider.persisted()
        small = {**state.scalars_to_state(), "dirty": stale, "policy_name": decider.policy_name}
        self._part("core", small, d, acc)
        self._gated("core.nodes", state.nodes_info()[0], state.nodes_to_state, d, acc)
        self._gated("core.allocation", allocation, lambda: allocation_to_dict(allocation), d, acc)
        self._part("core.policy", decider.policy.to_state(), d, acc)
        self._part("core.throughputs", state.throughputs.to_state(), d, acc)
        if rounds is None:
            self._part("core.rounds", None, d, acc)
        else:
            # The round state changes only inside a round (which counts itself in
            # ``rounds``) or a reset (``last_reset``): between rounds, skip it whole
            # rather than copy and compare 10,000 rows of it (and its job set) twice a cycle.
            st = getattr(rounds, "state", None)
            early = _round_mark(st) if st is not None else None
            if not self.fresh and early is not None and self.refs.get("core.rounds.early") == early:
                return self._extras(extras, d, acc)
            if early is not None:
                acc.refs["core.rounds.early"] = early
            tables: Mapping[str, Mapping[str, Any]]
            replaced: tuple[str, ...]
            if isinstance(rounds, RoundMechanism):  # its tables read in place, not copied
                saved = {**rounds.settings(), **rounds.state.scalars()}
                tables, replaced = rounds.state.tables(), REPLACED_TABLES
            else:
                saved = rounds.to_state()
                tables, replaced = {k: saved.pop(k) for k in ROUND_TABLES if k in saved}, ()
            self._part("core.rounds", {**saved, **{k: {} for k in tables}}, d, acc)
            mark = (saved.get("rounds"), saved.get("last_reset"), *map(len, tables.values()))
            if self.fresh or self.refs.get("core.rounds.mark") != mark:
                acc.refs["core.rounds.mark"] = mark
                for name, table in tables.items():
                    self._table(f"core.rounds.{name}", table, d, acc, name in replaced)
        return self._extras(extras, d, acc)

    def _extras(self, extras: Mapping[str, Any], d: Delta, acc: _Accept) -> tuple[Delta, _Accept]:
        for key, value in extras.items():
            self._part(key, value, d, acc)
        return d, acc

    def accept(self, acc: _Accept) -> None:
        """The commit :meth:`delta` described returned: the store now holds it."""
        self.fresh = False
        self.jobs.update(acc.jobs)
        for jid in acc.removed:
            self.jobs.pop(jid, None)
        self.parts.update(acc.parts)
        self.refs.update(acc.refs)
        for path, rows in acc.rows.items():
            self.rows.setdefault(path, {}).update(rows)
        for path, keys in acc.rows_removed.items():
            for k in keys:
                self.rows.get(path, {}).pop(k, None)

    def _jobs(self, core: SchedulerCore, d: Delta, acc: _Accept) -> None:
        known, fresh = self.jobs, self.fresh
        for jid, j in core.jobs.items():
            key = job_fingerprint(j)
            if not fresh and known.get(jid) == key:
                continue
            d.jobs.append((jid, _dumps(job_record(j))))
            acc.jobs[jid] = key
            if fresh or jid not in known:
                d.new[jid] = partial(_spec_json, j.spec)
        jobs = core.jobs
        d.removed = acc.removed = [jid for jid in known if jid not in jobs]

    def _part(self, path: str, value: Any, d: Delta, acc: _Accept) -> None:
        text = _dumps(value)
        if self.fresh or self.parts.get(path) != text:
            d.parts.append((path, text))
            acc.parts[path] = text

    def _gated(
        self, path: str, ref: object, build: Callable[[], Any], d: Delta, acc: _Accept
    ) -> None:
        """A large part serialised only when the object it comes from was replaced."""
        if not self.fresh and self.refs.get(path) is ref:
            return
        acc.refs[path] = ref
        self._part(path, build(), d, acc)

    def _table(
        self, path: str, table: Mapping[str, Any], d: Delta, acc: _Accept, replaced: bool = False
    ) -> None:
        """Write the entries of ``table`` that differ from what was written; a
        ``replaced`` table (never edited, only replaced) is skipped while it is the one
        written last."""
        if replaced:
            if not self.fresh and self.refs.get(path) is table:
                acc.rows[path], acc.rows_removed[path] = {}, []
                return
            acc.refs[path] = table
        last = {} if self.fresh else self.rows.get(path, {})
        if last and table == last:  # one comparison in C: most tables are still between resets
            acc.rows[path], acc.rows_removed[path] = {}, []
            return
        # the walk over every entry in C (map/compress): a round changes ~1,000 of 11,000
        keys, values = list(table), list(table.values())
        differs = map(operator.ne, values, map(last.get, keys))
        changed = {k: dict(v) for k, v in compress(zip(keys, values, strict=True), differs)}
        d.rows += [(path, k, _dumps(v)) for k, v in changed.items()]
        acc.rows[path] = changed
        gone = [k for k in last if k not in table]
        d.rows_removed += [(path, k) for k in gone]
        acc.rows_removed[path] = gone


def _round_mark(st: Any) -> tuple[Any, ...] | None:
    """What moves whenever the round mechanism's state does: its round count, its last
    reset and the size of each table (None: not the round state this knows)."""
    try:
        return (st.rounds, st.last_reset, *(len(getattr(st, k)) for k in ROUND_TABLES))
    except AttributeError:
        return None
