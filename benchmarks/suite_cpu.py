"""Where ``make test``'s CPU goes, by kind of process, and the floor it sets on its time.

Why: the suite's goal is a wall time (20 min on a 2-core host), and a wall time cannot
be shorter than the CPU the run needs divided by the cores. Scheduling the tests
differently (more processes, priorities) only moves work around inside that floor;
getting under it takes less CPU. This runs a command (the whole suite, or a module),
samples ``/proc`` every ``--every`` seconds, and stores in
``benchmarks/results/suite_cpu.json``:

- the host's busy CPU seconds over the run, from ``/proc/stat`` (every process on the
  host, kernel time included: run it on an otherwise idle host, or say what else ran);
- ``floor_min``: those seconds over the host's cores, in minutes;
- ``calibration_s``: a fixed pure-Python loop's seconds (the fastest of three), timed
  before the command: one core's speed, so that runs on different hosts compare (the
  same suite took 21-26 min on one VM of this project and 31-37 min on the next);
- CPU seconds and process counts by kind of process (:mod:`benchmarks._proc_kinds`) and
  by name. Where the kernel's process accounting can be turned on (root), every process
  that ended is counted whole from its record (:mod:`benchmarks._proc_acct`), named by
  what the samples of ``/proc`` saw it run as; ``counted_by`` says so. Elsewhere the
  samples alone count, and undercount: a process that starts and ends between two
  samples is missed, and one that ends loses its CPU since its last sample.
  ``counted_share`` says how much of the host's busy CPU the kinds hold.

    .venv/bin/python -m benchmarks.suite_cpu --note "quiet host" -- bash -c 'LYRA_CI=1 .ci/run'

The command's exit status is this script's; its output passes through.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _proc_acct
from benchmarks._proc_kinds import cpu_deltas, kind, name, ran_as
from benchmarks._runs_file import append_run

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "suite_cpu.json"
HZ = os.sysconf("SC_CLK_TCK")


def host_busy_s() -> float:
    """CPU seconds the host has spent not idle (all cores), from ``/proc/stat``'s first
    line: user, nice, system, irq, softirq, steal; idle and iowait excluded."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / HZ


CALIBRATION_N = 2_000_000


def calibration_s(n: int = CALIBRATION_N, reps: int = 3) -> float:
    """Seconds for a fixed CPU-bound loop on one core, the fastest of ``reps``."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        sum(i * i for i in range(n))
        best = min(best, time.perf_counter() - t0)
    return best


Key = tuple[int, int]
"""(pid, start time in ticks): a reused pid is another process."""


def snapshot() -> tuple[dict[Key, float], dict[Key, tuple[str, str]]]:
    """Every process's CPU seconds so far, and its kind and name (:mod:`_proc_kinds`)."""
    cpu: dict[Key, float] = {}
    kinds: dict[Key, tuple[str, str]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline") as f:
                cmd = f.read()
        except OSError:  # gone between the listing and the read
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        key = (int(pid), int(rest[19]))
        cpu[key] = (int(rest[11]) + int(rest[12])) / HZ  # utime + stime
        kinds[key] = (kind(cmd), name(cmd))
    return cpu, kinds


class Sampler:
    """Samples ``/proc`` in a thread until :meth:`stop`: each process's CPU seconds since
    the first sample, and what it ran as."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.cpu: dict[Key, float] = defaultdict(float)
        """CPU seconds each process spent between the samples (what they saw)."""
        self.seen: dict[Key, tuple[str, str]] = {}
        """Each process's kind and name (:func:`ran_as`)."""
        self.baseline: dict[Key, float] = {}
        self.last: dict[Key, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self.baseline, self.seen = snapshot()
        self.last = dict(self.baseline)
        self._thread.start()
        return self

    def sample(self) -> None:
        now, kinds = snapshot()
        for key, d in cpu_deltas(self.last, now).items():
            self.cpu[key] += d
        for key, k in kinds.items():
            self.seen[key] = ran_as(self.seen.get(key), k)
        self.last = now

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        """The last sample (after accounting stopped: see :func:`_proc_acct.attribute`)."""
        self._stop.set()
        self._thread.join()
        self.sample()

    def sampled(self) -> _proc_acct.Whole:
        """What the samples alone saw, by kind and name."""
        out = _proc_acct.Whole({}, {}, {}, {})
        for key, cpu in self.cpu.items():
            out.add(*self.seen[key], cpu)
        return out


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True)
    return out.stdout.decode().strip() or "unknown"


TOP_NAMES = 25
"""The names kept: the processes worth a look when a kind is larger than it should be."""


def summarise(
    wall_s: float, busy_s: float, cores: int, counted: _proc_acct.Whole
) -> dict[str, Any]:
    """The stored record: totals, the floor, each kind's seconds, share and processes,
    and the ``TOP_NAMES`` names that spent the most."""
    total = sum(counted.cpu_by_kind.values())
    return {
        "wall_s": round(wall_s, 1),
        "cores": cores,
        "host_busy_cpu_s": round(busy_s, 1),
        "host_busy_share": round(busy_s / (wall_s * cores), 3) if wall_s > 0 else None,
        "floor_min": round(busy_s / cores / 60, 1),
        "counted_cpu_s": round(total, 1),
        "counted_share": round(total / busy_s, 3) if busy_s > 0 else None,
        "by_kind": {
            k: {
                "cpu_s": round(v, 1),
                "share": round(v / total, 3) if total else 0.0,
                "processes": counted.procs_by_kind[k],
            }
            for k, v in sorted(counted.cpu_by_kind.items(), key=lambda kv: -kv[1])
        },
        "top_names": {
            k: {"cpu_s": round(v, 1), "processes": counted.procs_by_name[k]}
            for k, v in sorted(counted.cpu_by_name.items(), key=lambda kv: -kv[1])[:TOP_NAMES]
        },
    }


def boot_s() -> float:
    """When the host booted, in epoch seconds (``/proc/stat``'s ``btime``)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise RuntimeError("/proc/stat has no btime line")


HELD = "LYRA_SUITE_CPU_ACCOUNTING"
"""Set in the measured command's environment while accounting is on. Accounting is one
host-wide setting: a run inside the measured one (the suite's own test of this script)
that turned it on and off would take the outer run's records, so it leaves it alone."""


def measure(cmd: list[str], every_s: float) -> tuple[int, str, _proc_acct.Whole]:
    """Runs ``cmd``: its exit status, what counted its processes, and their CPU."""
    fd, name = tempfile.mkstemp(prefix="suite_cpu-", suffix=".acct")
    os.close(fd)
    acct = Path(name)
    try:
        if os.environ.get(HELD):
            why_not: str | None = "process accounting is held by an outer run"
        else:
            why_not = _proc_acct.start(acct)
        sampler = Sampler(every_s).start()
        try:
            child = subprocess.Popen(cmd, env={**os.environ, HELD: "1"})
            try:
                rc = child.wait()
            except BaseException:  # interrupted: the command goes too, as subprocess.run does
                child.kill()
                child.wait()
                raise
        finally:
            if why_not is None:
                _proc_acct.stop()
            sampler.stop()
        if why_not is None:
            exited = _proc_acct.parse(acct.read_bytes())
            if any(rec.pid == child.pid for rec in exited):
                whole = _proc_acct.attribute(
                    exited, sampler.baseline, sampler.last, sampler.seen, boot_s(), HZ
                )
                return rc, "process accounting", whole
            why_not = "process accounting was turned off or moved by another program"
        return rc, f"samples every {every_s:g} s ({why_not})", sampler.sampled()
    finally:
        acct.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    ap.add_argument("--note", default="", help="what ran beside it, the host's load")
    ap.add_argument("--out", type=Path, default=OUT, help="the results JSON (appended to)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("'command': give the command to measure after --")
    if not (args.every > 0 and args.every < 3600):
        ap.error(f"'--every': a number of seconds in (0, 3600), got {args.every}")
    cores = os.cpu_count() or 1
    at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    calib = calibration_s()
    t0, busy0 = time.monotonic(), host_busy_s()
    rc, counted_by, counted = measure(cmd, args.every)
    run = {
        "at": at,
        "commit": _commit(),
        "command": " ".join(cmd),
        "exit": rc,
        "note": args.note,
        "host": f"{platform.system()} {platform.machine()}, {cores} cores",
        "calibration_s": round(calib, 3),
        "counted_by": counted_by,
        **summarise(time.monotonic() - t0, host_busy_s() - busy0, cores, counted),
    }
    append_run(args.out, run)
    sys.stderr.write(
        f"suite_cpu: {run['host_busy_cpu_s']:.0f} CPU-s busy in {run['wall_s'] / 60:.1f} min "
        f"on {cores} cores: a floor of {run['floor_min']:.1f} min; "
        f"{100 * (run['counted_share'] or 0):.0f} % of it counted by {counted_by} "
        f"(exit {rc}) -> {args.out}\n"
    )
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
