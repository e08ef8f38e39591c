"""One throughput measurement, with torch and the standard library only.

Each side of a measurement (one job alone, or both jobs of a pair) steps in a process of
its own, as jobs sharing a GPU do (plain time-slicing between two CUDA contexts; threads
of one process would share a context and overlap differently). The parent starts the
sides, lets them build their models, starts them together, and stops them all once
every side's :class:`~lyra_ray.profiling.meter.Meter` is done: a pair side that
converged first keeps stepping so that its partner is never measured alone.

The protocol is lines on the child's stdout behind :data:`MARK` (a user's loop may
print too) and one ``go`` and one ``stop`` line on its stdin. Why processes we start
ourselves rather than :mod:`multiprocessing`: inside a Ray worker, ``spawn`` would
re-import the worker's own ``__main__``.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from lyra_ray.contract.profiling import PROFILE_KEY, set_active
from lyra_ray.profiling.meter import Meter, MeterSettings

MARK = "@@lyra-profile "
BUILD_TIMEOUT_S = 300.0
"""A side that has not built its model (imports included) by then has failed."""


def measure(
    sides: Sequence[Mapping[str, Any]],
    settings: MeterSettings,
    device: str | None = None,
    on_line: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure ``sides`` stepping at once; one result per side (see ``Meter.result``),
    or ``{"error": "..."}`` for a side that failed (its partner's result is then kept
    only if it had converged before). ``on_line`` gets the children's other output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lyra_ray.profiling.core",
                json.dumps({"side": dict(s), "settings": settings.to_dict(), "device": device}),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for s in sides
    ]
    events: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
    for i, p in enumerate(procs):
        threading.Thread(target=_read, args=(i, p, events, on_line), daemon=True).start()
    results: list[dict[str, Any] | None] = [None] * len(procs)
    try:
        ready = _collect(events, results, "ready", len(procs), BUILD_TIMEOUT_S)
        if ready:
            for p in procs:
                _send(p, "go")
            _collect(events, results, "result", len(procs), settings.cap_s * 2 + 60.0)
    finally:
        for p in procs:
            _send(p, "stop")
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    failed = any(r is not None and "error" in r for r in results)
    why = "not measured: its partner failed" if failed else "did not finish in time"
    return [r if r is not None else {"error": why} for r in results]


def _read(
    i: int,
    p: subprocess.Popen[str],
    events: queue.Queue[tuple[int, dict[str, Any]]],
    on_line: Callable[[str], None] | None,
) -> None:
    assert p.stdout is not None
    tail: list[str] = []
    for line in p.stdout:
        if line.startswith(MARK):
            events.put((i, json.loads(line[len(MARK) :])))
        else:
            tail = [*tail[-20:], line.rstrip()]
            if on_line is not None:
                on_line(line.rstrip())
    code = p.wait()
    last = next((t for t in reversed(tail) if t.strip()), f"exit code {code}")
    events.put((i, {"kind": "exit", "code": code, "last": last}))


def _collect(
    events: queue.Queue[tuple[int, dict[str, Any]]],
    results: list[dict[str, Any] | None],
    kind: str,
    n: int,
    timeout_s: float,
) -> bool:
    """Wait for ``kind`` from every side; False as soon as one side failed."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while len(seen) < n:
        try:
            i, msg = events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if msg.get("kind") == "error" or (msg.get("kind") == "exit" and results[i] is None):
            results[i] = {"error": msg.get("error") or f"exited: {msg.get('last')}"}
            return False
        if msg.get("kind") == kind:
            seen.add(i)
            if kind == "result":
                results[i] = msg["result"]
    return True


def _send(p: subprocess.Popen[str], line: str) -> None:
    try:
        assert p.stdin is not None
        p.stdin.write(line + "\n")
        p.stdin.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the side has exited already


# --------------------------------------------------------------------------- the child


def _say(out: IO[str], kind: str, **fields: Any) -> None:
    out.write(MARK + json.dumps({"kind": kind, **fields}) + "\n")
    out.flush()


def _side(raw: Mapping[str, Any]) -> int:
    out = sys.stdout
    side, settings = raw["side"], MeterSettings.from_dict(raw["settings"])
    commands: queue.Queue[str] = queue.Queue()

    def listen() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("stop")

    threading.Thread(target=listen, daemon=True).start()
    import torch

    device = raw.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        torch.set_num_threads(1)  # two sides on a 2-core host must not fight over threads
    meter = Meter(settings)
    stop = threading.Event()
    reported = False

    def hook(steps: int) -> bool:
        nonlocal reported
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        meter.tick(time.monotonic(), steps)
        if meter.done and not reported:
            reported = True
            _say(out, "result", result=meter.result())
        if not commands.empty() and commands.get() == "stop":
            stop.set()
        return stop.is_set()

    try:
        run = _runner(side, device)
    except Exception as e:  # the job's own code or a bad job type: one line, named
        _say(out, "error", error=f"{type(e).__name__}: {e}")
        return 1
    _say(out, "ready")
    if commands.get() != "go":
        return 0
    try:
        run(hook)
    except Exception as e:
        _say(out, "error", error=f"{type(e).__name__}: {e}")
        return 1
    if not reported:
        _say(out, "result", result=meter.result())
    return 0


def _runner(side: Mapping[str, Any], device: str) -> Callable[[Callable[[int], bool]], None]:
    """What steps the side: a catalogue model (:mod:`lyra_ray.jobs.models`), or the user's own
    Train loop run with :class:`~lyra_ray.train.StepLoop` in profile mode."""
    if "job_type" in side:
        from lyra_ray.jobs.models import build

        step = build(str(side["job_type"]), str(side.get("size", "tiny")), device).step

        def run_model(hook: Callable[[int], bool]) -> None:
            n = 0
            while True:
                step()
                n += 1
                if hook(n):
                    return

        return run_model
    import importlib

    from lyra_ray.train.signature import call_loop

    module, fn = str(side["entrypoint"]).split(":")
    loop = getattr(importlib.import_module(module), fn)
    config = {**dict(side.get("config") or {}), PROFILE_KEY: {"in_train": False}}

    def run_loop(hook: Callable[[int], bool]) -> None:
        set_active(hook)
        call_loop(loop, config)  # as Ray Train calls it: with the config, or with nothing

    return run_loop


if __name__ == "__main__":
    raise SystemExit(_side(json.loads(sys.argv[1])))
