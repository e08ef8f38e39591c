"""`lyra dashboard export|push`: the file is the dashboard, and push sends exactly that file.

push talks to a real HTTP server on 127.0.0.1 that records what arrives, so the path,
the token header and the body are the ones a Grafana would see.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.cli import main
from lyra_ray.telemetry.dashboard import build_dashboard, iter_panels

TOKEN = "glsa_test-token-123"


@dataclass
class FakeGrafana:
    url: str
    status: int = 200
    reply: dict[str, Any] = field(
        default_factory=lambda: {"status": "success", "url": "/d/lyra-ray/x", "version": 3}
    )
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def grafana(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGrafana]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    fake: FakeGrafana

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            fake.requests.append(
                {
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "body": json.loads(self.rfile.read(n)),
                }
            )
            out = json.dumps(fake.reply).encode()
            self.send_response(fake.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake = FakeGrafana(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_export_writes_the_dashboard_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lyra.json"
    assert main(["dashboard", "export", str(out)]) == 0
    exported = json.loads(out.read_text())
    assert exported == build_dashboard()
    assert out.read_text().startswith('{\n  "')  # indent 2, for a readable diff
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert str(out) in last and f"{sum(1 for _ in iter_panels(exported))} panels" in last


def test_export_refuses_an_unwritable_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no-such-dir" / "lyra.json"
    assert main(["dashboard", "export", str(target)]) == 2
    err = capsys.readouterr().err
    assert str(target) in err and len(err.strip().splitlines()) == 1
    assert not target.exists()


def test_push_sends_exactly_the_exported_json_with_the_token(
    grafana: FakeGrafana,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "lyra.json"
    assert main(["dashboard", "export", str(out)]) == 0
    monkeypatch.setenv("MY_GRAFANA_TOKEN", TOKEN)
    argv = ["--grafana-url", grafana.url, "--folder-uid", "ops", "--token-env", "MY_GRAFANA_TOKEN"]
    assert main(["dashboard", "push", *argv]) == 0
    (req,) = grafana.requests
    assert req["path"] == "/api/dashboards/db"
    assert req["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert req["body"]["dashboard"] == json.loads(out.read_text())
    assert req["body"]["overwrite"] is True and req["body"]["folderUid"] == "ops"
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"{grafana.url}/d/lyra-ray/x" in last and "version 3" in last


def test_push_without_a_token_sends_nothing(
    grafana: FakeGrafana, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    assert main(["dashboard", "push", "--grafana-url", grafana.url]) == 2
    assert "GRAFANA_TOKEN" in capsys.readouterr().err
    assert grafana.requests == []


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "127.0.0.1:3000", "http://", "http://h:x/"])
def test_push_refuses_a_bad_url_and_sends_nothing(
    grafana: FakeGrafana,
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
    assert main(["dashboard", "push", "--grafana-url", url]) == 2
    err = capsys.readouterr().err
    assert "--grafana-url" in err and "Traceback" not in err
    assert grafana.requests == []


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (412, "The dashboard has been changed by someone else"),
        (401, "invalid API key"),
        (500, "database is locked"),
    ],
)
def test_push_reports_grafanas_refusal_in_one_line(
    grafana: FakeGrafana,
    status: int,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    grafana.status, grafana.reply = status, {"message": message}
    monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
    assert main(["dashboard", "push", "--grafana-url", grafana.url]) == 1
    assert len(grafana.requests) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(status) in err[0] and message in err[0], err
