"""Predicting the pairs nobody measured (``lyra_ray.model.interference``) and
``lyra profile predict`` (``lyra_ray.cli.profile_predict``)."""

from __future__ import annotations

import argparse
import ast
import copy
import itertools
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lyra_ray.cli.profile_predict import add_predict_parser, run_predict
from lyra_ray.model.errors import InputError
from lyra_ray.model.interference import (
    MIN_SHARE,
    fit_additive,
    fit_interference,
    observed_shares,
    predict_share,
    predict_table,
)
from lyra_ray.model.throughput import load_gavel_throughputs

H200 = Path(__file__).resolve().parents[2] / "lyra_ray" / "model" / "data" / "h200_throughputs.json"


def key(name: str) -> str:
    return str((name, 1))


def make_table(
    alone: dict[str, float],
    share: Callable[[str, str], float],
    measured: set[frozenset[str]],
) -> dict[str, Any]:
    """One GPU type's rows: ``measured`` pairs (both jobs' rows), rates = share x alone."""
    rows: dict[str, Any] = {key(j): {"null": a} for j, a in alone.items()}
    for i, j in itertools.product(alone, repeat=2):
        if frozenset((i, j)) in measured:
            rows[key(i)][key(j)] = [share(i, j) * alone[i], share(j, i) * alone[j]]
    return rows


def synthetic(n: int, seed: int = 0, noise: float = 0.0):  # type: ignore[no-untyped-def]
    """Shares from a known additive + rank-1 model, jobs with arbitrary names."""
    rng = np.random.default_rng(seed)
    names = [f"jöb {k}/{'x' * k}" for k in range(n)]
    a, b = rng.normal(0, 0.1, n), rng.normal(0, 0.08, n)
    u, v = rng.normal(0, 1, n), rng.normal(0, 1, n)
    eps = rng.normal(0, noise, (n, n))
    idx = {x: k for k, x in enumerate(names)}

    def share(i: str, j: str) -> float:
        p, q = idx[i], idx[j]
        return float(0.7 + a[p] + b[q] + 0.06 * u[p] * v[q] + eps[p, q])

    alone = {x: float(rng.uniform(5, 500)) for x in names}
    return names, alone, share


def filled_share(out: dict[str, Any], gpu: str, alone: dict[str, float], i: str, j: str) -> float:
    return float(out[gpu][key(i)][key(j)][0]) / alone[i]


# --- the predictor on synthetic tables --------------------------------------------------


def test_predicts_held_out_pairs_of_a_known_model_closely() -> None:
    names, alone, share = synthetic(10, noise=0.005)
    pairs = [frozenset(p) for p in itertools.combinations_with_replacement(names, 2)]
    held = set(pairs[::6])
    table = {"gpu-Z": make_table(alone, share, set(pairs) - held)}
    out = predict_table(table)
    errs, errs_add = [], []
    model_add = fit_additive(observed_shares(table["gpu-Z"]))
    for p in held:
        i, j = (sorted(p) * 2)[:2]  # a self-pair is a one-element set
        for x, y in {(i, j), (j, i)}:
            errs.append(abs(filled_share(out, "gpu-Z", alone, x, y) - share(x, y)))
            errs_add.append(abs(model_add.share(key(x), key(y)) - share(x, y)))
    assert statistics.fmean(errs) < 0.03
    assert statistics.fmean(errs) < statistics.fmean(errs_add)  # the rank-1 part is learnt


def test_measured_entries_untouched_and_input_not_mutated() -> None:
    names, alone, share = synthetic(6, seed=1)
    pairs = {frozenset(p) for p in itertools.combinations_with_replacement(names, 2)}
    table = {"g": make_table(alone, share, set(list(pairs)[::2])), "provenance": {"x": 1}}
    before = copy.deepcopy(table)
    out = predict_table(table)
    assert table == before
    assert out["provenance"] == {"x": 1}
    for job, entry in table["g"].items():
        for partner, val in entry.items():
            assert out["g"][job][partner] == val


def test_every_ordered_pair_filled_consistently_and_listed() -> None:
    names, alone, share = synthetic(7, seed=2)
    pairs = {frozenset(p) for p in itertools.combinations_with_replacement(names, 2)}
    table = {"g": make_table(alone, share, set(sorted(pairs, key=sorted)[::3]))}
    out = predict_table(table)
    listed = {tuple(p) for p in out["predicted"]}
    for i, j in itertools.product(names, repeat=2):
        ki, kj = key(i), key(j)
        this, other = out["g"][ki][kj]
        assert out["g"][kj][ki] == [other, this]
        assert (("g", ki, kj) in listed) == (kj not in table["g"][ki])
        if i == j and ("g", ki, kj) in listed:
            assert this == other


def test_a_pair_entered_under_one_job_only_is_mirrored_not_predicted() -> None:
    table = {
        "g": {
            key("a"): {"null": 10.0, key("b"): [6.0, 3.0]},
            key("b"): {"null": 5.0},
        }
    }
    out = predict_table(table)
    assert out["g"][key("b")][key("a")] == [3.0, 6.0]
    assert ["g", key("b"), key("a")] not in out["predicted"]
    assert ["g", key("a"), key("a")] in out["predicted"]


def test_predicted_shares_are_clipped_to_at_most_one_and_above_zero() -> None:
    # measured shares above 1 (noise) push the model above 1; far below 0 the other way
    alone = {"fast": 100.0, "slow": 10.0, "mid": 50.0, "x": 20.0}
    hi = {"fast": 1.25, "slow": 0.02, "mid": 0.6, "x": 0.7}
    harm = {"fast": 0.05, "slow": -0.3, "mid": 0.0, "x": 0.0}

    def share(i: str, j: str) -> float:
        return hi[i] + harm[j]

    measured = {frozenset(p) for p in itertools.combinations_with_replacement(alone, 2)}
    measured -= {frozenset(("fast",)), frozenset(("slow", "fast")), frozenset(("slow",))}
    out = predict_table({"g": make_table(alone, share, measured)})
    for i, j in [("fast", "fast"), ("slow", "slow"), ("fast", "slow"), ("slow", "fast")]:
        s = filled_share(out, "g", alone, i, j)
        assert MIN_SHARE <= s <= 1.0
    assert filled_share(out, "g", alone, "fast", "fast") == 1.0
    assert filled_share(out, "g", alone, "slow", "slow") == pytest.approx(MIN_SHARE)


def test_earlier_predictions_are_kept_listed_and_left_out_of_the_fit() -> None:
    names, alone, share = synthetic(6, seed=3)
    pairs = sorted({frozenset(p) for p in itertools.combinations(names, 2)}, key=sorted)
    table = {"g": make_table(alone, share, set(pairs[2:]))}
    i, j = sorted(pairs[0])
    absurd = copy.deepcopy(table)
    absurd["g"][key(i)][key(j)] = [1e6, 1e6]
    absurd["g"][key(j)][key(i)] = [1e6, 1e6]
    absurd["predicted"] = [["g", key(i), key(j)], ["g", key(j), key(i)]]
    out, ref = predict_table(absurd), predict_table(table)
    assert out["predicted"][:2] == absurd["predicted"]
    assert out["g"][key(i)][key(j)] == [1e6, 1e6]  # kept, not re-predicted
    k, m = sorted(pairs[1])
    assert out["g"][key(k)][key(m)] == ref["g"][key(k)][key(m)]


def test_each_gpu_type_is_predicted_from_its_own_pairs() -> None:
    alone = {"p": 10.0, "q": 20.0, "r": 30.0, "s": 40.0}
    measured = {frozenset(p) for p in itertools.combinations_with_replacement(alone, 2)}
    measured.discard(frozenset(("p", "q")))
    table = {
        "fast-gpu": make_table(alone, lambda i, j: 0.9, measured),
        "slow-gpu": make_table(alone, lambda i, j: 0.4, measured),
        "fast-gpu_unconsolidated": {key("p"): {"null": 1.0}, key("q"): {"null": 2.0}},
    }
    out = predict_table(table)
    assert filled_share(out, "fast-gpu", alone, "p", "q") == pytest.approx(0.9, abs=1e-3)
    assert filled_share(out, "slow-gpu", alone, "p", "q") == pytest.approx(0.4, abs=1e-3)
    assert out["fast-gpu_unconsolidated"] == table["fast-gpu_unconsolidated"]
    assert {p[0] for p in out["predicted"]} == {"fast-gpu", "slow-gpu"}


def test_a_job_with_no_measured_pair_takes_the_population_fallback() -> None:
    names, alone, share = synthetic(6, seed=4)
    pairs = {frozenset(p) for p in itertools.combinations_with_replacement(names, 2)}
    table = {"g": make_table(alone, share, pairs)}
    table["g"][key("newcomer")] = {"null": 42.0}
    out = predict_table(table)
    model = fit_interference(observed_shares(table["g"]))
    for j in names:
        got = out["g"][key("newcomer")][key(j)]
        assert got[0] / 42.0 == pytest.approx(predict_share(model, "unseen", key(j)), rel=1e-5)
        assert got[1] / alone[j] == pytest.approx(predict_share(model, key(j), "unseen"), rel=1e-5)
    self_share = out["g"][key("newcomer")][key("newcomer")][0] / 42.0
    assert self_share == pytest.approx(min(1.0, model.mean), rel=1e-5)


def test_jobs_without_an_alone_rate_are_skipped() -> None:
    alone = {"a": 10.0, "b": 20.0, "c": 30.0}
    measured = {frozenset(p) for p in itertools.combinations(alone, 2)}
    table = {"g": make_table(alone, lambda i, j: 0.6, measured)}
    table["g"][key("zero")] = {"null": 0.0, key("a"): [0.0, 5.0]}
    table["g"][key("nan")] = {"null": math.nan}
    out = predict_table(table)
    assert out["g"][key("zero")] == table["g"][key("zero")]
    assert all(key("zero") not in out["g"][key(j)] for j in alone)
    assert {p[1] for p in out["predicted"]} == {key(j) for j in alone}  # self-pairs only


def test_no_measured_pair_on_a_type_borrows_the_others_and_none_anywhere_fills_nothing() -> None:
    alone = {"a": 10.0, "b": 20.0}
    measured = {frozenset(("a", "b")), frozenset(("a",)), frozenset(("b",))}
    table = {
        "seen": make_table(alone, lambda i, j: 0.8, measured),
        "unseen": make_table(alone, lambda i, j: 0.8, set()),
    }
    out = predict_table(table)
    assert filled_share(out, "unseen", alone, "a", "b") == pytest.approx(0.8)
    bare = {"unseen": make_table(alone, lambda i, j: 0.8, set())}
    assert predict_table(bare) == {**bare, "predicted": []}


def test_prediction_is_deterministic() -> None:
    names, alone, share = synthetic(8, seed=5, noise=0.02)
    pairs = sorted(
        {frozenset(p) for p in itertools.combinations_with_replacement(names, 2)}, key=sorted
    )
    table = {"g": make_table(alone, share, set(pairs[::2]))}
    assert predict_table(table) == predict_table(copy.deepcopy(table))


# --- the packaged H200 table ------------------------------------------------------------


def lopo_mae(shares: dict[tuple[str, str], float], predict: Callable[..., float]) -> float:
    errs = []
    for i, j in sorted({(min(p), max(p)) for p in shares}):
        hidden = {(i, j), (j, i)}
        train = {k: v for k, v in shares.items() if k not in hidden}
        errs += [abs(predict(train, x, y) - shares[(x, y)]) for x, y in hidden]
    return statistics.fmean(errs)


def test_h200_predictor_at_least_as_good_as_additive_leaving_one_pair_out() -> None:
    shares = observed_shares(json.loads(H200.read_text())["h200"])
    assert len(shares) == 64
    pred = lopo_mae(shares, lambda t, i, j: predict_share(fit_interference(t), i, j))
    add = lopo_mae(shares, lambda t, i, j: fit_additive(t).share(i, j))
    mean = lopo_mae(shares, lambda t, i, j: statistics.fmean(t.values()))
    assert pred <= add < mean


# --- lyra profile predict ---------------------------------------------------------------


def run_cli(src: Path, dst: Path) -> int:
    parser = argparse.ArgumentParser()
    add_predict_parser(parser.add_subparsers())
    args = parser.parse_args(["predict", str(src), "--json", str(dst)])
    assert args.func is run_predict
    return int(args.func(args))


def test_cli_writes_a_table_the_loader_reads_back(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    names, alone, share = synthetic(5, seed=6)
    pairs = sorted(
        {frozenset(p) for p in itertools.combinations_with_replacement(names, 2)}, key=sorted
    )
    src, dst = tmp_path / "in.json", tmp_path / "sub" / "out.json"
    src.write_text(json.dumps({"g1": make_table(alone, share, set(pairs[::2])), "spread": {}}))
    assert run_cli(src, dst) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith(f"wrote {dst}")
    assert lines[0].startswith("g1: 5 jobs")
    raw = json.loads(dst.read_text())
    model = load_gavel_throughputs(dst)
    assert model.predicted == {
        (g, ast.literal_eval(i), ast.literal_eval(j)) for g, i, j in raw["predicted"]
    }
    for i, j in itertools.product(names, repeat=2):
        assert (j, 1) in model.pairs[(i, 1)]["g1"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "not valid JSON"),
        ("{not json", "not valid JSON"),
        ('{"g": {"(\'a\', 1)": {"null": NaN}}}', "('a', 1)"),
        ('{"g": {"(\'a\', 1)": {"null": 1.0, "(\'a\', 1)": [NaN, 1.0]}}}', "('a', 1)"),
        ('{"g": {}, "predicted": [["g", 3]]}', "predicted[0]"),
    ],
)
def test_cli_refuses_bad_input_naming_the_field(tmp_path: Path, text: str, words: str) -> None:
    src = tmp_path / "bad.json"
    src.write_text(text)
    with pytest.raises(InputError) as e:
        run_cli(src, tmp_path / "out.json")
    assert words in str(e.value) and str(src) in str(e.value)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out.json").exists()
