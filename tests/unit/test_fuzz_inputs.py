"""Hostile input at the file boundaries (issue #17, item 8): job YAML, trace files
(Gavel, Philly CSV, YAML) and cluster / ``lyra:`` configs.

Each target ends in a valid result or an InputError (one line, naming the field or the
input); never a traceback. ``make test`` runs a few dozen derandomised cases per
target; ``LYRA_FUZZ_EXAMPLES=1000`` (the full campaign, ``benchmarks/chaos.py``) runs
a thousand random ones. The faults this found are pinned in
``tests/unit/test_fuzz_regressions.py``.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from lyra_ray.model import JobSpec, scaling
from lyra_ray.model.catalogue import CATALOGUE
from lyra_ray.model.spec import load_job_file, parse_cluster, parse_job_list
from lyra_ray.model.state import spec_from_dict, spec_to_dict
from lyra_ray.ops.local import lyra_section, parse_nodes
from lyra_ray.runtime.config import SchedulerConfig
from lyra_ray.sim.traces import GAVEL_FIELDS, read_gavel_trace, read_philly_csv, read_yaml_jobs
from tests.unit.fuzz_strategies import numbers, scalars, values, yaml_texts
from tests.unit.fuzz_support import Outcomes, fuzz

SCRATCH = Path(tempfile.mkdtemp(prefix="lyra-fuzz-"))


def check_spec(s: JobSpec) -> None:
    """What every accepted job must satisfy before it may reach the core and the store."""
    assert math.isfinite(s.total_steps) and s.total_steps > 0, s
    assert 1 <= s.min_workers <= s.max_workers, s
    assert math.isfinite(s.arrival_s) and s.arrival_s >= 0, s
    assert math.isfinite(s.priority_weight) and s.priority_weight > 0, s
    for v in (s.throughput or {}).values():
        assert math.isfinite(v) and v > 0, s
    blob = json.dumps(spec_to_dict(s), allow_nan=False)  # the inbox and state are JSON
    back = spec_from_dict(json.loads(blob))
    assert (back.name, back.total_steps, back.min_workers) == (s.name, s.total_steps, s.min_workers)


def _file(name: str, data: str | bytes) -> Path:
    p = SCRATCH / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return p


def test_job_yaml() -> None:
    out = Outcomes("job_yaml")

    @fuzz
    @given(yaml_texts)
    def case(text: str) -> None:
        specs = out.run(lambda: parse_job_list(text, "fuzz.yaml"))
        for s in specs or []:
            check_spec(s)

    case()
    out.done()


def test_job_file_bytes() -> None:
    out = Outcomes("job_file")
    encodings = st.sampled_from(["utf-8", "utf-16", "latin-1"])

    @fuzz
    @given(st.one_of(st.binary(max_size=300), st.tuples(yaml_texts, encodings)))
    def case(raw: bytes | tuple[str, str]) -> None:
        data = raw if isinstance(raw, bytes) else raw[0].encode(raw[1], "replace")
        p = _file("job.yaml", data)
        for s in out.run(lambda: load_job_file(p)) or []:
            check_spec(s)

    case()
    out.done()


def _gavel_line() -> st.SearchStrategy[str]:
    field = st.one_of(
        st.sampled_from(["ResNet-18 (batch size 16)", "LM (batch size 5)", "x", ""]),
        numbers.map(str),
        st.text(max_size=6),
    )
    plausible = st.tuples(
        st.sampled_from(["ResNet-18 (batch size 16)", "Transformer (batch size 16)", "bogus"]),
        *(st.just(x) for x in ("cmd", "dir", "--steps", "False")),
        *(numbers.map(str) for _ in range(5)),
    ).map("\t".join)
    noisy = st.lists(field, min_size=len(GAVEL_FIELDS) - 1, max_size=len(GAVEL_FIELDS) + 1)
    return st.one_of(plausible, noisy.map("\t".join), st.text(max_size=40))


def test_gavel_trace() -> None:
    out = Outcomes("trace_gavel")
    known = st.sampled_from([None, ["ResNet-18 (batch size 16)", "Transformer (batch size 16)"]])

    @fuzz
    @given(st.lists(_gavel_line(), max_size=5), known)
    def case(lines: list[str], types: list[str] | None) -> None:
        p = _file("fuzz.trace", "\n".join(lines))
        for s in out.run(lambda: read_gavel_trace(p, known_job_types=types)) or []:
            check_spec(s)

    case()
    out.done()


def _csv_text() -> st.SearchStrategy[str]:
    header = st.sampled_from(
        ["timestamp,duration,num_gpus", "timestamp,num_gpus", "num_gpus,timestamp,duration,x", ""]
    )
    cell = st.one_of(
        st.sampled_from(["2017-10-03 10:00:00", "2017-10-03T10:00:05+00:00", "9999-12-31", ""]),
        numbers.map(str),
        st.text(max_size=8),
    )
    row = st.lists(cell, min_size=0, max_size=5).map(",".join)
    return st.tuples(header, st.lists(row, max_size=6)).map(lambda t: "\n".join([t[0], *t[1]]))


def test_philly_csv() -> None:
    out = Outcomes("trace_csv")

    @fuzz
    @given(st.one_of(_csv_text(), st.text(max_size=80)), st.sampled_from([None, 4]))
    def case(text: str, max_gpus: int | None) -> None:
        p = _file("fuzz.csv", text)
        for s in out.run(lambda: read_philly_csv(p, max_gpus=max_gpus)) or []:
            check_spec(s)

    case()
    out.done()


def test_yaml_trace() -> None:
    """A YAML trace as ``lyra simulate`` reads it: with the cluster's types and curves."""
    out = Outcomes("trace_yaml")

    @fuzz
    @given(yaml_texts)
    def case(text: str) -> None:
        p = _file("fuzz-trace.yaml", text)
        specs = out.run(
            lambda: read_yaml_jobs(
                p,
                known_gpu_types={"v100", "p100", "k80"},
                known_job_types=sorted(CATALOGUE),
                known_curves=scaling.known_curves(),
            )
        )
        for s in specs or []:
            check_spec(s)

    case()
    out.done()


CONFIG_FIELDS = sorted(SchedulerConfig.__dataclass_fields__)


def _config_dicts() -> st.SearchStrategy[dict[Any, Any]]:
    known = st.fixed_dictionaries(
        {},
        optional={
            **{f: st.one_of(numbers, values) for f in CONFIG_FIELDS},
            "policy": st.one_of(st.sampled_from(["fifo", "max_min_fairness", "lyra"]), values),
            "policy_args": st.one_of(st.dictionaries(st.text(max_size=5), values), values),
            "serve_port": st.one_of(st.integers(-5, 70000), values),
            "metrics": st.one_of(st.booleans(), values),
        },
    )
    junk = st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), st.none()), values)
    return st.one_of(known, junk, st.tuples(known, junk).map(lambda t: {**t[1], **t[0]}))


def _check_config(cfg: SchedulerConfig) -> None:
    for f in ("round_s", "period_s", "grace_s", "min_lease_s", "startup_grace_s"):
        v = getattr(cfg, f)
        assert not isinstance(v, bool) and math.isfinite(v) and v >= 0, (f, v)
    assert isinstance(cfg.policy, str) and isinstance(cfg.state_dir, str)
    assert 1 <= cfg.serve_port <= 65535


def test_scheduler_config() -> None:
    out = Outcomes("config_lyra")

    @fuzz
    @given(_config_dicts())
    def case(raw: dict[Any, Any]) -> None:
        cfg = out.run(lambda: SchedulerConfig.from_dict(raw))
        if cfg is not None:
            _check_config(cfg)

    case()
    out.done()


@st.composite
def _cluster_yaml(draw: st.DrawFn) -> str:
    section = draw(_config_dicts())
    doc = draw(
        st.sampled_from(
            [
                {"cluster_name": "x", "metadata": {"lyra": section}},
                {"lyra": section},
                {"metadata": section},
                {"metadata": {"lyra": [section]}},
                section,
            ]
        )
    )
    try:
        text = yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        text = repr(doc)
    return draw(st.one_of(st.just(text), st.text(max_size=60).map(lambda t: text[:40] + t)))


def test_cluster_yaml_lyra_section() -> None:
    """``lyra up --config cluster.yaml``: read the section, then check it."""
    out = Outcomes("config_cluster_yaml")

    @fuzz
    @given(_cluster_yaml())
    def case(text: str) -> None:
        p = str(_file("cluster.yaml", text))
        cfg = out.run(lambda: SchedulerConfig.from_dict(lyra_section(p)))
        if cfg is not None:
            _check_config(cfg)

    case()
    out.done()


node_specs = st.one_of(
    st.lists(
        st.tuples(
            st.sampled_from(["v100", "k80", "T4", "", "1x", "a-b"]),
            st.sampled_from(["=", " = ", ":", ""]),
            st.one_of(st.integers(-2, 70).map(str), st.text(max_size=4), st.just("9" * 5000)),
            st.sampled_from(["x", "X", " x ", "*", ""]),
            st.one_of(st.integers(-2, 70).map(str), st.text(max_size=4)),
        ).map("".join),
        min_size=1,
        max_size=4,
    ).map(",".join),
    st.text(max_size=30),
)


def test_nodes_and_cluster_specs() -> None:
    """``lyra up --nodes/--inference`` and ``lyra simulate --cluster``."""
    out = Outcomes("config_nodes")

    @fuzz
    @given(node_specs, st.one_of(st.integers(-1, 9), scalars.filter(lambda v: type(v) is int)))
    def case(spec: str, per_node: int) -> None:
        for gpu, count, gpus in out.run(lambda: parse_nodes(spec)) or []:
            assert gpu and 1 <= count <= 64 and 1 <= gpus <= 64
        for n in out.run(lambda: parse_cluster(spec.replace("x", ""), per_node)) or []:
            assert n.num_gpus >= 1

    case()
    out.done()
