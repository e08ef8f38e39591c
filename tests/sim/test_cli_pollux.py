"""`lyra simulate` on a Pollux/Sia workload with ElasticFlow tables and a request-rate
series of serving load: the three inputs of docs/cli.md, end to end, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_ray.cli import main
from tests.unit.test_pollux_reader import WORKLOAD, tiny_profiles


def _inputs(tmp: Path) -> dict[str, Path]:
    tiny_profiles(tmp)  # tmp/profiles/app
    (tmp / "workloads").mkdir()
    trace = tmp / "workloads" / "w.csv"
    trace.write_text(WORKLOAD)
    ef = tmp / "ef"
    for gpu, rows in (("A100", "64,8.0,12.0\n"), ("T4", "64,2.0,3.0\n")):
        (ef / f"throughputs_{gpu}").mkdir(parents=True)
        (ef / f"throughputs_{gpu}" / "deepspeech2.csv").write_text("global_batch_size,1,2\n" + rows)
    rates = tmp / "rates.csv"
    rates.write_text("ts_s,rate_rps\n0,90\n3600,10\n")
    return {"trace": trace, "tables": ef, "rates": rates}


def _simulate(tmp: Path, *extra: str) -> int:
    return main(["simulate", "--format", "pollux", "--quiet", "--policy", "lyra", *extra])


def test_a_pollux_workload_runs_on_a100_and_lent_t4_servers(tmp_path: Path) -> None:
    f = _inputs(tmp_path)
    out = tmp_path / "r.json"
    rc = _simulate(
        tmp_path,
        *("--trace", str(f["trace"]), "--throughputs", str(f["tables"])),
        *("--cluster", "a100=1x2", "--inference", "t4=2x2", "--gpus-per-node", "2"),
        *("--serving-demand", f"{f['rates']}@50", "--json", str(out)),
    )
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["completed_jobs"] == 2
    assert doc["meta"]["resize_overhead_s"] == "per job (restart model)"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--serving-demand", "{rates}"), "give one server's capacity in req/s"),
        (("--serving-demand", "{rates}@0"), "--serving-demand: capacity"),
        (("--serving-demand", "{rates}@10"), "need 9 servers"),
        (("--profiles", "{trace}"), "--profiles: "),
        (("--throughputs", "{trace}"), "--throughputs: "),
    ],
)
def test_bad_inputs_are_one_line_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], message: str
) -> None:
    f = {k: str(v) for k, v in _inputs(tmp_path).items()}
    args = [a.format(**f) for a in flags]
    rc = _simulate(
        tmp_path,
        *("--trace", f["trace"], "--cluster", "a100=1x2", "--inference", "t4=2x2"),
        *("--gpus-per-node", "2", "--throughputs", f["tables"]),
        *args,
    )
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
