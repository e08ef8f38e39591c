"""The scheduler actor's module must not import PyTorch or Ray Train.

Why: the scheduler never runs a training step, yet every start and every restart of its
actor imports its module. Through ``lyra_ray.train.step_loop`` it once pulled in PyTorch
and Ray Train, 2.4 s of a 3.4-s import on an idle core (more on a loaded one), paid
again at each restart the chaos tests and a real head's recovery go through.
"""

import subprocess
import sys

import pytest

HEAVY = ("torch", "ray.train")


@pytest.mark.parametrize(
    "module",
    [
        "lyra_ray.runtime.scheduler",
        # Every job's start creates its gang coordinator, a process of its own: importing
        # torch and Ray Train there for the backend rule cost ~2.4 s on that path
        # (``lyra_ray/train/backend_rule.py``).
        "lyra_ray.runtime.gang",
    ],
)
def test_importing_it_loads_neither_torch_nor_ray_train(module: str) -> None:
    code = f"import sys, {module}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_public_names_still_come_from_the_package() -> None:
    """``from lyra_ray.train import StepLoop`` is the users' API: resolved on first use."""
    import lyra_ray.train as train
    from lyra_ray.contract.names import RESUME_KEY
    from lyra_ray.train.step_loop import StepLoop

    assert train.StepLoop is StepLoop
    assert train.RESUME_KEY == RESUME_KEY
    try:
        train.nothing  # noqa: B018
    except AttributeError as e:
        assert "nothing" in str(e)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
