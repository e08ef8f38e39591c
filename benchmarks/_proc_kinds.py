"""What kind of process a command line is, for :mod:`benchmarks.suite_cpu`.

Ray renames its processes (``ray::GangWorker.run``, ``ray::IDLE``, ``ray::DashboardAgent``),
so a ``/proc/PID/cmdline`` says which part of the stack spends the CPU: the tests' own
jobs, lyra's actors, Ray's core, its dashboard and agents, the tests' processes.
"""

from __future__ import annotations

import re

KINDS: tuple[tuple[str, str], ...] = (
    (
        r"^ray::(GangWorker|Gang\b|RayTrainWor|TrainContro|TrainTraina)",
        "training workers",
    ),
    (r"^ray::(_import_en|RunControl|_RunContro)", "training control"),
    (r"^ray::GlobalSche", "lyra scheduler"),
    (r"^ray::ServeRepli", "serving replicas"),
    (r"^ray::(ServeContr|ProxyActor|ServeProxy)", "Serve controller and proxy"),
    # Before the patterns that match anywhere in a command line, and on the program
    # alone: a raylet's own arguments name the commands it starts
    # (``--python_worker_command=... default_worker.py``, ``--agent_command=...
    # dashboard/agent.py``), which the later patterns match.
    (r"^(\S*/)?(gcs_server|raylet)( |$)", "Ray core (GCS, raylets)"),
    (r"^ray::(IDLE|SpillWorke|RestoreWor)|default_worker\.py", "Ray idle workers"),
    (
        r"dashboard/dashboard\.py|ray-dashboard-|^ray::(DashboardA|RuntimeEnv)"
        r"|dashboard/agent\.py|runtime_env/agent|log_monitor\.py|autoscaler/_private/monitor"
        r"|/monitor\.py",
        "Ray dashboard, agents, monitors",
    ),
    (
        r"^ray::JobSupervi|ray job submit|lyra_ray\.cli|/bin/lyra "
        r"|(^|/)ray (start|job) |^(ray|lyra)$",
        "job drivers and CLI",
    ),
    (r"^ray::", "other Ray actors and tasks"),
    (r"pytest|exec\(eval\(sys\.stdin\.readline", "pytest processes"),
    (r"chrom|prometheus|redis-server|grafana", "tools (Chromium, Prometheus, Redis)"),
)
"""First match wins; a command line that matches none is ``other``. Ray's titles are
matched on their first 15 bytes (``ray::GangWorker``, ``ray::RayTrainWor``): that is all
of them a process's ``comm`` keeps, which is what names a process that ended unseen
(:mod:`benchmarks._proc_acct`). pytest-xdist's workers
run as ``python -c "import sys;exec(eval(sys.stdin.readline()))"`` (execnet): they are
the pytest processes that run the tests, the unit tiers' work included."""
_COMPILED = tuple((re.compile(p), k) for p, k in KINDS)


def kind(cmdline: str) -> str:
    """The kind of the process whose ``/proc/PID/cmdline`` (NUL-separated) this is."""
    line = cmdline.replace("\0", " ").strip()
    for pattern, name in _COMPILED:
        if pattern.search(line):
            return name
    return "other"


def name(cmdline: str) -> str:
    """A process's name within its kind: Ray's process title (``ray::GangWorker.run``,
    the Serve replica's application and deployment, not its replica id), else the
    program's file name; for a Python interpreter, what it runs (``python -m pytest``,
    ``python -c``, ``ray start``, ``dashboard.py``), since hundreds of short-lived
    ``python`` processes otherwise share one name."""
    args = [a for a in cmdline.split("\0") if a]
    first = args[0].strip() if args else ""
    if first.startswith("ray::"):
        title = first.split(" ", 1)[0]
        replica = re.match(r"(ray::ServeReplica:[^:]+:[^.:]+)", title)
        return (replica.group(1) if replica else title)[:60]
    if re.match(r"[\w.:-]+ \(", first):
        # A title set over the whole command line, with the command after it in
        # parentheses: Ray dashboard's module processes (``ray-dashboard-JobHead-0
        # (/v/bin/python -c "...forkserver...sys_path: [...]")``), whose last ``/`` would
        # otherwise name them by a fragment of their search path.
        return first.split(" ", 1)[0][:60]
    prog = first.rsplit("/", 1)[-1] or "?"
    if not re.fullmatch(r"python[0-9.]*", prog):
        return prog[:60]
    rest = args[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        rest = rest[1:]  # the interpreter's own options (-u, -B, -X ...)
    if not rest:
        return prog
    if rest[0] == "-c":
        return f"{prog} -c"
    if rest[0] == "-m":
        return f"{prog} -m {rest[1] if len(rest) > 1 else ''}".strip()[:60]
    script = rest[0].rsplit("/", 1)[-1]
    if script in ("ray", "lyra") and len(rest) > 1:  # the CLIs: which command
        return f"{script} {rest[1]}"[:60]
    return script[:60]


IDLE = "Ray idle workers"
GONE = ("other", "?")
"""An empty command line's kind and name: a zombie's, or a process between fork and exec."""


def ran_as(old: tuple[str, str] | None, new: tuple[str, str]) -> tuple[str, str]:
    """What a process ran as, from an earlier sample's kind and name and a later one's:
    the later, but a Ray worker's task or actor is kept over the ``ray::IDLE`` it goes
    back to, and anything over the empty command line of the zombie it becomes (whose
    exit record the accounting then names by the kind it had)."""
    if old is not None and (new[0] == IDLE or new == GONE):
        return old
    return new


def cpu_deltas(
    prev: dict[tuple[int, int], float], now: dict[tuple[int, int], float]
) -> dict[tuple[int, int], float]:
    """CPU seconds each process spent since the last sample. A process is keyed by (pid,
    start time), so a reused pid is a new process; one first seen now counts all its CPU
    (it started since the last sample: the first sample is the baseline, never a delta)."""
    out = {}
    for key, cpu in now.items():
        before = prev.get(key, 0.0)
        if cpu > before:
            out[key] = cpu - before
    return out
