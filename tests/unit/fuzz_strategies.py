"""Hypothesis strategies for hostile input: values of every JSON/YAML type, job and
service fields that are mostly plausible and sometimes not, and YAML text mutated
with the tokens that break parsers (anchors, tags, impossible dates, ``.inf``)."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

GPU_NAMES = ("v100", "p100", "k80", "a100", "t4", "V100", "", "gpu with space")
YAML_TOKENS = (
    ":",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "\n  ",
    "\t",
    "'",
    '"',
    "#",
    "&a ",
    "*a",
    "!!python/object:os.system ",
    "!!binary ",
    "!!float ",
    "~",
    ".inf",
    "-.inf",
    ".nan",
    "2020-13-01",
    "2020-02-30",
    "1e999",
    "0x1F",
    "0o17",
    "---\n",
    "...\n",
    "? ",
    "|\n",
    ">\n",
    "%YAML 1.1\n",
    "\x00",
    "\ufeff",
    "jobs:",
    "name:",
    "total_steps:",
    "workers:",
    "throughput:",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.integers(min_value=-(2**70), max_value=2**70).map(lambda x: x * 10**300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["1e309", "-1", "0", "nan", "inf", "2", " 3 ", "true", "v100"]),
)
values = st.recursive(
    scalars,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON-like value: what an SDK payload or a YAML field may hold."""

numbers = st.one_of(
    st.integers(min_value=-5, max_value=10**6),
    st.floats(min_value=-10, max_value=1e6, allow_nan=False),
    st.sampled_from([0, 0.0, -0.0, 1e-300, 1e308, float("inf"), float("nan"), 2**63]),
    scalars,
)
small_ints = st.one_of(st.integers(min_value=-2, max_value=70), scalars)


def _throughput() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(st.sampled_from(GPU_NAMES), numbers, max_size=4),
        st.dictionaries(st.text(max_size=5), values, max_size=3),
        values,
    )


def _model() -> st.SearchStrategy[Any]:
    transformer = st.fixed_dictionaries(
        {},
        optional={
            "layers": small_ints,
            "hidden": st.one_of(st.sampled_from([64, 128, 1024, 6144]), small_ints),
            "heads": st.one_of(st.sampled_from([1, 2, 8, 48]), small_ints),
            "seq_len": st.one_of(st.sampled_from([128, 2048]), small_ints),
            "vocab": st.one_of(st.sampled_from([1000, 51200]), small_ints),
            "batch": st.one_of(st.sampled_from([1, 8, 512]), small_ints),
            "name": st.one_of(st.sampled_from(["gpt-1.3b", "gpt-18b", "bert"]), values),
            "layer_list": values,
            "extra": values,
        },
    )
    return st.one_of(st.none(), st.sampled_from(["gpt-1.3b", "nope"]), transformer, values)


def job_dicts() -> st.SearchStrategy[dict[str, Any]]:
    """A job as a user writes it: known fields with plausible or hostile values."""
    return st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.text(max_size=20), values),
            "total_steps": numbers,
            "arrival_s": numbers,
            "workers": small_ints,
            "min_workers": small_ints,
            "max_workers": small_ints,
            "user": st.one_of(st.text(max_size=8), values),
            "priority_weight": numbers,
            "job_type": st.one_of(st.sampled_from(["resnet18", "lm", "transformer"]), values),
            "throughput": _throughput(),
            "scaling": st.one_of(st.sampled_from(["linear", "sqrt", "amdahl:0.9"]), values),
            "slo_s": numbers,
            "entrypoint": st.one_of(
                st.sampled_from(["lyra_ray.jobs.train_example:train_loop", "a:b", "x", "a.b:c:d"]),
                values,
            ),
            "config": st.one_of(st.dictionaries(st.text(max_size=6), values, max_size=4), values),
            "model": _model(),
            "bogus_field": values,
        },
    )


def plausible_job() -> st.SearchStrategy[dict[str, Any]]:
    """Mostly-valid jobs, so that the valid path is fuzzed too (not only refusals)."""
    return st.fixed_dictionaries(
        {
            "name": st.text(min_size=1, max_size=10),
            "total_steps": st.one_of(st.integers(1, 10**6), numbers),
            "throughput": st.one_of(
                st.dictionaries(
                    st.sampled_from(["v100", "p100", "k80"]),
                    st.floats(min_value=0.01, max_value=100),
                    min_size=1,
                    max_size=3,
                ),
                _throughput(),
            ),
        },
        optional={
            "workers": st.integers(1, 8),
            "arrival_s": st.one_of(st.floats(0, 1e5), numbers),
            "config": st.dictionaries(st.text(max_size=6), values, max_size=3),
            "user": st.text(max_size=6),
        },
    )


@st.composite
def mutated_yaml(draw: st.DrawFn, base: st.SearchStrategy[Any]) -> str:
    """YAML text of ``base`` with random edits: hostile tokens inserted, spans dropped."""
    doc = draw(base)
    if draw(st.booleans()):
        doc = {"jobs": doc if isinstance(doc, list) else [doc]}
    try:
        text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)
    except yaml.YAMLError:
        text = repr(doc)
    for _ in range(draw(st.integers(0, 4))):
        pos = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:pos] + draw(st.sampled_from(YAML_TOKENS)) + text[pos:]
        else:
            text = text[:pos] + text[pos + draw(st.integers(1, 8)) :]
    return text


yaml_texts = st.one_of(
    mutated_yaml(job_dicts()),
    mutated_yaml(st.lists(job_dicts(), max_size=3)),
    mutated_yaml(plausible_job()),
    st.lists(st.sampled_from(YAML_TOKENS) | st.text(max_size=6), max_size=20).map("".join),
    st.text(max_size=200),
)
