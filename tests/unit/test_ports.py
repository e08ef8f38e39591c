"""Free ports are drawn below the kernel's ephemeral range, bind, and are never handed
out twice: a port the kernel can give an outgoing connection was the cause of a Serve
proxy's "Failed to bind" (lyra_ray/ops/ports.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lyra_ray.ops import ports


def _range(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "ip_local_port_range"
    f.write_text(text)
    return f


def test_ports_come_from_between_rays_workers_and_the_ephemeral_range(tmp_path: Path) -> None:
    eph = _range(tmp_path, "32768\t60999\n")
    got = [ports.free_port(eph, tmp_path / "claims") for _ in range(50)]
    assert all(ports.RAY_WORKER_PORT_MAX < p < 32768 for p in got)
    assert len(set(got)) == 50
    for p in got[:5]:  # each one binds
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_a_port_claimed_by_another_process_is_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eph = _range(tmp_path, "32768 60999")
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "25000").touch()  # another process claimed it a moment ago
    picks = iter([25000, 25001])
    monkeypatch.setattr(ports.random, "choice", lambda _: next(picks))
    monkeypatch.setattr(ports, "_binds", lambda _: True)
    assert ports.free_port(eph, claims) == 25001


def test_a_stale_claim_is_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    eph = _range(tmp_path, "32768 60999")
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "25002").touch()
    os.utime(claims / "25002", (0, 0))  # claimed long ago: its owner bound it or died
    monkeypatch.setattr(ports.random, "choice", lambda _: 25002)
    monkeypatch.setattr(ports, "_binds", lambda _: True)
    assert ports.free_port(eph, claims) == 25002


def test_a_listening_port_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eph = _range(tmp_path, "32768 60999")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        picks = iter([taken, 25003])
        monkeypatch.setattr(ports.random, "choice", lambda _: next(picks))
        assert ports.free_port(eph, tmp_path / "claims") == 25003


@pytest.mark.parametrize("text", ["", "garbage", "20500 60999"])
def test_without_a_usable_pool_the_kernel_picks(tmp_path: Path, text: str) -> None:
    """Not Linux, an unreadable file, or an ephemeral range that leaves too few ports
    above Ray's workers: bind(0), as before."""
    eph = _range(tmp_path, text)
    assert ports.pool(eph) is None
    p = ports.free_port(eph, tmp_path / "claims")
    assert 0 < p < 65536
    assert not (tmp_path / "claims").exists()


def test_no_file_at_all_falls_back(tmp_path: Path) -> None:
    assert ports.pool(tmp_path / "missing") is None
