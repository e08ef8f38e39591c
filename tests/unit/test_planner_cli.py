"""``lyra plan``: the table fits 80 columns, --json has the agreed keys, and bad input
is one line on stderr naming the field, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_ray.cli.main import main
from lyra_ray.cli.plan import JSON_KEYS


def test_table_fits_80_columns_and_json_has_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "plans.json"
    rc = main(["plan", "--model", "gpt-175b", "--gpus", "a100=96", "--batch", "1536",
               "--json", str(out)])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("gpt-175b") and all(len(x) <= 80 for x in lines)
    assert "TFLOP/s" in text and "GiB/GPU" in text
    rows = json.loads(out.read_text())
    assert len(rows) == 5
    for r in rows:
        assert set(JSON_KEYS) <= set(r)
        assert r["t"] * r["p"] * r["d"] == 96 and 1536 % (r["d"] * r["microbatch"]) == 0
        assert r["schedule"] in ("gpipe", "1f1b", "interleaved")
    assert [r["iteration_s"] for r in rows] == sorted(r["iteration_s"] for r in rows)
    assert f"{rows[0]['tflops_per_gpu']:.0f}" in lines[3]  # the table shows the same plans


def test_a_model_file_and_the_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("layers: 24\nhidden: 2048\nheads: 16\nseq_len: 1024\n")
    rc = main(["plan", "--model", str(f), "--gpus", "v100=16", "--batch", "256", "--top", "2",
               "--gpus-per-server", "4", "--recompute", "never"])  # fmt: skip
    assert rc == 0
    body = capsys.readouterr().out.splitlines()
    assert body[0].startswith("transformer (1.3B) on 16 v100")
    assert [x.split()[6] for x in body[3:5]] == ["no", "no"]


def test_a_model_that_fits_nowhere_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "gpt-1t", "--gpus", "v100=8", "--batch", "8"]) == 1
    assert "does not fit" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--batch", "abc"], "--batch"),
        (["--batch", "0"], "--batch"),
        (["--batch", "-3"], "--batch"),
        (["--gpus", "a100"], "--gpus"),
        (["--gpus", "tpu=8"], "--gpus"),
        (["--gpus", "a100=nan"], "--gpus"),
        (["--model", "gpt-9"], "--model"),
        (["--top", "0"], "--top"),
        (["--recompute", "maybe"], "--recompute"),
        (["--gpus-per-server", "0"], "--gpus-per-server"),
        (["--json", "/nonexistent/dir/x.json"], "--json"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(
    args: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = {"--model": "gpt-1.3b", "--gpus": "a100=8", "--batch": "64"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = ["plan", *[x for kv in base.items() for x in kv]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"lyra: error: {field}")


def test_a_bad_model_file_names_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"layers": 24, "hidden": -1, "heads": 16}))
    assert main(["plan", "--model", str(f), "--gpus", "a100=8", "--batch", "8"]) == 2
    assert capsys.readouterr().err.startswith("lyra: error: --model.hidden:")
