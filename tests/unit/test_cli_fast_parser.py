"""``lyra simulate`` builds only its own group's parser (start-up counts in a replay's
whole-process time); it must parse exactly as the full parser does."""

from __future__ import annotations

import pytest

from lyra_ray.cli.main import _ALONE, _command, build_parser

ARGV = [
    ["simulate", "--trace", "t.trace", "--policy", "fifo_perf", "--quiet"],
    ["-v", "simulate", "--trace", "x.yaml", "--cluster", "v100=2x4", "--jct-window", "1:9"],
    ["simulate", "--trace", "x.yaml", "--policy", "lyra", "--policy-arg", "finish_first=all"],
]


@pytest.mark.parametrize("argv", ARGV)
def test_fast_parser_parses_as_the_full_one(argv: list[str]) -> None:
    cmd = _command(argv)
    assert cmd in _ALONE
    fast = vars(build_parser(cmd).parse_args(argv))
    full = vars(build_parser().parse_args(argv))
    assert fast.keys() == full.keys()
    assert {k: v for k, v in fast.items() if k != "func"} == {
        k: v for k, v in full.items() if k != "func"
    }
    assert fast["func"] is full["func"]


def test_top_level_help_and_version_list_every_command() -> None:
    assert _command(["--help", "simulate"]) is None
    assert _command(["-v", "--version"]) is None
    assert _command(["-v", "status"]) == "status"
    assert _command([]) is None
