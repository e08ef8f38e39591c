"""How many gradient bytes a job all-reduces per step, by model.

The throughput catalogues (Gavel's measurements, the shipped round numbers) say how fast
a job steps on one server, not how much it communicates, so the placement-aware
simulator needs this second table. The values are fp32 gradients of the models'
published parameter counts (rounded; Gavel's workloads are the PyTorch reference
models): they set the size of the effect, so they are stated here and in
``docs/network.md`` rather than buried. A model not listed gets ``DEFAULT_BYTES``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lyra_ray.model import JobSpec

MB = 1e6

GRADIENT_BYTES: dict[str, float] = {
    "resnet18": 11.7e6 * 4,  # CIFAR-10 ResNet-18: 11.2-11.7 M parameters
    "resnet50": 25.6e6 * 4,  # ImageNet ResNet-50
    "transformer": 63e6 * 4,  # Transformer-base translation with its embeddings
    "lm": 28e6 * 4,  # 2-layer word LSTM on WikiText-2 with a 33 k vocabulary
    "recommendation": 24e6 * 4,  # ML-20M autoencoder (20 k items x 600 hidden, x2)
    "a3c": 1.6e6 * 4,  # Atari conv policy/value network
    "cyclegan": 28e6 * 4,  # two generators and two discriminators
    "bert": 110e6 * 4,  # BERT-base
}
DEFAULT_BYTES = 100 * MB


def model_key(job_type: str) -> str:
    """``"ResNet-50 (batch size 32)"`` -> ``"resnet50"``: the catalogue's spelling."""
    head = job_type.split("(", 1)[0]
    return re.sub(r"[^a-z0-9]", "", head.lower())


def gradient_bytes(spec: JobSpec, table: Mapping[str, float] | None = None) -> float:
    """Bytes ``spec`` all-reduces per step: by its job type (or a Philly job's drawn
    type in ``config["job_type"]``), else ``DEFAULT_BYTES``."""
    rows = GRADIENT_BYTES if table is None else table
    raw = spec.job_type or spec.config.get("job_type")
    if not isinstance(raw, str):
        return DEFAULT_BYTES
    return float(rows.get(model_key(raw), DEFAULT_BYTES))
