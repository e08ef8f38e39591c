"""Which saved services a restarted scheduler deploys again, and which it drops, saying why.

WHY: a restart (the scheduler actor restarted by Ray, or ``lyra down`` then ``lyra up``
over the same ``--dir``) must never lose a service silently, and must never fail to
start because of one (issue #42's restart rule, applied to issue #43's services). A
user's application reaches the cluster as packages the client uploaded to the GCS
(``gcs://_ray_pkg_<hash>.zip``, :mod:`lyra_ray.client.user_env`); the GCS is the
cluster's, so a new cluster does not have them and the scheduler, which never holds the
user's files, cannot upload them again. Such a service is dropped with one line naming
the package and saying to deploy it again; a service whose code the cluster can still
reach (packages present, or none: an installed module, ``pip`` only) is deployed again.
A saved spec this lyra can no longer read is dropped the same way. Pure: whether a
package exists is the caller's question (``missing``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.model.runtime_env import uris
from lyra_ray.serving.copy_plan import AppShape
from lyra_ray.serving.spec import ServiceSpec, parse_service_spec


@dataclass
class Restored:
    services: dict[str, ServiceSpec] = field(default_factory=dict)
    shapes: dict[str, AppShape] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    """Service name -> the one line that says why it was not deployed again."""


def uploaded_packages(raw: Any) -> list[str]:
    """The GCS packages a saved service's code lives in (none for lyra's MoE service)."""
    env = raw.get("runtime_env") if isinstance(raw, Mapping) else None
    return [u for u in uris(env if isinstance(env, Mapping) else None) if u.startswith("gcs://")]


def restore_services(
    saved: Mapping[str, Any], missing: Callable[[Mapping[str, Any]], list[str]]
) -> Restored:
    """The services of a saved serving state (``saved["services"]``, ``saved["shapes"]``)
    that can run again, and a line for each one that cannot. ``missing(runtime_env)``
    lists the env's packages this cluster no longer holds."""
    out = Restored()
    shapes = saved.get("shapes") or {}
    for name, raw in sorted((saved.get("services") or {}).items()):
        try:
            spec = parse_service_spec(raw)
            shape = AppShape.from_dict(shapes[name]) if spec.model == "app" else None
        except (InputError, KeyError, TypeError, ValueError) as e:
            # A kind this version no longer runs (the built-in 'dense' service before it
            # became an example app), or a state damaged by hand.
            why = " ".join(str(e).split())[:200]
            out.dropped[name] = (
                f"service {name!r} was not deployed again: its saved spec cannot be read "
                f"({why}); deploy it again"
            )
            continue
        gone = missing(spec.app.runtime_env) if spec.app is not None else []
        if gone:
            out.dropped[name] = (
                f"service {name!r} was not deployed again: its code package {gone[0]} is "
                "gone from this Ray cluster (packages live in the cluster's GCS, which a new "
                "cluster does not have): deploy it again from its folder"
            )
            continue
        out.services[name] = spec
        if shape is not None:
            out.shapes[name] = shape
    return out
