"""Each process's whole CPU, from the kernel's process accounting, for :mod:`suite_cpu`.

Why: samples of ``/proc`` every 15 s miss a process that starts and ends between two of
them, and the CPU one spent after its last sample. In ``make test`` those are most of
Ray's worker processes: a module of the live tier started 74 of them, each living a few
seconds and spending 3.7 CPU-s on average, mostly starting up (importing Ray, lyra and
PyTorch), and the samples saw 78 % of the host's busy CPU. With accounting on (``acct(2)``)
the kernel appends one record to a file as each process exits, holding its user and
system time, so every process is counted whole. It needs root (``CAP_SYS_PACCT``) and a
kernel built with BSD process accounting; without them :func:`start` says why and
:mod:`suite_cpu` falls back to its samples. Accounting is host-wide, like the host's busy
CPU: another load on the host is counted too (and shows as its own kind).
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from benchmarks._proc_kinds import GONE, kind, name

RECORD = struct.Struct("<BBHIIIIIIf8H16s")
"""``struct acct_v3`` (``linux/acct.h``): flag, version, tty, exit code, uid, gid, pid,
ppid, start (epoch seconds), elapsed (float, ticks), then eight ``comp_t`` counters (user
and system time first), then the command name (``comm``, at most 15 bytes)."""
VERSION = 3
AHZ = 100
"""The ticks a second that ``comp_t`` times are written in (``AHZ`` on Linux)."""


@dataclass(frozen=True)
class Exited:
    """One process that ended: its whole CPU, and what identifies it."""

    pid: int
    start_s: int
    """When it started, in epoch seconds (the record's resolution)."""
    cpu_s: float
    comm: str
    """Its ``/proc/PID/comm`` at exit: Ray's title (``ray::GangWorker``) cut to 15 bytes."""


def comp_t(v: int) -> int:
    """A ``comp_t``: a 13-bit mantissa and a 3-bit base-8 exponent."""
    return (v & 0x1FFF) << (3 * (v >> 13))


def parse(data: bytes) -> list[Exited]:
    """The records of an accounting file. Raises ValueError naming the offset of a record
    that is not version 3 (a kernel writing another format) or a file cut mid-record."""
    if len(data) % RECORD.size:
        raise ValueError(
            f"accounting file: {len(data)} bytes is not whole {RECORD.size}-byte records"
        )
    out = []
    for off in range(0, len(data), RECORD.size):
        f = RECORD.unpack_from(data, off)
        if f[1] != VERSION:
            raise ValueError(f"accounting file: record at byte {off} is version {f[1]}, not 3")
        pid, start_s, user, system, comm = f[6], f[8], f[10], f[11], f[18]
        cpu = (comp_t(user) + comp_t(system)) / AHZ
        name = comm.split(b"\0", 1)[0].decode(errors="replace")
        out.append(Exited(pid, start_s, cpu, name))
    return out


_LIBC = ctypes.CDLL(None, use_errno=True)


def start(path: Path) -> str | None:
    """Turns accounting on into ``path`` (emptied); None if on, else why it is not."""
    path.write_bytes(b"")
    if _LIBC.acct(os.fsencode(path)) == 0:
        return None
    return f"process accounting is off: {os.strerror(ctypes.get_errno())}"


def stop() -> None:
    """Turns accounting off (host-wide: whoever turned it on)."""
    _LIBC.acct(None)


Key = tuple[int, int]
"""(pid, start time in clock ticks since boot): :mod:`suite_cpu`'s key of a process."""


@dataclass
class Whole:
    """CPU seconds and process counts by kind and by name, every process counted whole."""

    cpu_by_kind: dict[str, float]
    cpu_by_name: dict[str, float]
    procs_by_kind: dict[str, int]
    procs_by_name: dict[str, int]

    def add(self, kind: str, name: str, cpu_s: float) -> None:
        """One process's CPU seconds."""
        self.cpu_by_kind[kind] = self.cpu_by_kind.get(kind, 0.0) + cpu_s
        self.cpu_by_name[name] = self.cpu_by_name.get(name, 0.0) + cpu_s
        self.procs_by_kind[kind] = self.procs_by_kind.get(kind, 0) + 1
        self.procs_by_name[name] = self.procs_by_name.get(name, 0) + 1


def attribute(
    exited: list[Exited],
    baseline: dict[Key, float],
    final: dict[Key, float],
    seen: dict[Key, tuple[str, str]],
    boot_s: float,
    hz: int,
) -> Whole:
    """Each process's CPU during the run, under the kind and name its samples saw (its
    busiest title), or, for one that ended unseen, its ``comm``'s. A process that ended
    counts its record's CPU less what it had at the baseline sample; one still alive at
    the end (``final``, taken after accounting stopped) counts its final less its
    baseline. A zombie of an ended process, still in ``/proc``, counts once."""
    by_pid: dict[int, list[Key]] = {}
    for key in {*seen, *baseline, *final}:
        by_pid.setdefault(key[0], []).append(key)

    def key_of(rec: Exited) -> Key | None:
        for key in by_pid.get(rec.pid, []):
            if abs(boot_s + key[1] / hz - rec.start_s) <= 2.0:
                return key
        return None

    out = Whole({}, {}, {}, {})

    ended: set[Key] = set()
    for rec in exited:
        found = key_of(rec)
        if found is not None:
            ended.add(found)
        if found is not None and found in seen:
            k, n = seen[found]
        else:
            k, n = kind(rec.comm), name(rec.comm)
        before = baseline.get(found, 0.0) if found is not None else 0.0
        out.add(k, n, max(0.0, rec.cpu_s - before))
    for key, cpu in final.items():
        if key not in ended and cpu > baseline.get(key, 0.0):
            k, n = seen.get(key, GONE)
            out.add(k, n, cpu - baseline.get(key, 0.0))
    return out
