"""Hostile input at the API boundaries (issue #17, item 8): SDK payloads (a job dict as
``Client.submit`` and the scheduler's ``validate`` parse it, a service as
``deploy_service`` parses it) and the ``lyra`` command line, offline commands only.

The live half, the same payloads sent to a running scheduler whose state must not
change, is ``tests/chaos/test_chaos_live.py``. Settings: ``tests/unit/fuzz_support.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lyra_ray.cli.main import main
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_job_spec
from lyra_ray.serving.spec import KNOBS, parse_service_spec
from tests.unit.fuzz_strategies import job_dicts, numbers, plausible_job, values, yaml_texts
from tests.unit.fuzz_support import Outcomes, fuzz, time_limit
from tests.unit.test_fuzz_inputs import check_spec

SCRATCH = Path(tempfile.mkdtemp(prefix="lyra-fuzz-cli-"))
TINY = SCRATCH / "tiny.yaml"
TINY.write_text(
    "jobs:\n"
    "  - {name: a, total_steps: 50, workers: 1, throughput: {v100: 1.0}}\n"
    "  - {name: b, total_steps: 80, workers: 2, arrival_s: 5, throughput: {v100: 1.0, k80: 0.5}}\n"
)

payloads = st.one_of(job_dicts(), plausible_job(), values)


def sdk_source(raw: Any) -> str:
    """The ``source`` the SDK and the scheduler give ``parse_job_spec``."""
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"job {name!r}" if name else "job"


def test_sdk_job_payloads() -> None:
    """What ``Client.submit`` checks before the call and the scheduler checks again."""
    out = Outcomes("sdk_job_payload")

    @fuzz
    @given(payloads, st.sampled_from([None, ["v100", "p100", "k80"]]))
    def case(raw: Any, gpus: list[str] | None) -> None:
        spec = out.run(lambda: parse_job_spec(raw, sdk_source(raw), known_gpu_types=gpus))
        if spec is not None:
            check_spec(spec)

    case()
    out.done()


def _plausible_service() -> st.SearchStrategy[dict[str, Any]]:
    """Mostly-valid services, so that the accepting path is fuzzed too."""

    def knobs(model: str) -> st.SearchStrategy[dict[str, Any]]:
        table = KNOBS[model]
        return st.fixed_dictionaries(
            {},
            optional={
                k: (st.integers(int(lo), int(hi)) if kind is int else st.floats(lo, hi))
                for k, (kind, lo, hi) in table.items()
            },
        )

    return st.sampled_from(sorted(KNOBS)).flatmap(
        lambda model: st.fixed_dictionaries(
            {"name": st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)},
            optional={
                "model": st.just(model),
                "route": st.from_regex(r"/[a-z0-9/_-]{0,8}", fullmatch=True),
                "target_ongoing_per_replica": st.floats(0.1, 100),
                "replicas_per_server": st.integers(0, 8),
                "min_servers": st.integers(1, 8),
                "down_after_s": st.floats(0, 600),
                "config": knobs(model),
            },
        )
    )


def _service_dicts() -> st.SearchStrategy[Any]:
    knob = st.sampled_from(sorted({k for m in KNOBS.values() for k in m} | {"bogus"}))
    return st.one_of(
        _plausible_service(),
        st.fixed_dictionaries(
            {},
            optional={
                "name": st.one_of(st.sampled_from(["svc", "a-1", "A", "-x", ""]), values),
                "model": st.one_of(st.sampled_from(["dense", "moe", "gpt"]), values),
                "route": st.one_of(st.sampled_from(["/x", "x", "/a b", ""]), values),
                "target_ongoing_per_replica": numbers,
                "replicas_per_server": st.one_of(st.integers(-1, 20), numbers),
                "min_servers": st.one_of(st.integers(-1, 20), numbers),
                "smoothing_s": numbers,
                "up_after_s": numbers,
                "down_after_s": numbers,
                "config": st.one_of(st.dictionaries(knob, numbers, max_size=5), values),
                "extra": values,
            },
        ),
        values,
    )


def test_service_payloads() -> None:
    out = Outcomes("sdk_service_payload")

    @fuzz
    @given(_service_dicts())
    def case(raw: Any) -> None:
        spec = out.run(lambda: parse_service_spec(raw), names_field=isinstance(raw, dict))
        if spec is not None:
            d = spec.to_dict()
            assert json.loads(json.dumps(d, allow_nan=False)) == d
            assert parse_service_spec(d).to_dict() == d  # what the scheduler persists reads back
            assert all(math.isfinite(float(v)) for v in spec.config.values())

    case()
    out.done()


# ---------------------------------------------------------------------------- the CLI

words = st.one_of(
    st.sampled_from(["1", "2", "4", "8", "60", "0.5", "100"]),
    numbers.map(str),
    st.text(max_size=10),
    st.sampled_from(["", "-", "--", "nan", "inf", "-inf", "1e999", "0", "-1", "9" * 5000]),
)


def _file_arg() -> st.SearchStrategy[str]:
    """An existing small file, a fuzzed one, a directory, or a path that is not there."""
    return st.one_of(
        st.sampled_from([str(TINY), str(SCRATCH), str(SCRATCH / "missing.yaml"), "", "-"]),
        yaml_texts.map(lambda t: _write("arg.yaml", t)),
        st.binary(max_size=64).map(lambda b: _write("arg.bin", b)),
    )


def _write(name: str, data: str | bytes) -> str:
    p = SCRATCH / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return str(p)


def _flags(table: dict[str, st.SearchStrategy[str]]) -> st.SearchStrategy[list[str]]:
    pair = st.sampled_from(sorted(table)).flatmap(lambda f: table[f].map(lambda v: [f, v]))
    return st.lists(pair, max_size=3).map(lambda ps: [x for p in ps for x in p])


SIMULATE = {
    "--trace": _file_arg(),
    "--format": st.sampled_from(["gavel", "philly", "yaml", "csv"]),
    "--cluster": st.one_of(st.sampled_from(["v100=4,k80=2", "v100=0", "a100=2", "v100"]), words),
    "--inference": st.one_of(st.sampled_from(["t4=2", "t4=0"]), words),
    "--serving-demand": st.one_of(st.sampled_from(["diurnal"]), _file_arg()),
    "--gpus-per-node": words,
    "--policy": st.one_of(
        st.sampled_from(
            ["fifo", "max_min_fairness", "lyra", "las", "nope", "json:dumps", "math:pi", "x:y"]
        ),
        words,
    ),
    "--round-seconds": words,
    "--seed": words,
    "--resize-overhead": words,
    "--network": st.one_of(st.sampled_from(["servers_per_rack=2,nic_gbps=25"]), words),
    "--placer": st.sampled_from(["consolidate", "ring", "x"]),
    "--jct-window": st.one_of(st.sampled_from(["0:1", "1:0", "a:b"]), words),
    "--throughputs": _file_arg(),
    "--max-jobs": words,
    "--json": st.sampled_from([str(SCRATCH / "out.json"), str(SCRATCH / "no" / "dir.json")]),
}
PLAN = {
    "--model": st.one_of(st.sampled_from(["gpt-1.3b", "gpt-18b", "nope"]), _file_arg()),
    "--gpus": st.one_of(st.sampled_from(["a100=8", "v100=4", "a100=0", "zz=3"]), words),
    "--batch": st.one_of(st.sampled_from(["8", "512"]), words),
    "--top": words,
    "--gpus-per-server": words,
    "--recompute": st.sampled_from(["auto", "always", "never", "x"]),
    "--json": st.sampled_from([str(SCRATCH / "plan.json"), str(SCRATCH / "no" / "p.json")]),
}
MOE_PLAN = {
    "--load": _file_arg(),
    "--gpus": words,
    "--replicas": words,
    "--algorithm": words,
    "--slots": words,
    "--groups": words,
    "--json": st.sampled_from([str(SCRATCH / "moe.json")]),
    "--batch-tokens": words,
    "--expert": st.one_of(words, st.sampled_from(["64x128", "0x5", "7x"])),
    "--gpu": words,
    "--eplb-out": st.sampled_from([str(SCRATCH / "map.json"), str(SCRATCH), ""]),
}

argvs = st.one_of(
    st.tuples(
        st.just(["simulate", "--quiet", "--trace", str(TINY), "--cluster", "v100=4,k80=2"]),
        _flags(SIMULATE),
    ).map(lambda t: t[0] + t[1]),
    st.tuples(
        st.just(["plan", "--model", "gpt-1.3b", "--gpus", "a100=8", "--batch", "64"]),
        _flags(PLAN),
    ).map(lambda t: t[0] + t[1]),
    st.tuples(st.just(["moe", "plan"]), _flags(MOE_PLAN)).map(lambda t: t[0] + t[1]),
    st.tuples(
        st.just(["dashboard", "export"]),
        st.sampled_from([str(SCRATCH / "d.json"), str(SCRATCH), str(SCRATCH / "no/d.json"), ""]),
    ).map(lambda t: [*t[0], t[1]]),
    st.tuples(
        st.just(["dashboard", "push", "--token-env", "LYRA_FUZZ_NO_SUCH_TOKEN", "--grafana-url"]),
        words,
    ).map(lambda t: [*t[0], t[1]]),
    st.lists(words, max_size=4).map(lambda ws: ["simulate", *ws]),
    st.lists(words, max_size=3),
)
"""Only commands that need no cluster: no ``up``, ``submit``, ``serve`` or ``moe serve``."""


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``main(argv)`` in this process: its exit code and stderr; a traceback propagates."""
    err = io.StringIO()
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(err),
        time_limit(60),
    ):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: usage errors exit 2, --help exits 0
            code = e.code if isinstance(e.code, int) else 2
    return code, err.getvalue()


def test_cli_arguments() -> None:
    out = Outcomes("cli")

    @fuzz
    @given(argvs)
    def case(argv: list[str]) -> None:
        code, err = run_cli(argv)
        assert "Traceback" not in err, err
        assert code in (0, 1, 2), (argv, code, err)
        if code == 2:
            line = err.strip().splitlines()[-1] if err.strip() else ""
            out.refused(line or "usage")
        else:
            out.counts["valid" if code == 0 else "exit_1"] += 1

    case()
    out.done()


def test_cli_refusals_are_input_errors() -> None:
    """A few fixed cases: the shape of a refusal (one line, exit 2, the flag named)."""
    for argv, flag in (
        (["simulate", "--trace", str(TINY), "--round-seconds", "nan"], "--round-seconds"),
        (["simulate", "--trace", str(TINY), "--policy", "json:dumps"], "--policy"),
        (["plan", "--model", "gpt-1.3b", "--gpus", "a100=" + "9" * 5000, "--batch", "8"], "--gpus"),
    ):
        code, err = run_cli(argv)
        assert code == 2 and flag in err and "Traceback" not in err, (argv, err)
    assert isinstance(InputError("x"), ValueError)
