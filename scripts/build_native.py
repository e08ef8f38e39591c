"""Build the simulator's compiled core (``lyra_ray/native.py`` says what and why).

mypyc compiles the modules of ``lyra_ray.native.MODULES`` into one group of C
extensions under ``build/native/`` (never beside the sources, where they would shadow
them), then writes the manifest: which file serves which module, and the SHA-256 of
every source it was built from. The build goes to a scratch folder first and replaces
the old one whole, so an interrupted build leaves the last good one (or none).

    .venv/bin/python scripts/build_native.py [--strict]

Without a C compiler (or on any build error) it says so and exits 0: the simulator then
runs interpreted, only slower. ``--strict`` (CI) exits 1 instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.native import (  # noqa: E402
    BUILD_DIR,
    MANIFEST,
    MODULES,
    read_build,
    source_hash,
    source_path,
    stale_reason,
)

GROUP = "lyra_native"
"""mypyc's shared library is ``lyra_native__mypyc``: a stable name, not a hash."""


def module_of(path: Path, lib: Path) -> str:
    """``<lib>/lyra_ray/sim/runtime.cpython-311-x86_64-linux-gnu.so`` -> its module."""
    rel = path.relative_to(lib)
    name = rel.name
    for suffix in sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return ".".join((*rel.parent.parts, name))


def build(out: Path) -> dict[str, object]:
    from mypyc.build import mypycify
    from setuptools import setup

    scratch = out.with_name(out.name + ".tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    lib, temp, csrc = scratch / "lib", scratch / "temp", scratch / "c"
    sources = {m: source_path(m) for m in MODULES}
    hashes = {m: source_hash(p) for m, p in sources.items()}
    paths = [str(p.relative_to(ROOT)) for p in sources.values()]
    log = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy] from here
    try:
        with contextlib.redirect_stdout(log):
            ext = mypycify(paths, opt_level="3", target_dir=str(csrc), group_name=GROUP)
            setup(
                name="lyra-native",
                ext_modules=ext,
                script_args=[
                    "-q",
                    "build_ext",
                    "--build-lib",
                    str(lib),
                    "--build-temp",
                    str(temp),
                ],
            )
    except BaseException:
        sys.stderr.write(log.getvalue()[-4000:])
        raise
    finally:
        os.chdir(cwd)
    files: dict[str, str] = {}
    for so in lib.rglob("*"):
        if so.is_file() and so.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            files[module_of(so, lib)] = str(so.relative_to(scratch))
    missing = sorted(set(MODULES) - set(files))
    if missing:
        raise RuntimeError(f"mypyc built no extension for {', '.join(missing)}")
    manifest: dict[str, object] = {
        "files": files,
        "sources": hashes,
        "python": sys.version.split()[0],
    }
    (scratch / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    shutil.rmtree(csrc, ignore_errors=True)
    shutil.rmtree(temp, ignore_errors=True)
    old = out.with_name(out.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    scratch.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strict", action="store_true", help="exit 1 when the build fails (CI)")
    ap.add_argument("--out", type=Path, default=BUILD_DIR, help="the build folder")
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = ap.parse_args(argv)
    current = read_build(args.out)
    if not args.force and current is not None and stale_reason(current) is None:
        print(f"the compiled core in {args.out} is up to date")
        return 0
    print(f"compiling the simulator's core: {len(MODULES)} modules with mypyc (about a minute)")
    t0 = time.perf_counter()
    try:
        build(args.out)
    except (Exception, SystemExit) as e:  # setuptools reports a compiler error by SystemExit
        print(f"could not build the compiled core ({type(e).__name__}: {e})")
        print("the simulator runs interpreted: the same decisions, about 1.3x slower")
        return 1 if args.strict else 0
    took = time.perf_counter() - t0
    print(f"built the compiled core in {args.out} ({took:.0f} s); lyra simulate uses it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
