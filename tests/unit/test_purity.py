"""The pure layer must not import Ray: policies run identically in the simulator."""

import subprocess
import sys

PURE = [
    "lyra_ray.model",
    "lyra_ray.core",
    "lyra_ray.diff",
    "lyra_ray.interfaces",
    "lyra_ray.round_greedy",
    "lyra_ray.type_order",
    "lyra_ray.state",
    "lyra_ray.spec",
    "lyra_ray.throughput",
    "lyra_ray.scaling",
    "lyra_ray.sim.simulator",
    "lyra_ray.sim.traces",
    "lyra_ray.sim.report",
    "policies.base",
    "placement.placer",
]
OPTIONAL = [
    "lyra_ray.rounds",
    "policies.gavel",
    "policies.lyra",
    "placement.reclaim",
    "moe_serving.model",
    "moe_serving.popularity",
    "moe_serving.planner",
    "moe_serving.dynamic",
    "moe_serving.bottleneck",
]


def test_pure_modules_do_not_import_ray() -> None:
    code = (
        "import importlib, importlib.util, sys\n"
        f"for m in {PURE!r}: importlib.import_module(m)\n"
        f"for m in {OPTIONAL!r}:\n"
        "    if importlib.util.find_spec(m.rsplit('.', 1)[0] if '.' in m else m) and "
        "importlib.util.find_spec(m): importlib.import_module(m)\n"
        "from policies.base import available_policies; available_policies()\n"
        "bad = sorted(k for k in sys.modules if k == 'ray' or k.startswith('ray.'))\n"
        "assert not bad, bad[:5]\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
