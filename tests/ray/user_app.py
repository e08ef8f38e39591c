"""A platform team's own Serve application, written into a private folder for the live
tests: nothing in it imports lyra, and lyra reaches it only through its runtime_env.

A FastAPI ingress (``@serve.ingress``) in front of a GPU deployment:

- ``POST /predict`` (JSON ``{"id", "x"}``) -> JSON: the model's output and where it ran;
- ``GET /info`` -> plain text, from the model: the node and pid it runs on;
- ``GET /stream?id=&n=&gap=`` -> server-sent events: first where the stream runs (node,
  pid), then ``n`` tokens, each a real forward pass ``gap`` seconds apart, then
  ``[DONE]``: a stream of several seconds, like an LLM's;
- ``embed(x)`` for Python callers (a handle).

The ingress appends every POST's and stream's id to a file under ``calls_dir`` before it
calls the model: "the app counts its calls", so a test can tell a request the app saw
twice (resent) from one it saw once. ``delay_ms`` (a builder arg) is the explicit switch
that makes each forward pass take GPU-like time on this CPU-only host.
"""

from __future__ import annotations

from pathlib import Path

SOURCE = """
import asyncio
import json
import os

import ray
import torch
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, StreamingResponse
from ray import serve
from ray.serve.handle import DeploymentHandle

api = FastAPI()


@serve.deployment(ray_actor_options={"num_gpus": 1, "num_cpus": 0}, max_ongoing_requests=64)
class Model:
    def __init__(self, delay_ms: float) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)
        ).eval()
        self.delay = delay_ms / 1000.0
        self.where = {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def forward(self, x):
        with torch.no_grad():
            return self.net(torch.tensor(x, dtype=torch.float32)).tolist()

    async def predict(self, x):
        y = self.forward(x)
        await asyncio.sleep(self.delay)
        return {"y": y, **self.where}

    async def info(self) -> str:
        return f"model on {self.where['node']} pid {self.where['pid']}"

    async def tokens(self, n: int, gap: float):
        yield json.dumps(self.where)
        x = [0.5] * 32
        for i in range(n):
            x = self.forward(x)
            await asyncio.sleep(gap)
            yield str(i)


@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1000)
@serve.ingress(api)
class Front:
    def __init__(self, model: DeploymentHandle, calls_dir: str) -> None:
        self.model = model
        self.calls_dir = calls_dir

    def _count(self, kind: str, rid: str) -> None:
        with open(os.path.join(self.calls_dir, f"{os.getpid()}.log"), "a") as f:
            f.write(f"{kind} {rid}\\n")

    @api.post("/predict")
    async def predict(self, body: dict):
        self._count("POST", str(body["id"]))
        return await self.model.predict.remote(body["x"])

    @api.get("/info", response_class=PlainTextResponse)
    async def info(self) -> str:
        return await self.model.info.remote()

    @api.get("/stream")
    async def stream(self, id: str, n: int = 10, gap: float = 0.3):
        self._count("STREAM", id)
        gen = self.model.options(stream=True).tokens.remote(n, gap)

        async def events():
            async for token in gen:
                yield f"data: {token}\\n\\n"
            yield "data: [DONE]\\n\\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def embed(self, x):
        return await self.model.predict.remote(x)


def build(args: dict):
    os.makedirs(args["calls_dir"], exist_ok=True)
    return Front.bind(Model.bind(float(args.get("delay_ms", 0))), args["calls_dir"])
"""


def write_app(folder: Path) -> Path:
    """The app's private folder (``shop.py``); its import path is ``shop:build``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "shop.py").write_text(SOURCE.lstrip())
    return folder


def calls(calls_dir: Path) -> dict[str, int]:
    """How many times the app saw each ``KIND id`` (every replica's file)."""
    out: dict[str, int] = {}
    for f in calls_dir.glob("*.log"):
        for line in f.read_text().splitlines():
            if line.strip():
                out[line] = out.get(line, 0) + 1
    return out
