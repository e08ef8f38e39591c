"""A policy's own settings from the command line (``lyra simulate --policy-arg``,
lyra_ray/policies/args.py): each checked against the policy's signature and type hints,
a refusal naming the setting, and the settings as given recorded in the report."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from lyra_ray.cli.main import main
from lyra_ray.policies.args import parse_policy_args
from lyra_ray.policies.base import PolicyError
from lyra_ray.policies.lyra.two_phase import LyraPolicy

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "lyra_example.yaml"


def test_each_item_is_one_scalar_of_the_settings_type() -> None:
    got = parse_policy_args(
        "lyra",
        ["finish_first=rigid", "move_gain_s=3600", "lend_after_s=null", "mixed_types=false"],
    )
    assert got == {"finish_first": "rigid", "move_gain_s": 3600.0, "lend_after_s": None,
                   "mixed_types": False}  # fmt: skip
    assert isinstance(got["move_gain_s"], float)
    assert parse_policy_args("lyra", []) == {}


@pytest.mark.parametrize(
    ("items", "said"),
    [
        (["finish_first=yes"], "finish_first: Input should be 'rigid' or 'all'"),
        (["move_gain_s=soon"], "move_gain_s: Input should be a valid number"),
        (["move_gain_s=.nan"], "move_gain_s: must be a finite number or null"),
        (["move_gain_s=-.inf"], "move_gain_s: must be a finite number or null"),
        (["search_limit=2.5"], "search_limit: Input should be a valid integer"),
        (["reclaim=[naive]"], "reclaim: takes one value"),
        (["nope=1"], "policy 'lyra' has no setting 'nope' (its settings: elastic, finish_first"),
        (["move_gain_s"], "expected KEY=VALUE"),
        (["=3"], "expected KEY=VALUE"),
        (["move_gain_s=1", "move_gain_s=2"], "move_gain_s: given twice"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(items: list[str], said: str) -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy_args("lyra", items)
    assert said in str(e.value), str(e.value)


def test_basic_keeps_its_definition_and_refuses_every_setting() -> None:
    """``basic`` ignores what it is passed (the paper's scenario, fixed): a setting given
    to it would otherwise be dropped without a word."""
    with pytest.raises(PolicyError, match=r"'basic' has no setting 'move_gain_s'.*its own"):
        parse_policy_args("basic", ["move_gain_s=1"])


def test_the_policys_own_range_checks_hold_for_python_callers_too() -> None:
    for kw, name in (({"search_limit": 12}, "search_limit"), ({"reserve_fraction": 1.5},
                     "reserve_fraction"), ({"move_gain_s": float("nan")}, "move_gain_s"),
                     ({"lend_after_s": -1.0}, "lend_after_s")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            LyraPolicy(**kw)  # type: ignore[arg-type]


def _simulate(*extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["simulate", "--format", "yaml", "--trace", str(EXAMPLE), "--cluster", "v100=8",
            "--policy", "lyra", "--resize-overhead", "0", "--quiet", *extra]  # fmt: skip
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def test_lyra_simulate_takes_them_and_records_them(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    code, _, err = _simulate("--policy-arg", "finish_first=rigid", "--json", str(report))
    assert code == 0, err
    assert json.loads(report.read_text())["meta"]["policy_args"] == {"finish_first": "rigid"}


@pytest.mark.parametrize("item", ["search_limit=12", "finish_first=yes", "nope=1"])
def test_lyra_simulate_refuses_one_line_naming_the_flag(item: str) -> None:
    code, _, err = _simulate("--policy-arg", item)
    assert code == 2 and "--policy-arg: " in err and "Traceback" not in err, err
    assert item.split("=")[0] in err.strip().splitlines()[-1]


def test_the_live_config_checks_them_before_the_scheduler_starts() -> None:
    """``policy_args`` in the scheduler's config are refused at load, naming the field, not
    in the scheduler actor (where a bad one was a TypeError at start)."""
    from lyra_ray.model.errors import InputError
    from lyra_ray.runtime.config import SchedulerConfig

    ok = SchedulerConfig.from_dict({"policy": "lyra", "policy_args": {"move_gain_s": 3600}})
    assert ok.policy_args == {"move_gain_s": 3600.0}
    for raw, said in (
        ({"policy": "nope"}, "field 'policy': unknown policy 'nope'"),
        ({"policy": "lyra", "policy_args": {"nope": 1}}, "field 'policy_args': policy 'lyra'"),
        ({"policy": "lyra", "policy_args": {"search_limit": 99}}, "search_limit must be in"),
        ({"policy": "basic", "policy_args": {"reserve_fraction": 0.0}}, "keeps its own"),
    ):
        with pytest.raises(InputError, match=r"^lyra config: ") as e:
            SchedulerConfig.from_dict(raw)
        assert said in str(e.value), str(e.value)
