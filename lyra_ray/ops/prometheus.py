"""A real Prometheus that scrapes a Ray cluster: ``lyra up --local --prometheus``.

Ray writes a service-discovery file into its session directory
(``prom_metrics_service_discovery.json``) that lists every node's metrics endpoint, and
keeps it current as nodes come and go. We start Debian's ``prometheus`` on a config
that reads that file, so everything ``ray.util.metrics`` exports — the scheduler's
``lyra_*`` metrics, Ray's and Serve's own — is scraped, and the Ray dashboard can show
it (``RAY_PROMETHEUS_HOST``). The process gets its own session (process group), so
``lyra down`` stops exactly it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.ops.process_groups import end_groups

SD_FILE = "prom_metrics_service_discovery.json"
INSTALL_HINT = (
    "prometheus is not installed: `apt-get install prometheus` (Debian's package; "
    "`make` installs it where it can)"
)


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def session_dir(ray_tmpdir: str | None = None) -> Path:
    """The running Ray session's directory: the connected driver's, else the newest under
    ``RAY_TMPDIR`` (Ray's ``<tmp>/ray/session_latest``)."""
    try:
        import ray

        node = ray._private.worker._global_node
        if node is not None:
            return Path(node.get_session_dir_path())
    except Exception:  # not connected, or the private accessor moved
        pass
    tmp = ray_tmpdir or os.environ.get("RAY_TMPDIR") or "/tmp"
    return (Path(tmp) / "ray" / "session_latest").resolve()


def write_config(session: Path, out_dir: Path, scrape_s: float = 5.0) -> Path:
    """A Prometheus config that scrapes every node Ray's service discovery lists."""
    if not 0 < scrape_s <= 300:
        raise InputError(f"prometheus: field 'scrape_s': must be in (0, 300], got {scrape_s!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    sd = session / SD_FILE
    cfg = out_dir / "prometheus.yml"
    # JSON is YAML: no hand-quoting of paths
    doc = {
        "global": {"scrape_interval": f"{scrape_s:g}s", "evaluation_interval": f"{scrape_s:g}s"},
        "scrape_configs": [
            {
                "job_name": "ray",
                "file_sd_configs": [{"files": [str(sd)], "refresh_interval": "5s"}],
            }
        ],
    }
    cfg.write_text(json.dumps(doc, indent=2))
    return cfg


@dataclass(frozen=True)
class Prometheus:
    pid: int
    url: str
    config: Path
    log: Path

    def query(self, expr: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """The result vector of an instant query (``/api/v1/query``)."""
        return query(self.url, expr, timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        stop(self.pid, timeout_s)


def query(url: str, expr: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    from urllib.parse import urlencode

    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urlencode({'query': expr})}", timeout=timeout_s
    ) as r:
        doc = json.load(r)
    if doc.get("status") != "success":
        raise RuntimeError(f"prometheus query {expr!r}: {doc.get('error')}")
    return list(doc["data"]["result"])


def start(session: Path, workdir: Path, port: int, scrape_s: float = 5.0) -> Prometheus:
    """Start Prometheus on 127.0.0.1:``port`` and wait until it is ready."""
    binary = prometheus_binary()
    if binary is None:
        raise InputError(INSTALL_HINT)
    cfg = write_config(session, workdir, scrape_s)
    log = workdir / "prometheus.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=2d",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: `lyra down` ends exactly it
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return Prometheus(proc.pid, url, cfg, log)
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    stop(proc.pid)
    raise RuntimeError(f"prometheus did not get ready in 60 s; see {log}")


def stop(pid: int, timeout_s: float = 10.0) -> None:
    """End the process group ``pid`` leads (SIGTERM, then SIGKILL)."""
    end_groups([pid], grace_s=timeout_s)
