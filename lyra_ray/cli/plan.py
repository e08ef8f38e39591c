"""``lyra plan``: the best ways to train a large model on a number of GPUs of one type.

Prints the top plans (tensor, pipeline and data parallel degrees, microbatch size,
schedule, recomputation) with their predicted iteration time, memory per GPU, pipeline
bubble and achieved teraFLOP/s per GPU; ``--json`` writes them for a script.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from lyra_ray.model.errors import InputError
from lyra_ray.model.pools import GRAMMAR, MAX_GPUS_PER_NODE, PoolItem, parse_pool
from lyra_ray.model.spec import read_text_input, safe_load_yaml
from lyra_ray.parallelism import CATALOGUE, Plan, PlanOptions, plan
from lyra_ray.parallelism.inputs import MAX_BATCH, ModelInput, parse_model
from lyra_ray.parallelism.transformer import ZOO

JSON_KEYS = (
    "t",
    "p",
    "d",
    "microbatch",
    "schedule",
    "iteration_s",
    "memory_gb_per_gpu",
    "bubble",
    "tflops_per_gpu",
)


def register(sub: Any) -> None:
    p = sub.add_parser("plan", help="plan tensor/pipeline/data parallelism", description=__doc__)
    p.add_argument(
        "--model",
        required=True,
        help=f"a model name ({', '.join(sorted(ZOO))}) or a YAML/JSON file describing one",
    )
    p.add_argument("--gpus", required=True, help=f"one GPU type and its count: {GRAMMAR} (a100=96)")
    p.add_argument("--batch", required=True, help="global batch size in sequences")
    p.add_argument("--top", default="5", help="how many plans to show (default 5)")
    p.add_argument(
        "--gpus-per-server",
        help="GPUs per server of a TYPE=COUNT --gpus (default: the type's usual)",
    )
    p.add_argument(
        "--recompute", default="auto", help="activation recomputation: auto, always or never"
    )
    p.add_argument("--json", dest="json_out", help="write the plans to this JSON file")
    p.set_defaults(func=run_plan)


def _int(raw: str, flag: str, lo: int, hi: int) -> int:
    # ASCII digits, at most 12: int() refuses more than 4,300 digits with a ValueError
    if not re.fullmatch(r"\s*[0-9]{1,12}\s*", raw or ""):
        raise InputError(f"{flag}: must be a whole number, got {raw!r}")
    v = int(raw)
    if not lo <= v <= hi:
        raise InputError(f"{flag}: must be between {lo} and {hi}, got {v}")
    return v


def _gpus(raw: str) -> PoolItem:
    """One GPU type in the pool grammar (``a100=96``, or ``a100=12x8``: 12 servers of 8)."""
    items = parse_pool(raw, "--gpus").items
    if len(items) != 1:
        raise InputError(f"--gpus: one GPU type, got {len(items)}: {raw!r}")
    if items[0].gpu_type not in CATALOGUE:
        raise InputError(
            f"--gpus: unknown GPU type {items[0].gpu_type!r}; known: {sorted(CATALOGUE)}"
        )
    return items[0]


def _model(raw: str, batch: int) -> ModelInput:
    if raw.lower() in ZOO:
        return parse_model(raw.lower(), "--model", batch=batch)
    path = Path(raw)
    if not path.is_file():
        raise InputError(f"--model: {raw!r} is neither a known model ({sorted(ZOO)}) nor a file")
    # YAML reads JSON too; every failure (a binary file, a bad date) is an InputError
    doc = safe_load_yaml(read_text_input(path, "--model file"), f"--model {raw}")
    return parse_model(doc, "--model", batch=batch)


def _schedule(p: Plan) -> str:
    return {"gpipe": "GPipe", "1f1b": "1F1B"}.get(p.schedule, f"interl.x{p.chunks}")


def table(plans: list[Plan], title: str) -> Table:
    # No vertical rules: eleven columns then fit in 80 characters.
    t = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    for name in ("#", "t", "p", "d", "mb", "schedule", "recomp", "iter s", "GiB/GPU", "bubble"):
        t.add_column(name, justify="left" if name == "schedule" else "right", no_wrap=True)
    t.add_column("TFLOP/s", justify="right", no_wrap=True)
    for i, p in enumerate(plans, 1):
        t.add_row(
            str(i),
            str(p.t),
            str(p.p),
            str(p.d),
            str(p.microbatch),
            _schedule(p),
            "yes" if p.recompute else "no",
            f"{p.iteration_s:.3g}",
            f"{p.memory_bytes / 2**30:.1f}",
            f"{p.bubble:.1%}",
            f"{p.tflops_per_gpu:.0f}",
        )
    return t


def run_plan(args: Any) -> int:
    batch = _int(args.batch, "--batch", 1, MAX_BATCH)
    item = _gpus(args.gpus)
    top = _int(args.top, "--top", 1, 50)
    if args.recompute not in ("auto", "always", "never"):
        raise InputError(f"--recompute: must be auto, always or never, got {args.recompute!r}")
    model = _model(args.model, batch)
    gpu, per_server = CATALOGUE[item.gpu_type], item.gpus_per_node
    if args.gpus_per_server is not None:
        flag = _int(args.gpus_per_server, "--gpus-per-server", 1, MAX_GPUS_PER_NODE)
        if per_server not in (None, flag):
            raise InputError(
                f"--gpus-per-server: {flag} contradicts --gpus {args.gpus!r} "
                f"({per_server} GPUs per server)"
            )
        per_server = flag
    if per_server is not None:
        gpu = gpu.with_servers_of(per_server)
    out = Path(args.json_out) if args.json_out else None
    if out is not None and not out.parent.is_dir():
        raise InputError(f"--json: directory {str(out.parent)!r} does not exist")
    options = PlanOptions(top_k=top, recompute=args.recompute)
    plans = plan(model.model, gpu, item.gpus, batch, options)
    if out is not None:
        rows = [{k: p.to_dict()[k] for k in JSON_KEYS} | p.to_dict() for p in plans]
        try:
            out.write_text(json.dumps(rows, indent=1) + "\n")
        except OSError as e:
            raise InputError(f"--json: cannot write {out}: {e.strerror}") from None
    console = Console(width=min(Console().width, 100))
    name = model.model.name
    if not plans:
        console.print(f"{name} does not fit on {item.gpus} {item.gpu_type} GPUs with batch {batch}")
        return 1
    title = (
        f"{name} ({model.model.params / 1e9:.1f}B) on {item.gpus} {item.gpu_type}, batch {batch}"
    )
    console.print(table(plans, title))
    return 0
