"""The pure layer must not import Ray: policies run identically in the simulator."""

import subprocess
import sys

PURE_PACKAGES = [
    "lyra_ray.model",
    "lyra_ray.autoscale",
    "lyra_ray.scheduling",
    "lyra_ray.sim",
    "lyra_ray.telemetry",
    "lyra_ray.network",
    "lyra_ray.parallelism",
    "lyra_ray.policies",
    "lyra_ray.placement",
]
"""Every module under these is pure: the layers ARCHITECTURE.md marks PURE."""
PURE = [
    "lyra_ray.serving.demand",
    "lyra_ray.serving.load_pattern",
    "lyra_ray.serving.checks",
    "lyra_ray.serving.spec",
    "lyra_ray.serving.capacity",
    "lyra_ray.serving.meter",
    "lyra_ray.serving.moe_plan",
    "lyra_ray.serving.app_spec",
    "lyra_ray.serving.app_fields",
    "lyra_ray.serving.app_deployment",
    "lyra_ray.serving.copy_plan",
    "lyra_ray.serving.retry",
    "lyra_ray.serving.restore",
    "lyra_ray.serving.names",
    "lyra_ray.serving.proxy_http",
    "lyra_ray.moe_serving.model",
    "lyra_ray.moe_serving.popularity",
    "lyra_ray.moe_serving.planner",
    "lyra_ray.moe_serving.dynamic",
    "lyra_ray.moe_serving.bottleneck",
    "lyra_ray.moe_serving.route_estimator",
    "lyra_ray.moe_serving.route_stream",
    "lyra_ray.moe_serving.hf_moe",
    "lyra_ray.moe_serving.hf_arch",
    "lyra_ray.moe_serving.popularity_map",
    "lyra_ray.moe_serving.batch_regime",
    "lyra_ray.moe_serving.engine_map",
    # the profiler's measuring side runs where only torch is (a bare GPU machine)
    "lyra_ray.profiling.meter",
    "lyra_ray.profiling.plan",
    "lyra_ray.profiling.core",
    "lyra_ray.jobs.models",
]


def test_pure_modules_do_not_import_ray() -> None:
    code = (
        "import importlib, pkgutil, sys\n"
        f"for p in {PURE_PACKAGES!r}:\n"
        "    pkg = importlib.import_module(p)\n"
        "    for i in pkgutil.walk_packages(pkg.__path__, p + '.'):\n"
        "        importlib.import_module(i.name)\n"
        f"for m in {PURE!r}: importlib.import_module(m)\n"
        "from lyra_ray.policies.base import available_policies; available_policies()\n"
        "bad = sorted(k for k in sys.modules if k == 'ray' or k.startswith('ray.'))\n"
        "assert not bad, bad[:5]\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
