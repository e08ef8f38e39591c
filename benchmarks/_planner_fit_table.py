"""Markdown for ``benchmarks/results/planner_fit.json`` (``<!-- planner-fit -->`` in
docs/planner.md): each measured H200 layer beside the fitted prediction and the one
the planner made before the fit, then the constants and the leave-one-hidden-out check."""

from __future__ import annotations

from typing import Any


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def render(data: dict[str, Any]) -> str:
    c = data["constants"]
    lines = [
        f"`{data['command']}`; rows: {data['source']['file'].split(' ')[0]} "
        f"(measured {data['source']['measured']}), one GPT layer forward + backward, "
        "seq 2048, head dimension 128, eager PyTorch; ratio = predicted / measured. "
        '"Before": the planner without the fit (default constants, standard attention).',
        "",
        "| hidden | microbatch | measured ms | measured TFLOP/s | predicted ms | ratio "
        "| before ms | before ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['hidden']} | {r['microbatch']} | {_ms(r['measured_s'])} "
            f"| {r['measured_tflops']:.0f} | {_ms(r['predicted_s'])} | {r['ratio']:.2f} "
            f"| {_ms(r['before_s'])} | {r['before_ratio']:.2f} |"
        )
    b = data["before"]
    alt = data["alternative_width_fitted"]
    loo = ", ".join(
        f"{x['held_out_hidden']}: {x['held_out_min_ratio']:.2f}-{x['held_out_max_ratio']:.2f}"
        for x in data["leave_one_hidden_out"]
    )
    lines += [
        "",
        f"Constants (`cost.FITTED['h200']`): `gemm_max` {c['gemm_max']}, `host_floor_s` "
        f"{c['host_floor_s'] * 1e3:.2f} ms, `host_overlap` {c['host_overlap']} (fitted); "
        f"`hbm_efficiency` {c['hbm_efficiency']} (measured apart), `gemm_half_width` "
        f"{c['gemm_half_width']:g} and `layer_overhead_s` {c['layer_overhead_s']:g} (kept). "
        f"Ratio {data['min_ratio']:.2f}-{data['max_ratio']:.2f} over the rows (rms error of "
        f"the log {data['rms_log_error']:.3f}; before: {b['min_ratio']:.2f}-"
        f"{b['max_ratio']:.2f}). Fitting `gemm_half_width` too gives "
        f"{alt['gemm_half_width']:g} and rms {alt['rms_log_error']:.3f}. Leave one hidden "
        f"size out, refit, predict it (held-out ratios): {loo}.",
        "",
        "The PTD-P table's shapes (the paper's `t`, `p`, recomputation on; TFLOP/s per GPU "
        "as predicted): as tested (A100, standard attention), the same models with flash "
        "attention on A100, and with flash on H200 with the fitted constants.",
        "",
        "| model | GPUs | (t,p) | paper | A100 standard | A100 flash | H200 flash (microbatch) |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in data["ptdp"]:
        name = r["model"].removeprefix("gpt-").upper()
        lines.append(
            f"| {name} | {r['gpus']} | ({r['t']},{r['p']}) | {r['paper_tflops']} "
            f"| {r['a100_standard_tflops']:.0f} | {r['a100_flash_tflops']:.0f} "
            f"({r['a100_flash_tflops'] / r['a100_standard_tflops'] - 1:+.0%}) "
            f"| {r['h200_flash_tflops']:.0f} ({r['h200_flash_microbatch']}) |"
        )
    return "\n".join(lines) + "\n"
