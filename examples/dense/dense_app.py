"""A small dense torch model behind Ray Serve: a plain Serve application.

Nothing here knows lyra. It is the kind of application a team already runs with
``serve run dense_app:app``: a model deployment that holds one GPU per replica, and an
HTTP ingress in front of it. lyra serves it unchanged (``lyra serve deploy
examples/dense/service.yaml``), one copy of the whole application per inference server.

- ``POST /`` with ``{"inputs": [[...hidden floats...], ...]}`` (or no body: one row of
  ones) answers ``{"outputs": [...], "replica": ...}``: the MLP's output for each row;
- ``handle.predict.remote(rows)`` does the same for Python callers.

Builder args (``args:`` in a service file): ``hidden`` and ``layers`` size the MLP;
``modelled_ms`` (default 0: never) adds a sleep after each forward pass standing for a
GPU's time per request. It exists for CPU-only test hosts, where the forward pass alone
takes well under a millisecond and no load would build up; never set it in production.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import torch
from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request
from starlette.responses import JSONResponse


@serve.deployment(ray_actor_options={"num_gpus": 1}, max_ongoing_requests=8)
class DenseModel:
    def __init__(self, hidden: int = 256, layers: int = 4, modelled_ms: float = 0.0) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        mods: list[torch.nn.Module] = []
        for _ in range(layers):
            mods += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
        self.model = torch.nn.Sequential(*mods, torch.nn.Linear(hidden, 1)).to(self.device).eval()
        self.hidden = hidden
        self.modelled_s = modelled_ms / 1000.0
        self.replica = f"{os.uname().nodename}:{os.getpid()}"

    async def __call__(self, rows: list[list[float]] | None) -> dict[str, Any]:
        if rows is None:
            x = torch.ones(1, self.hidden)
        else:
            x = torch.tensor(rows, dtype=torch.float32).reshape(-1, self.hidden)
        with torch.no_grad():
            y = self.model(x.to(self.device)).squeeze(-1).cpu()
        if self.modelled_s > 0:
            await asyncio.sleep(self.modelled_s)
        return {"outputs": y.tolist(), "replica": self.replica}


@serve.deployment(max_ongoing_requests=256)
class Api:
    def __init__(self, model: DeploymentHandle) -> None:
        self.model = model

    async def __call__(self, request: Request) -> Any:
        rows = None
        if await request.body():
            try:
                rows = (await request.json()).get("inputs")
            except (ValueError, AttributeError):
                return JSONResponse({"error": "body: expected JSON {'inputs': [[...]]}"}, 400)
        try:
            return await self.model.remote(rows)
        except (RuntimeError, ValueError) as e:  # rows of the wrong width
            return JSONResponse({"error": str(e).splitlines()[0]}, 400)

    async def predict(self, rows: list[list[float]] | None = None) -> dict[str, Any]:
        """For Python callers (a Serve handle, or lyra's ``Client().service_handle``)."""
        return await self.model.remote(rows)


def app(args: dict[str, Any]) -> serve.Application:
    """The application, sized by ``args`` (``hidden``, ``layers``, ``modelled_ms``)."""
    model = DenseModel.bind(
        int(args.get("hidden", 256)), int(args.get("layers", 4)), float(args.get("modelled_ms", 0))
    )
    return Api.bind(model)
