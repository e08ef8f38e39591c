"""A restart's saved services: deployed again, or dropped with one line saying why
(``serving/restore.py``; issue #42's restart rule for issue #43's services). That the
kept ones really serve again on a restarted pool is the live module's
(``tests/ray/test_live_loaning.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lyra_ray.serving.copy_plan import AppShape, DeploymentShape
from lyra_ray.serving.restore import restore_services, uploaded_packages

SHAPE = AppShape(
    "Api", (DeploymentShape("Model", 1.0, 1), DeploymentShape("Api", 0.0, 1))
).to_dict()
SHIPPED = {
    "name": "shipped",
    "import_path": "app:app",
    "runtime_env": {
        "working_dir": "gcs://_ray_pkg_aa.zip",
        "py_modules": ["gcs://_ray_pkg_bb.zip"],
    },
}
INSTALLED = {
    "name": "installed",
    "import_path": "examples_pkg.app:app",
    "runtime_env": {"pip": ["x"]},
}
MOE = {"name": "experts", "model": "moe"}


def _missing(gone: set[str]) -> Any:
    """As ``job_env.missing_packages``, over a cluster that lost ``gone``."""

    def missing(env: Mapping[str, Any]) -> list[str]:
        return [u for u in uploaded_packages({"runtime_env": env}) if u in gone]

    return missing


def _saved(*specs: dict[str, Any]) -> dict[str, Any]:
    return {
        "services": {s["name"]: s for s in specs},
        "shapes": {s["name"]: SHAPE for s in specs if s.get("model", "app") == "app"},
    }


def test_services_whose_code_the_cluster_still_holds_are_all_kept() -> None:
    got = restore_services(_saved(SHIPPED, INSTALLED, MOE), _missing(set()))
    assert sorted(got.services) == ["experts", "installed", "shipped"] and not got.dropped
    assert sorted(got.shapes) == ["installed", "shipped"]
    assert got.shapes["shipped"].to_dict() == SHAPE


def test_a_service_whose_uploaded_package_is_gone_is_dropped_in_one_line_naming_it() -> None:
    got = restore_services(_saved(SHIPPED, INSTALLED, MOE), _missing({"gcs://_ray_pkg_bb.zip"}))
    assert sorted(got.services) == ["experts", "installed"] and "shipped" not in got.shapes
    line = got.dropped["shipped"]
    assert "\n" not in line and "gcs://_ray_pkg_bb.zip" in line and "deploy it again" in line


def test_a_saved_spec_this_lyra_cannot_read_is_dropped_not_a_crash() -> None:
    old_dense = {"name": "old", "model": "dense"}  # the built-in kind before it became an app
    no_shape = {**INSTALLED, "name": "noshape"}
    saved = _saved(old_dense, INSTALLED)
    saved["services"]["noshape"] = no_shape
    saved["services"]["junk"] = ["not", "a", "mapping"]
    got = restore_services(saved, _missing(set()))
    assert list(got.services) == ["installed"]
    assert sorted(got.dropped) == ["junk", "noshape", "old"]
    assert all("\n" not in v and "deploy it again" in v for v in got.dropped.values())


def test_only_gcs_packages_count_as_uploaded() -> None:
    assert uploaded_packages(SHIPPED) == ["gcs://_ray_pkg_aa.zip", "gcs://_ray_pkg_bb.zip"]
    assert uploaded_packages(INSTALLED) == [] and uploaded_packages(MOE) == []
    assert uploaded_packages({"runtime_env": {"working_dir": "s3://b/app.zip"}}) == []
    assert uploaded_packages(None) == [] and uploaded_packages({"runtime_env": "x"}) == []
    assert restore_services({}, _missing(set())).services == {}
