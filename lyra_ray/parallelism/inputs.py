"""Reading a model description from user input (a job spec's ``model:``, ``lyra plan``).

Accepted shapes of the mapping (``batch`` is the global batch size in sequences):

* ``{name: gpt-18b, batch: 1024}`` - a model of :data:`~.transformer.ZOO`;
* ``{layers: 40, hidden: 6144, heads: 48, seq_len: 2048, vocab: 51200, batch: 1024}``;
  with a name or with layers, ``attention: flash | standard`` (default: the named
  model's own, ``flash`` for layers) says whether the attention kernel keeps the
  ``s x s`` scores out of HBM (FlashAttention) or not, which changes the layer's memory
  traffic and activations (:mod:`.transformer`);
* ``{layer_list: [{fwd_flops: ..., bwd_flops: ..., param_bytes: ..., act_bytes: ...,
  out_bytes: ..., tp_comm_bytes: ...}, ...], batch: 1024}`` (``tp_comm_bytes`` optional:
  without it on every layer the model is not tensor-split).

Every error names the field (``model.hidden: ...``) and raises :class:`InputError`;
numbers must be finite and within bounds that keep a search inside a scheduling step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.parallelism.layers import LayerCost, ModelSpec, layer_list
from lyra_ray.parallelism.transformer import (
    ATTENTION,
    ZOO,
    Attention,
    Transformer,
    transformer_layers,
)

MAX_LAYERS = 4096
MAX_DIM = 2**20
MAX_VOCAB = 10_000_000
MAX_BATCH = 10_000_000
_TRANSFORMER = ("layers", "hidden", "heads", "seq_len", "vocab")
_LAYER_FIELDS = ("fwd_flops", "bwd_flops", "param_bytes", "act_bytes", "out_bytes")
_LAYER_OPTIONAL = ("tp_comm_bytes", "gemm_width", "mem_bytes")


@dataclass(frozen=True, slots=True)
class ModelInput:
    """A validated model description: the layer list, the global batch, and the mapping
    in canonical form (what a job's config records, and a cache key)."""

    model: ModelSpec
    batch: int
    canonical: tuple[tuple[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        """The mapping again, JSON-safe; :func:`parse_model` reads it back unchanged."""
        out: dict[str, Any] = {}
        for k, v in self.canonical:
            out[k] = [dict(row) for row in v] if k == "layer_list" else v
        return out


def _int(raw: Mapping[str, Any], key: str, where: str, lo: int, hi: int) -> int:
    v = raw[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}.{key}: must be an integer, got {v!r}")
    if not lo <= v <= hi:
        raise InputError(f"{where}.{key}: must be between {lo} and {hi}, got {v}")
    return v


def _num(raw: Mapping[str, Any], key: str, where: str) -> float:
    v = raw[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"{where}.{key}: must be a number, got {v!r}")
    if not math.isfinite(v) or v < 0 or v > 1e30:
        raise InputError(f"{where}.{key}: must be finite, >= 0 and <= 1e30, got {v!r}")
    return float(v)


def _attention(raw: Mapping[str, Any], where: str, default: Attention) -> Attention:
    v = raw.get("attention", default)
    for a in ATTENTION:
        if v == a:  # a string equal to one of them (not, say, True)
            return a
    raise InputError(f"{where}.attention: must be 'flash' or 'standard', got {v!r}")


def _layers(raw: Any, where: str) -> tuple[ModelSpec, tuple[Any, ...]]:
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}: must be a non-empty list of layers")
    if len(raw) > MAX_LAYERS:
        raise InputError(f"{where}: at most {MAX_LAYERS} layers, got {len(raw)}")
    layers, canon = [], []
    for i, entry in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(entry, Mapping):
            raise InputError(f"{w}: must be a mapping of a layer's costs")
        unknown = sorted(set(entry) - {"name", *_LAYER_FIELDS, *_LAYER_OPTIONAL})
        if unknown:
            raise InputError(f"{w}: unknown field(s) {unknown}")
        missing = [f for f in _LAYER_FIELDS[:4] if f not in entry]
        if missing:
            raise InputError(f"{w}.{missing[0]}: required")
        vals = {f: _num(entry, f, w) for f in (*_LAYER_FIELDS, *_LAYER_OPTIONAL) if f in entry}
        vals.setdefault("out_bytes", 0.0)
        if vals.get("gemm_width") == 0:
            raise InputError(f"{w}.gemm_width: must be > 0")
        name = str(entry.get("name", f"layer{i}"))
        canon.append(tuple(sorted({"name": name, **vals}.items())))
        tp = vals.pop("tp_comm_bytes", None)
        layers.append(
            LayerCost(
                name=name,
                fwd_flops=vals["fwd_flops"],
                bwd_flops=vals["bwd_flops"],
                param_bytes=vals["param_bytes"],
                act_bytes=vals["act_bytes"],
                out_bytes=vals["out_bytes"],
                gemm_width=vals.get("gemm_width"),
                tp_comm_bytes=tp,
                mem_bytes=vals.get("mem_bytes", 0.0),
            )
        )
    return layer_list("layers", layers), tuple(canon)


def parse_model(raw: Any, where: str = "model", batch: int | None = None) -> ModelInput:
    """Validate a model mapping (or a zoo name) and build its layer list.

    ``batch`` overrides the mapping's own (``lyra plan --batch``).
    """
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: must be a model name or a mapping, got {type(raw).__name__}")
    allowed = {"name", "batch", "layer_list", "attention", *_TRANSFORMER}
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise InputError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(allowed)}")
    if batch is None:
        if "batch" not in raw:
            raise InputError(f"{where}.batch: required (the global batch size in sequences)")
        batch = _int(raw, "batch", where, 1, MAX_BATCH)
    elif isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InputError(f"{where}.batch: must be an integer between 1 and {MAX_BATCH}")
    kinds = [k for k in ("name", "layer_list", "layers") if k in raw]
    if len(kinds) != 1:
        raise InputError(
            f"{where}: give exactly one of 'name' (e.g. gpt-18b), 'layers'/'hidden'/'heads' "
            f"or 'layer_list'"
        )
    if kinds[0] == "name":
        extra = sorted(k for k in raw if k not in ("name", "batch", "attention"))
        if extra:
            raise InputError(f"{where}: 'name' cannot be combined with {extra}")
        name = raw["name"]
        if not isinstance(name, str) or name.lower() not in ZOO:
            raise InputError(f"{where}.name: unknown model {name!r}; known: {sorted(ZOO)}")
        key = name.lower()
        tf = ZOO[key]
        attention = _attention(raw, where, tf.attention)
        model = transformer_layers(replace(tf, attention=attention), key)
        canon: tuple[tuple[str, Any], ...] = (("batch", batch), ("name", key))
        if attention != tf.attention:  # the canonical form names only a change
            canon = (canon[0], ("attention", attention), canon[1])
    elif kinds[0] == "layer_list":
        if any(k in raw for k in (*_TRANSFORMER, "attention")):
            raise InputError(f"{where}: 'layer_list' cannot be combined with transformer fields")
        model, rows = _layers(raw["layer_list"], f"{where}.layer_list")
        canon = (("batch", batch), ("layer_list", rows))
    else:
        for k in ("hidden", "heads"):
            if k not in raw:
                raise InputError(f"{where}.{k}: required with 'layers'")
        dims = {
            "layers": _int(raw, "layers", where, 1, MAX_LAYERS),
            "hidden": _int(raw, "hidden", where, 1, MAX_DIM),
            "heads": _int(raw, "heads", where, 1, MAX_DIM),
            "seq_len": _int(raw, "seq_len", where, 1, MAX_DIM) if "seq_len" in raw else 2048,
            "vocab": _int(raw, "vocab", where, 1, MAX_VOCAB) if "vocab" in raw else 51200,
        }
        if dims["hidden"] % dims["heads"]:
            raise InputError(f"{where}.heads: must divide hidden ({dims['hidden']})")
        attention = _attention(raw, where, "flash")
        model = transformer_layers(Transformer(**dims, attention=attention), "transformer")
        canon = (("batch", batch), *sorted(dims.items()))
        if attention != "flash":
            canon = tuple(sorted((*canon, ("attention", attention))))
    return ModelInput(model, batch, canon)
