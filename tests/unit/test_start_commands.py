"""A cluster.yaml's worker start commands as this host plays them
(``ops/start_commands.py``; the head's are ``test_autoscaling_config.py``'s): the host
sets the address, ports and object store itself, whatever the file says, and a line
that is not ``ray start`` is refused naming its place in the file."""

from __future__ import annotations

import pytest

from lyra_ray.model.errors import InputError
from lyra_ray.ops.start_commands import flag_value, strip_flags, worker_commands


def test_flags_the_host_sets_are_stripped_in_either_spelling() -> None:
    argv = ["start", "--address=$RAY_HEAD_IP:6379", "--object-store-memory", "1", "--block", "-v"]
    assert strip_flags(argv, ("--address", "--object-store-memory", "--block")) == ["start", "-v"]
    assert flag_value(["up", "--config", "c.yaml"], "--config") == "c.yaml"
    assert flag_value(["up", "--config=c.yaml"], "--config") == "c.yaml"
    assert flag_value(["up", "--config"], "--config") is None


def test_worker_lines_join_the_hosts_head_and_anything_else_is_refused() -> None:
    doc = {"worker_start_ray_commands": ["ray start --address=$RAY_HEAD_IP:6379 --block"]}
    (argv,) = worker_commands(doc, "127.0.0.1:7777", 10**8, "/tmp/w/n0")
    assert argv[0].endswith("ray") and argv[1] == "start" and "--block" not in argv
    assert "--address=127.0.0.1:7777" in argv and "--object-store-memory=100000000" in argv
    assert [a for a in argv if a.startswith("--address")] == ["--address=127.0.0.1:7777"]
    # a temp dir of its own, whatever the file says: one host's nodes keep runtime envs apart
    doc = {"worker_start_ray_commands": ["ray start --temp-dir=/tmp/ray --address=x:1"]}
    (argv,) = worker_commands(doc, "127.0.0.1:7777", 10**8, "/tmp/w/n0")
    assert [a for a in argv if a.startswith("--temp-dir")] == ["--temp-dir=/tmp/w/n0"]
    bad = {"worker_start_ray_commands": ["ray start --block", "rm -rf /"]}
    with pytest.raises(InputError, match=r"worker_start_ray_commands\[1\]: only `ray start`"):
        worker_commands(bad, "127.0.0.1:7777", 10**8, "/tmp/w/n0")
    assert worker_commands({}, "127.0.0.1:7777", 10**8, "/tmp/w/n0") == []
