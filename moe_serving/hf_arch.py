"""Which MoE architecture a service names, and the ``transformers`` config it builds.

A user names a ``model_type`` that ``transformers`` knows and any of its config fields;
the service's size knobs (``layers``, ``experts``, ``top_k``, ``dim``, ``hidden``) are
mapped onto each named architecture's own field names, and ``hf_config`` wins over both.
WHY apart from the model (:mod:`lyra_ray.moe_serving.hf_moe`): this is the boundary of
what a spec may say, checked and defaulted before any weights exist; the model owns its
weights and the hooks in its forward.

Pure of Ray; imports transformers only inside :func:`build_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ARCH_DEFAULTS: dict[str, dict[str, Any]] = {
    "mixtral": {
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
        "max_position_embeddings": 1024,
    },
    "qwen2_moe": {
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 256,
        "moe_intermediate_size": 256,
        "shared_expert_intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_experts": 4,
        "num_experts_per_tok": 1,
        "max_position_embeddings": 1024,
    },
    "deepseek_v3": {
        "vocab_size": 256,
        "hidden_size": 64,
        "intermediate_size": 256,
        "moe_intermediate_size": 256,
        "num_hidden_layers": 2,
        "first_k_dense_replace": 0,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "q_lora_rank": None,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 8,
        "v_head_dim": 16,
        "max_position_embeddings": 1024,
    },
}
"""Small configs (runs on a CPU in milliseconds) of the three architectures the issue names;
a spec's ``hf_config`` overrides any field, and any other ``transformers`` model type whose
experts are fused SwiGLU tensors works from the user's config alone."""

EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
"""Where the config keeps its routed experts per layer (Mixtral, Qwen2-MoE, DeepSeek-V3)."""


@dataclass(frozen=True)
class ArchSpec:
    """What a user names: the architecture, its config fields, and the seed of its weights."""

    arch: str = "mixtral"
    config: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    topics: int = 4
    token_noise: float = 1.0


def build_config(spec: ArchSpec) -> Any:
    """The ``transformers`` config: ``ARCH_DEFAULTS[arch]`` (if any) updated by the spec's."""
    from transformers import AutoConfig

    fields = {**ARCH_DEFAULTS.get(spec.arch, {}), **dict(spec.config)}
    try:
        return AutoConfig.for_model(spec.arch, **fields)
    except (ValueError, KeyError):
        raise ValueError(
            f"arch: {spec.arch!r} is not a model type transformers knows "
            f"(e.g. {', '.join(sorted(ARCH_DEFAULTS))})"
        ) from None


SIZE_FIELDS: dict[str, dict[str, str]] = {
    "mixtral": {
        "layers": "num_hidden_layers",
        "experts": "num_local_experts",
        "top_k": "num_experts_per_tok",
        "dim": "hidden_size",
        "hidden": "intermediate_size",
    },
    "qwen2_moe": {
        "layers": "num_hidden_layers",
        "experts": "num_experts",
        "top_k": "num_experts_per_tok",
        "dim": "hidden_size",
        "hidden": "moe_intermediate_size",
    },
    "deepseek_v3": {
        "layers": "num_hidden_layers",
        "experts": "n_routed_experts",
        "top_k": "num_experts_per_tok",
        "dim": "hidden_size",
        "hidden": "moe_intermediate_size",
    },
}
"""The service's size knobs, as each named architecture's config calls them (another
architecture takes its sizes from ``hf_config`` alone)."""


def arch_spec(knobs: Mapping[str, Any]) -> ArchSpec:
    """The architecture an MoE service's knobs name: ``arch``, the size knobs in its config's
    names, then ``hf_config`` on top (it wins), and ``seed``."""
    arch = str(knobs.get("arch", "mixtral"))
    names = SIZE_FIELDS.get(arch, {})
    fields: dict[str, Any] = {names[k]: int(knobs[k]) for k in names if k in knobs}
    fields.update(dict(knobs.get("hf_config") or {}))
    return ArchSpec(arch, fields, seed=int(knobs.get("seed", 0)))
