"""``lyra moe serve`` waits for the service's first server before any traffic, and
refuses a wait that is not a finite positive number of seconds (naming the flag)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from lyra_ray.cli.moe_serve import add_serve_args, service_spec, wait_for_first_server
from lyra_ray.model.errors import InputError


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_traffic_waits_for_the_first_device_and_says_how_long() -> None:
    clock = FakeClock()
    plans: list[dict[str, Any]] = [{}, {"devices": 0}, {"devices": None}, {"devices": 2}]
    waited = wait_for_first_server(lambda: plans.pop(0), 60.0, clock, clock.sleep)
    assert waited == pytest.approx(1.5)  # three polls half a second apart
    assert plans == []


def test_no_server_within_the_wait_is_none() -> None:
    clock = FakeClock()
    assert wait_for_first_server(lambda: {}, 3.0, clock, clock.sleep) is None
    assert clock.now == pytest.approx(3.0)


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_a_bad_wait_names_the_flag(bad: str) -> None:
    p = argparse.ArgumentParser()
    add_serve_args(p)
    with pytest.raises(InputError, match="--ready-s"):
        service_spec(p.parse_args(["--ready-s", bad]))
