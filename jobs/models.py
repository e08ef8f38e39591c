"""Plain-torch models shaped like the catalogue's job types, so each type has code that runs.

Why our own instead of torchvision's: PyPI's torchvision does not import beside the CPU
torch this project installs, and a profiler must run where only torch is (a GPU machine
with nothing else). Each model follows the shape measured on the H200
(``lyra_ray/model/data/h200_throughputs.json``, ``provenance.jobs``) at ``size="real"``;
``size="tiny"`` keeps the architecture and cuts widths, depths and batches so a step
takes milliseconds on a CPU (fake-GPU clusters, tests).

:func:`build` returns the model with a step closure: one forward, backward and optimiser
step on synthetic data already on the device (as the H200 measurement did: no input
pipeline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

Step = Callable[[], None]


@dataclass(frozen=True)
class Shape:
    batch: int
    width: int
    depth: int
    extra: int = 0


SHAPES: dict[str, dict[str, Shape]] = {
    # batch, width (channels or d_model), depth (blocks or layers), extra (image side,
    # vocab, items or sequence)
    "resnet50": {"real": Shape(64, 64, 4, 224), "tiny": Shape(2, 4, 1, 16)},
    "resnet18": {"real": Shape(128, 64, 4, 32), "tiny": Shape(4, 4, 1, 16)},
    "transformer": {"real": Shape(128, 512, 6, 32), "tiny": Shape(8, 32, 1, 16)},
    "lm": {"real": Shape(20, 650, 2, 33278), "tiny": Shape(4, 32, 2, 500)},
    "recommendation": {"real": Shape(2048, 512, 2, 20000), "tiny": Shape(32, 32, 2, 500)},
    "a3c": {"real": Shape(32, 32, 3, 84), "tiny": Shape(4, 8, 3, 84)},
    "cyclegan": {"real": Shape(1, 64, 9, 256), "tiny": Shape(1, 4, 1, 16)},
    "bert": {"real": Shape(32, 768, 12, 128), "tiny": Shape(4, 32, 2, 16)},
}
"""The shapes of ``provenance.jobs`` in the H200 table (real) and CPU-sized ones (tiny)."""

JOB_TYPES = tuple(SHAPES)


class _Bottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, stride: int, expansion: int) -> None:
        super().__init__()
        cout = mid * expansion
        if expansion == 1:  # a basic block (ResNet-18)
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
            )  # fmt: skip
        else:
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
            )  # fmt: skip
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


def _resnet(s: Shape, blocks: list[int], expansion: int, classes: int) -> nn.Module:
    layers: list[nn.Module] = [
        nn.Conv2d(3, s.width, 7 if s.extra >= 128 else 3, 2 if s.extra >= 128 else 1, 1),
        nn.BatchNorm2d(s.width),
        nn.ReLU(),
    ]
    cin = s.width
    for i, n in enumerate(blocks[: s.depth] if s.depth < len(blocks) else blocks):
        mid = s.width * 2**i
        for j in range(n):
            layers.append(_Bottleneck(cin, mid, 2 if j == 0 and i > 0 else 1, expansion))
            cin = mid * expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


class _LM(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.emb = nn.Embedding(s.extra, s.width)
        self.rnn = nn.LSTM(s.width, s.width, s.depth, batch_first=True)
        self.out = nn.Linear(s.width, s.extra)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        out: torch.Tensor = self.out(h)
        return out


class _Bert(nn.Module):
    def __init__(self, s: Shape, vocab: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, s.width)
        layer = nn.TransformerEncoderLayer(
            s.width, max(1, s.width // 64), 4 * s.width, 0.0, batch_first=True
        )
        self.enc = nn.TransformerEncoder(layer, s.depth, enable_nested_tensor=False)
        self.out = nn.Linear(s.width, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.out(self.enc(self.emb(x)))
        return out


class _Seq2Seq(nn.Module):
    def __init__(self, s: Shape, vocab: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, s.width)
        self.tr = nn.Transformer(
            s.width, max(1, s.width // 64), s.depth, s.depth, 4 * s.width, 0.0, batch_first=True
        )
        self.out = nn.Linear(s.width, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.out(self.tr(self.emb(src), self.emb(tgt)))
        return out


def _generator(s: Shape) -> nn.Module:
    w = s.width
    layers: list[nn.Module] = [nn.Conv2d(3, w, 7, 1, 3), nn.InstanceNorm2d(w), nn.ReLU()]
    layers += [nn.Conv2d(w, 2 * w, 3, 2, 1), nn.InstanceNorm2d(2 * w), nn.ReLU()]
    layers += [nn.Conv2d(2 * w, 4 * w, 3, 2, 1), nn.InstanceNorm2d(4 * w), nn.ReLU()]
    for _ in range(s.depth):
        layers.append(_Bottleneck(4 * w, 4 * w, 1, 1))
    layers += [nn.ConvTranspose2d(4 * w, 2 * w, 3, 2, 1, 1), nn.ReLU()]
    layers += [
        nn.ConvTranspose2d(2 * w, w, 3, 2, 1, 1),
        nn.ReLU(),
        nn.Conv2d(w, 3, 7, 1, 3),
        nn.Tanh(),
    ]
    return nn.Sequential(*layers)


def _patchgan(w: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, w, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(w, 2 * w, 4, 2, 1), nn.LeakyReLU(0.2),
        nn.Conv2d(2 * w, 1, 4, 1, 1),
    )  # fmt: skip


@dataclass(frozen=True)
class Built:
    step: Step
    """One training step."""
    module: nn.Module
    optimizer: torch.optim.Optimizer


def build(
    job_type: str,
    size: str = "tiny",
    device: str = "cpu",
    grad_hook: Callable[[list[nn.Parameter]], None] | None = None,
) -> Built:
    """``job_type`` at ``size`` on ``device``; ValueError names a bad one. ``grad_hook``
    runs between backward and the optimiser step (a data-parallel run averages the
    gradients there: :mod:`lyra_ray.jobs.catalogue_loop`)."""
    if size == "auto":  # real shapes where there is a real GPU, tiny on fake ones
        size = "real" if torch.device(device).type == "cuda" else "tiny"
    if job_type not in SHAPES:
        raise ValueError(f"unknown job type {job_type!r}; known: {', '.join(JOB_TYPES)}")
    if size not in SHAPES[job_type]:
        raise ValueError(f"unknown size {size!r}; known: real, tiny")
    s = SHAPES[job_type][size]
    dev = torch.device(device)
    g = torch.Generator(device="cpu").manual_seed(0)
    torch.manual_seed(0)
    amp = dev.type == "cuda" and job_type != "lm"  # the LSTM ran in fp32/TF32

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dev)

    def ints(high: int, *shape: int) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=g).to(dev)

    params: list[nn.Parameter]
    if job_type in ("resnet50", "resnet18"):
        blocks, exp = ([3, 4, 6, 3], 4) if job_type == "resnet50" else ([2, 2, 2, 2], 1)
        model = _resnet(s, blocks, exp, 1000 if s.extra >= 128 else 10).to(dev)
        x, y = rand(s.batch, 3, s.extra, s.extra), ints(10, s.batch)
        loss: Callable[[], torch.Tensor] = lambda: F.cross_entropy(model(x), y)  # noqa: E731
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    elif job_type == "transformer":
        vocab = 32000 if size == "real" else 500
        model = _Seq2Seq(s, vocab).to(dev)
        src, tgt = ints(vocab, s.batch, s.extra), ints(vocab, s.batch, s.extra)
        loss = lambda: F.cross_entropy(model(src, tgt).flatten(0, 1), tgt.flatten())  # noqa: E731
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    elif job_type == "lm":
        model = _LM(s).to(dev)
        x, y = ints(s.extra, s.batch, 35), ints(s.extra, s.batch, 35)
        loss = lambda: F.cross_entropy(model(x).flatten(0, 1), y.flatten())  # noqa: E731
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
    elif job_type == "recommendation":
        model = nn.Sequential(
            nn.Linear(s.extra, s.width), nn.SELU(), nn.Linear(s.width, s.width), nn.SELU(),
            nn.Linear(s.width, 2 * s.width), nn.SELU(), nn.Linear(2 * s.width, s.extra),
        ).to(dev)  # fmt: skip
        x = (rand(s.batch, s.extra) > 2.0).float()
        loss = lambda: F.mse_loss(model(x), x)  # noqa: E731
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    elif job_type == "a3c":
        w = s.width
        model = nn.Sequential(
            nn.Conv2d(4, w, 8, 4), nn.ReLU(), nn.Conv2d(w, 2 * w, 4, 2), nn.ReLU(),
            nn.Conv2d(2 * w, 2 * w, 3, 1), nn.ReLU(), nn.Flatten(),
            nn.Linear(2 * w * 7 * 7, 16 * w), nn.ReLU(), nn.Linear(16 * w, 7),
        ).to(dev)  # fmt: skip
        x = rand(s.batch, 4, s.extra, s.extra)
        loss = lambda: model(x).pow(2).mean()  # noqa: E731
        opt = torch.optim.RMSprop(model.parameters(), lr=1e-4)
    elif job_type == "cyclegan":
        gen, disc = _generator(s).to(dev), _patchgan(s.width).to(dev)
        model = nn.ModuleList([gen, disc])
        x = rand(s.batch, 3, s.extra, s.extra)
        loss = lambda: disc(gen(x)).pow(2).mean() + F.l1_loss(gen(x), x)  # noqa: E731
        opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    else:  # bert
        vocab = 30522 if size == "real" else 500
        model = _Bert(s, vocab).to(dev)
        x, y = ints(vocab, s.batch, s.extra), ints(vocab, s.batch, s.extra)
        loss = lambda: F.cross_entropy(model(x).flatten(0, 1), y.flatten())  # noqa: E731
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    params = list(model.parameters())

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            value = loss()
        value.backward()  # type: ignore[no-untyped-call]
        if grad_hook is not None:
            grad_hook(params)
        opt.step()

    return Built(step, model, opt)
