"""Whether a service may join the inference pool, and its copies' sizes per server
(``serving/capacity.py``: ``check_joins``, ``counts_on``, ``gpu_replicas_on``). The
live pool asks these before it deploys anything, so a refused service changes nothing;
that it does is the live loaning module's check (``test_bad_service_input_is_refused``)."""

from __future__ import annotations

import pytest

from lyra_ray.contract.page import ROUTE as PAGE_ROUTE
from lyra_ray.model import Node
from lyra_ray.model.errors import InputError
from lyra_ray.serving.capacity import check_joins, counts_on, gpu_replicas_on
from lyra_ray.serving.copy_plan import AppShape, DeploymentShape
from lyra_ray.serving.spec import parse_service_spec

ONE_GPU = AppShape("Api", (DeploymentShape("Model", 1.0, 1), DeploymentShape("Api", 0.0, 1)))
TWO_GPU = AppShape("Api", (DeploymentShape("Model", 2.0, 1), DeploymentShape("Api", 0.0, 1)))
NODES = {n: Node(n, "t4", 2, pool="inference") for n in ("s1", "s2")}


def app(name: str, route: str) -> object:
    return parse_service_spec({"name": name, "import_path": "m:app", "route": route})


def test_copies_take_the_servers_share_and_count_their_gpu_replicas() -> None:
    spec = app("one", "/one")
    assert counts_on(spec, ONE_GPU, NODES["s1"], 1) == {"Model": 2, "Api": 1}
    assert gpu_replicas_on(spec, ONE_GPU, NODES["s1"], 1) == 2
    assert gpu_replicas_on(spec, ONE_GPU, NODES["s1"], 2) == 1  # two services share it
    with pytest.raises(InputError, match="'replicas_per_server'"):
        counts_on(app("two", "/two"), TWO_GPU, NODES["s1"], 2)  # 1 GPU for a 2-GPU copy
    assert gpu_replicas_on(app("two", "/two"), TWO_GPU, NODES["s1"], 2) == 1
    with pytest.raises(InputError, match="shape is not known"):
        counts_on(spec, None, NODES["s1"], 1)


def test_a_service_joins_only_if_every_copy_still_fits_and_its_route_is_free() -> None:
    big = app("big", "/big")
    check_joins(big, TWO_GPU, {}, {}, NODES, taken={})
    # A second service halves every server's share: the 2-GPU copy no longer fits.
    with pytest.raises(InputError, match="'replicas_per_server'"):
        check_joins(app("small", "/small"), ONE_GPU, {"big": big}, {"big": TWO_GPU}, NODES, {})
    with pytest.raises(InputError, match=r"'route'.*taken by Serve application 'theirs'"):
        check_joins(big, TWO_GPU, {}, {}, NODES, {"/big": "Serve application 'theirs'"})
    with pytest.raises(InputError, match="'name': already deployed"):
        check_joins(big, TWO_GPU, {"big": big}, {"big": TWO_GPU}, NODES, {})
    with pytest.raises(InputError, match=r"'route'.*operator page"):
        check_joins(app("page", f"{PAGE_ROUTE}/x"), ONE_GPU, {}, {}, NODES, {})
    with pytest.raises(InputError, match="no inference-pool server"):
        check_joins(big, TWO_GPU, {}, {}, {}, {})
