"""The table of ``docs/reliability.md``, rendered from ``benchmarks/results/chaos.json``
(``benchmarks/chaos.py`` writes both): one row per figure, the command beside it."""

from __future__ import annotations

from collections import Counter
from typing import Any

STEP_OF = {
    "store-crash": "store",
    "scheduler_crashes": "live",
    "train_worker_kill": "live",
    "node_loss": "live",
    "live_payloads": "live",
    "fuzz-live_scheduler": "live",
    "cluster_restart": "restart",
    "chaos_state": "state",
    "chaos_load": "load",
}


def _row(area: str, figure: str, cmd: str, ok: bool | None) -> str:
    mark = "" if ok is None else (" ✓" if ok else " ✗ (the run failed)")
    return f"| {area} | {figure}{mark} | `{cmd}` |"


def render(result: dict[str, Any]) -> str:
    steps, fig = result["steps"], result["figures"]

    def cmd(name: str) -> tuple[str, bool | None]:
        step = STEP_OF.get(name, "fuzz" if name.startswith("fuzz-") else name)
        s = steps.get(step)
        return (s["command"], s["exit_code"] == 0) if s else ("(not run)", None)

    rows = ["| area | figure | command |", "|---|---|---|"]
    if "scheduler_crashes" in fig:
        f = fig["scheduler_crashes"]
        modes = Counter(k["mode"].split(" ")[0] for k in f["kills"])
        names = {"kill": "ray.kill", "after_persist": "between commit and apply"}
        names["after_apply"] = "between apply and commit"
        how = ", ".join(f"{n} {names.get(m, m)}" for m, n in sorted(modes.items()))
        rows.append(
            _row(
                "scheduler crashes",
                f"{len(f['kills'])} kills ({how}), {f['restarts']} restarts: "
                f"{f['finished_exact']}/{f['jobs']} jobs finished with exactly their steps, "
                f"{f['submissions_accepted_once']}/{f['jobs']} submissions held once, "
                f"{f['steps_repeated']} steps repeated, no generation run twice",
                *cmd("scheduler_crashes"),
            )
        )
    if "node_loss" in fig:
        f = fig["node_loss"]
        rows.append(
            _row(
                "node loss",
                f"node SIGKILLed at step {f['last_step_before_kill']}: job resumed on "
                f"{f['runs'][-1]} from its checkpoint, {f['steps_repeated']} steps redone "
                f"(interval {f['checkpoint_every']}); a returning node took the next job",
                *cmd("node_loss"),
            )
        )
    if "train_worker_kill" in fig:
        f = fig["train_worker_kill"]
        rows.append(
            _row(
                "Train worker killed",
                f"killed at step {f['last_step_before_kill']}, resumed at "
                f"{f['resumed_at_step']} ({f['steps_lost']} steps redone, interval "
                f'{f["checkpoint_every"]}); past the limit: "{f["reason"]}"; a job whose '
                f'code raises fails at once: "{f["code_error_reason"]}"',
                *cmd("train_worker_kill"),
            )
        )
    if "cluster_restart" in fig:
        f = fig["cluster_restart"]
        rows.append(
            _row(
                "whole-cluster restart",
                f"`lyra down` ({f.get('down_s', '?')} s) at step "
                f"{f['last_step_before_down']}, `lyra up` with the same --dir"
                + (
                    f" ({f['nodes_changed']}, policy {f['policy_changed']})"
                    if "policy_changed" in f
                    else ""
                )
                + f": resumed at {f['resumed_at_step']}, finished all {f['steps']} steps; "
                + ("the queued job ran after; " if f.get("queued_job_ran_after_restart") else "")
                + "the finished job still reported (archive)",
                *cmd("cluster_restart"),
            )
        )
    if "store-crash" in fig:
        f = fig["store-crash"]
        rows.append(
            _row(
                "crash during a write",
                f"{f['kills']} SIGKILLs of a writer ({f['killed_mid_transaction']} inside a "
                f"transaction): {f['integrity_ok']}/{f['kills']} integrity checks ok, the last "
                f"commit whole every time (synchronous={f['synchronous']})",
                *cmd("store-crash"),
            )
        )
    if "chaos_load" in fig:
        f = fig["chaos_load"]
        rows.append(
            _row(
                "load",
                f"{f['accepted']} submissions from {f['clients']} SDK clients in "
                f"{f['wall_s']} s across {f['scheduler_restarts']} scheduler restart(s): "
                f"{'each accepted exactly once' if f['exactly_once'] else 'NOT exactly once'}; "
                f"cycle with {f['submissions']} queued ({f['policy']}): p50 "
                f"{f['cycle_p50_ms']} ms, p99 {f['cycle_p99_ms']} ms, max {f['cycle_max_ms']} "
                f"ms over {f['cycles_with_all_queued']} cycles (host load average "
                f"{f.get('load_average_1_5_15', ['?'])[0]})",
                *cmd("chaos_load"),
            )
        )
    if "chaos_state" in fig:
        f = fig["chaos_state"]
        pts = {p["finished"]: p for p in f["archive"]["points"]}
        base = {p["finished"]: p for p in f.get("no_archive", {}).get("points", [])}
        last = max(pts)
        text = (
            f"per-cycle commit with 1,000 / {last:,} jobs finished: "
            f"{pts.get(1000, pts[last])['bytes_mean']:,} / {pts[last]['bytes_mean']:,} B, "
            f"{pts.get(1000, pts[last])['commit_ms_mean']} / {pts[last]['commit_ms_mean']} ms"
        )
        if base:
            b_last = max(base)
            b1 = base.get(1000, base[b_last])
            text += (
                f"; without the archive, with 1,000 / {b_last:,} finished: "
                f"{b1['bytes_mean']:,} / {base[b_last]['bytes_mean']:,} B, "
                f"{b1['commit_ms_mean']} / {base[b_last]['commit_ms_mean']} ms"
            )
        rows.append(_row("bounded state", text, *cmd("chaos_state")))
    fuzz = sorted(k for k in fig if k.startswith("fuzz-") and k != "fuzz-live_scheduler")
    for k in fuzz:
        f = fig[k]
        rows.append(
            _row(
                "hostile input",
                f"{f['target']}: {f['cases']:,} cases, {f['valid']} valid, {f['refused']} "
                f"refused naming the field or input, {f['tracebacks']} tracebacks",
                *cmd(k),
            )
        )
    if "live_payloads" in fig:
        f = fig["live_payloads"]
        rows.append(
            _row(
                "hostile input (live)",
                f"{f['cases']:,} payloads at the scheduler ({f['valid']} valid, left unsubmitted; "
                f"{f['refused']} refused): scheduler alive, {f['restarts']} restarts, jobs "
                f"{'unchanged' if f['state_unchanged'] else 'CHANGED'}",
                *cmd("live_payloads"),
            )
        )
    return "\n".join(rows) + "\n"
