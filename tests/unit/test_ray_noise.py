"""The detector of Ray's and Serve's log lines that the quiet-output tests rely on."""

from tests.ray.ray_noise import ray_log_lines

RAY_LINES = [
    "\x1b[36m(ProxyActor pid=19882)\x1b[0m INFO 2026-11-24 10:59:28,610 proxy 192.0.2.2 -- Proxy",
    'INFO 2026-11-24 10:59:28,718 serve 19370 -- Started Serve in namespace "serve".',
    "\x1b[33m(raylet)\x1b[0m WARNING: 8 PYTHON worker processes have been started on node",
    "(ServeReplica:moe:moe_ingress pid=20653) INFO 2026-11-24 10:59:45,066 moe_moe_ingress x",
    "2026-11-24 10:52:11,240\tINFO worker.py:1841 -- Connecting to existing Ray cluster at",
    "(pid=123) hello from a task",
]
LYRA_LINES = [
    "serving app 'moe'; dashboard http://127.0.0.1:48659",
    "[   16s] re-planned layers [0, 1]: [[4, 2, 1, 1], [3, 1, 1, 3]]",
    "cluster up at 127.0.0.1:40129: 2 GPU node(s) and the scheduler (policy fifo)",
    "tiny-a-0001-dd71   finished   -      60/60       0s   31s",
    "lyra: error: job 'x': field 'workers': needs 99 GPUs of one type",
]


def test_ray_lines_are_found_and_lyra_lines_are_not() -> None:
    assert ray_log_lines("\n".join(RAY_LINES)) == [
        ln.replace("\x1b[36m", "").replace("\x1b[33m", "").replace("\x1b[0m", "").strip()
        for ln in RAY_LINES
    ]
    assert ray_log_lines("\n".join(LYRA_LINES)) == []


def test_json_commands_keep_stdout_for_their_data() -> None:
    """``data_stdout``: what Ray's threads print (Python or C level) goes to stderr, the
    command's JSON alone to stdout, so ``lyra status --json | jq`` always parses."""
    import json
    import subprocess
    import sys

    code = (
        "import os, json\n"
        "from lyra_ray.client.quiet import data_stdout\n"
        "out = data_stdout()\n"
        "print('(raylet) WARNING: from a Python thread')\n"
        "os.write(1, b'(raylet) from C\\n')\n"
        "print(json.dumps({'jobs': []}), file=out, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"jobs": []}
    assert "from a Python thread" in done.stderr and "from C" in done.stderr
