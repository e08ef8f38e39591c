"""The simulator's compiled core decides exactly as the interpreted one, and is never used
stale (lyra_ray/native.py).

The equivalence runs ``lyra simulate`` twice per case, compiled and interpreted, and
compares the whole JSON reports (every job's record, every summary figure) but for the
wall time and the flag saying which ran. It needs the build (``make native``, which
``make test`` runs); without one it skips, except under CI (``LYRA_CI``), where a
missing build is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lyra_ray import native

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
GAVEL_TRACE = (
    SHARED / "gavel" / "traces" / "generated_continuous_single_seed0_lam1200_3000jobs.trace"
)
GAVEL_TPUT = SHARED / "gavel" / "simulation_throughputs.json"
DEMO = ROOT / "lyra_ray" / "data" / "demo_jobs.yaml"
EXAMPLE = ROOT / "tests" / "data" / "lyra_example.yaml"


def _gavel(policy: str, jobs: int = 160, cluster: str = "v100=8,p100=8,k80=8") -> list[str]:
    files = ["--trace", str(GAVEL_TRACE), "--throughputs", str(GAVEL_TPUT)]
    return [*files, "--policy", policy, "--max-jobs", str(jobs), "--cluster", cluster]


EXAMPLE_LYRA = ["--trace", str(EXAMPLE), "--policy", "lyra"]
RING = ["--network", "servers_per_rack=2,nic_gbps=25,oversubscription=4", "--placer", "ring"]
CASES: dict[str, list[str]] = {
    "gavel-fifo": _gavel("fifo"),
    "gavel-fifo_perf": _gavel("fifo_perf"),
    "gavel-max_min_fairness": _gavel("max_min_fairness"),
    "gavel-max_min_fairness_perf": _gavel("max_min_fairness_perf"),
    "gavel-finish_time_fairness_perf": _gavel("finish_time_fairness_perf"),
    "gavel-packed-backfill": [
        *_gavel("max_min_fairness_packed", 50, "v100=4,p100=4,k80=4"),
        "--backfill",
    ],
    "demo-fifo_nonpreemptive": [
        *("--trace", str(DEMO), "--cluster", "v100=8,p100=8,k80=16", "--gpus-per-node", "4"),
        *("--policy", "fifo_nonpreemptive"),
    ],
    "example-lyra-loans": [*EXAMPLE_LYRA, "--cluster", "v100=4,k80=8", "--inference", "t4=8"],
    "pollux-lyra-rates": [  # measured curves, per-job restart prices, moves, rate series
        *("--format", "pollux", "--trace", str(SHARED / "pollux/workloads/workload-3.csv")),
        *("--throughputs", str(SHARED / "elasticflow"), "--policy", "lyra"),
        *("--cluster", "a100=4x8", "--inference", "t4=8x4"),
        "--serving-demand",
        f"{SHARED / 'servegen/language-m-large.csv'}@160,"
        f"{SHARED / 'servegen/language-m-mid.csv'}@1000",
    ],
    "example-lyra-network-ring": [
        *EXAMPLE_LYRA,
        *("--cluster", "v100=8,k80=8", "--gpus-per-node", "2"),
        *RING,
    ],
}


def _build_or_skip() -> None:
    build = native.read_build()
    # the runs are fresh processes: whether this one imported the core does not matter
    why = (
        "no build (make native)"
        if build is None
        else native.stale_reason(build, this_process=False)
    )
    if why is not None:
        if os.environ.get("LYRA_CI"):
            pytest.fail(f"the compiled core cannot be used: {why}")
        pytest.skip(f"the compiled core cannot be used: {why}")


def _simulate(args: list[str], compiled: bool, out: Path) -> dict[str, Any]:
    env = {**os.environ, "LYRA_NATIVE": "1" if compiled else "0"}
    cmd = [sys.executable, "-m", "lyra_ray.cli", "simulate", *args, "--json", str(out), "--quiet"]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, timeout=300)
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_compiled_core_writes_the_same_report(case: str, tmp_path: Path) -> None:
    args = CASES[case]
    if "--throughputs" in args and not GAVEL_TPUT.exists():
        pytest.skip("shared data absent")
    _build_or_skip()
    fast = _simulate(args, True, tmp_path / "compiled.json")
    slow = _simulate(args, False, tmp_path / "interpreted.json")
    assert fast["meta"].pop("compiled_core") is True
    assert slow["meta"].pop("compiled_core") is False
    fast.pop("wall_s")
    slow.pop("wall_s")
    assert fast["jobs"], case  # the case ran jobs
    assert fast == slow


def _fake_build(tmp: Path, sources: dict[str, str] | None = None) -> Path:
    """A manifest naming one file per compiled module, each an empty 'extension'."""
    suffix = native.importlib.machinery.EXTENSION_SUFFIXES[0]
    files = {}
    for m in native.MODULES:
        rel = f"lib/{m.replace('.', '/')}{suffix}"
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(b"")
        files[m] = rel
    if sources is None:
        sources = {m: native.source_hash(native.source_path(m)) for m in native.MODULES}
    (tmp / native.MANIFEST).write_text(json.dumps({"files": files, "sources": sources}))
    return tmp


def test_a_build_of_other_sources_is_never_used(tmp_path: Path) -> None:
    first = native.MODULES[0]
    build = native.read_build(_fake_build(tmp_path, {m: "0" * 64 for m in native.MODULES}))
    assert build is not None
    why = native.stale_reason(build)
    assert why is not None and "changed since the build" in why
    assert native.source_path(first).relative_to(ROOT).as_posix() in why


def test_a_build_of_another_module_list_or_with_a_file_missing_is_not_used(
    tmp_path: Path,
) -> None:
    fewer = {m: "0" * 64 for m in native.MODULES[1:]}
    build = native.read_build(_fake_build(tmp_path / "a", fewer))
    assert build is not None and "another list of modules" in str(native.stale_reason(build))
    build = native.read_build(_fake_build(tmp_path / "b"))
    assert build is not None
    next(iter(build.files.values())).unlink()
    assert "is missing" in str(native.stale_reason(build))


def test_a_build_whose_modules_are_already_imported_is_not_used(tmp_path: Path) -> None:
    import lyra_ray.scheduling.rounds  # noqa: F401  (interpreted, in this process)

    build = native.read_build(_fake_build(tmp_path))
    assert build is not None
    why = native.stale_reason(build)
    assert why is not None and "already imported" in why
    assert native.stale_reason(build, this_process=False) is None


@pytest.mark.parametrize("text", ["", "{", "[]", '{"files": 3, "sources": {}}', "null"])
def test_an_unreadable_manifest_means_no_build(tmp_path: Path, text: str) -> None:
    (tmp_path / native.MANIFEST).write_text(text)
    assert native.read_build(tmp_path) is None
    assert native.read_build(tmp_path / "absent") is None


def test_lyra_native_0_turns_it_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LYRA_NATIVE", "0")
    assert native.activate(_fake_build(tmp_path)) is False
    assert not native.active()
