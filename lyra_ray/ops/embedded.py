"""An embedded local Ray cluster with fake heterogeneous GPU nodes, in this process.

For tests, benchmarks and demos that need a training pool and an inference pool on one
host without the lasting ``ray start`` processes of ``lyra up --local``. Every node
carries the labels lyra reads (``gpu-type``, ``pool``) and an ``accelerator_type:X``
resource; the dashboard runs (Ray Train frees a stopped run's GPUs promptly only with
it); every port is picked free and the temp dir is private, so that several clusters
can share the host; shutdown goes through ``Cluster.shutdown()``, never ``ray stop``.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from lyra_ray.client.quiet import node_env_vars
from lyra_ray.ops.ports import free_port

log = logging.getLogger(__name__)
T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]

ADDRESS_VARS = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")
"""Where Ray's clients look first for a cluster, even over an address they are given."""


def disconnect() -> None:
    """End this driver's Ray session and forget Serve's cached controller client.

    WHY: Serve keeps its controller client in a module global and trusts it while the
    driver's job id matches, but every fresh cluster numbers its first driver job
    ``01000000`` again. A process that connects to a second cluster (the suite, one
    cluster per module; an embedded ``lyra up`` after another) then talks to the first
    cluster's dead controller: "Can't find actor ... from a different cluster".
    """
    import ray

    with suppress(ImportError):
        from ray.serve.context import _set_global_client

        _set_global_client(None)  # type: ignore[no-untyped-call]
    ray.shutdown()


@dataclass
class EmbeddedCluster:
    cluster: Any
    address: str
    dashboard_url: str
    workdir: Path
    nodes: dict[str, Any] = field(default_factory=dict)
    """node id -> the ``cluster_utils`` node handle (for :meth:`remove`)."""
    saved_env: dict[str, str] = field(default_factory=dict)
    """The address variables this process had before; back in place at shutdown."""
    worker_proxy_port: int = field(default_factory=free_port)
    """The HTTP port of the Serve proxies of the nodes after the head (see add_gpu_node)."""

    def add_gpu_node(self, gpu: str, gpus: int, pool: str = "training", cpus: int = 2) -> str:
        # WHY its own proxy port: lyra starts Serve with its proxy on the head only
        # (runtime/serve_proxy.py), but a Serve someone started before it may run one on
        # every node that gets a replica, and on one host each would bind the head
        # proxy's 127.0.0.1 port (SO_REUSEPORT),
        # so the kernel hands a share of the clients' new connections to whichever proxy
        # listens, also to one started a moment ago that has no routes yet: a request
        # then gets 'POST 404' (issue #31: a lent server reclaimed, or a service's first
        # server, under traffic). On a real cluster each node's proxy has its own address;
        # here the nodes' proxies listen on a port no client is given.
        # WHY retried: a node's raylet has the same fixed 30 s to register as the head's
        # (one CI run lost a whole module to it, right after another cluster shut down).
        # WHY its agent is checked: see _agent_serving (a node's logs and its share of
        # the State API go through its agent).
        # WHY a runtime-env directory of its own: the nodes of a one-host cluster share
        # the session directory, and Ray unpacks a ``working_dir`` anew on each node that
        # first needs it, over the copy already there. A process of another node running
        # in that directory lost it, its cwd deleted (a probe's actor on the head, which
        # then died importing PyTorch: "Intel oneMKL FATAL ERROR: Cannot load
        # libtorch_cpu.so"); a job's workers or a service's replicas spread over servers
        # were exposed the same way. Hosts do not share it.
        def start() -> Any:
            node = self.cluster.add_node(
                num_cpus=cpus,
                num_gpus=gpus,
                object_store_memory=80 * 2**20,
                resources={f"accelerator_type:{gpu.upper()}": 1},
                labels={"gpu-type": gpu, "pool": pool},
                dashboard_agent_listen_port=free_port(),
                runtime_env_dir_name=f"runtime_resources_{uuid.uuid4().hex[:12]}",
                env_vars={
                    **node_env_vars(),
                    "RAY_SERVE_WORKER_PROXY_HTTP_PORT": str(self.worker_proxy_port),
                },
            )
            try:
                _agent_serving(self.cluster, node)
            except RuntimeError:
                self.cluster.remove_node(node)
                raise
            return node

        node = start_with_retries(start)
        self.nodes[node.node_id] = node
        return str(node.node_id)

    def remove(self, node_id: str) -> None:
        self.cluster.remove_node(self.nodes.pop(node_id))

    def shutdown(self) -> None:
        """Stop the cluster and give the caller's environment back. ``workdir`` (the
        scheduler's state, the jobs' checkpoints) is left where it is: it is the
        caller's, and whoever made it removes it (the tests and benchmarks do)."""
        disconnect()
        self.cluster.shutdown()
        for k in ADDRESS_VARS:
            os.environ.pop(k, None)
        os.environ.update(self.saved_env)


def start_embedded(
    training: Sequence[tuple[str, int]] = (),
    inference: Sequence[tuple[str, int]] = (),
    workdir: Path | None = None,
) -> EmbeddedCluster:
    """A head (no GPU) plus nodes as ``(gpu type, GPUs)``; connected once all are up.
    ``workdir`` holds what the cluster's users keep there (a fresh temporary directory
    if not given); it outlives the cluster."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-embedded-{os.getuid()}")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    # WHY: an address another cluster left in the environment (``lyra up`` prints
    # ``export RAY_ADDRESS=...``; it outlives ``lyra down``) reaches every process of this
    # cluster, and Ray's State API takes it over any address it is given: Ray Train's
    # placement-group cleaner then asked the dead cluster whether its controller lived,
    # and a stopped run's GPUs were never freed (issue #31, item 6: a grow that never
    # stepped, a reclaim that never served). The head starts without one; every node
    # and client after it gets this cluster's own.
    saved = {k: os.environ.pop(k) for k in ADDRESS_VARS if k in os.environ}
    cluster, dash = _start_head(Cluster)
    live = EmbeddedCluster(
        cluster,
        cluster.address,
        f"http://127.0.0.1:{dash}",
        workdir or Path(tempfile.mkdtemp(prefix="lyra-embedded-")),
        saved_env=saved,
    )
    os.environ["RAY_ADDRESS"] = cluster.address
    try:
        for gpu, gpus in training:
            live.add_gpu_node(gpu, gpus, "training")
        for gpu, gpus in inference:
            live.add_gpu_node(gpu, gpus, "inference")
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
        cluster.wait_for_nodes()
    except BaseException:
        live.shutdown()
        raise
    return live


START_TRIES = 3
"""Ray gives a new node's raylet, the head's or a later node's, a fixed 30 s to register
with its GCS; on two loaded cores (a cluster shutting down beside it) that has run out.
Another try, on fresh ports, costs nothing when the first succeeds. Three, because one
full ``make test`` met two transient failures back to back (the registration timeout,
then the dashboard dying)."""
_TRANSIENT = (
    "timed out during startup",
    "Failed to read dashboard.err",
    "gcs_server_port",
    "address already in use",
)
"""The start failures seen in full ``make test`` runs right after the previous module's
cluster shut down: the raylet's registration timeout (a head's, and once a later
node's); a port picked free (:func:`free_port`) but taken by another process before Ray
bound it (the dashboard's: "Failed to find a valid port for dashboard after 0 retries:
[Errno 98] ... address already in use", a module start on this host); the head's
dashboard process
dying at once (return code -6, before it wrote a log), which Ray reports as failing to
read its ``dashboard.err``; and the GCS server not publishing its port within Ray's
wait (``Timed out waiting for file .../gcs_server_port_...``). The GCS had not even
opened its log files then (it opens them first thing), so it was not slow but stuck or
gone: waiting longer than Ray's 30 s would not help, a fresh start does. A node's
dashboard agent whose HTTP port was taken so (:func:`_agent_serving`) is reported with
the same words. Anything else is raised at once."""


def is_transient_start_failure(said: str) -> bool:
    """Whether a failed node start said one of the transient failures of
    :data:`_TRANSIENT` (an exception's text, or what ``ray start`` wrote)."""
    return any(m in said for m in _TRANSIENT)


AGENT_WAIT_S = 60.0
"""How long a new node's dashboard agent may take to publish its HTTP address."""


def _agent_serving(cluster: Any, node: Any = None, timeout_s: float | None = None) -> None:
    """Return once the dashboard agent of ``node`` (the ``cluster``'s head if ``None``)
    has published its HTTP address in the GCS; raise a transient start failure if it has
    not within ``timeout_s`` (:data:`AGENT_WAIT_S`).

    WHY: an agent whose HTTP port (picked free, :func:`free_port`) was taken before it
    bound it logs "address already in use", stays alive without HTTP and never publishes
    its address, and Ray starts the node as if nothing happened. On the head that leaves
    the cluster without job submission: every ``ray job submit`` hangs on "Failed to get
    head node agent" (seen in a two-process ``make test`` run: a module's first
    ``ray job submit`` never reached its scheduler in 300 s). A fresh start on fresh
    ports does not meet it."""
    from ray._private.ray_constants import KV_NAMESPACE_DASHBOARD
    from ray.dashboard.consts import DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX

    node = cluster.head_node if node is None else node
    timeout_s = AGENT_WAIT_S if timeout_s is None else timeout_s
    key = f"{DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX}{node.node_id}".encode()
    gcs = node.get_gcs_client()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with suppress(Exception):  # the GCS still starting: asked again below
            if gcs.internal_kv_get(key, KV_NAMESPACE_DASHBOARD, timeout=5):
                return
        time.sleep(0.2)
    raise RuntimeError(
        f"the dashboard agent of node {node.node_id} published no HTTP address in "
        f"{timeout_s:g} s (its port taken: address already in use?)"
    )


def _children(proc: Path = Path("/proc")) -> set[int]:
    """PIDs of this process's descendants (Ray starts its node processes as such), from
    ``/proc``; empty where there is none (then a failed start is not cleaned up)."""
    parent: dict[int, int] = {}
    for entry in proc.glob("[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")".
            parent[int(entry.parent.name)] = int(entry.read_text().rsplit(")", 1)[1].split()[1])
    out: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - out
        out |= frontier
    return out


def _end_processes(pids: set[int], grace_s: float = 5.0) -> None:
    """SIGTERM these processes (ours: started by a failed head start), SIGKILL what is
    left after ``grace_s``. Ray raises from inside the node's constructor, so nothing else
    holds the GCS or raylet that attempt started, and they would outlive it."""
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = set(pids)
    while left and time.monotonic() < deadline:
        left = {pid for pid in left if _alive(pid)}
        time.sleep(0.1)
    for pid in left:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a child that exited is reaped here (else it stays a
    zombie and looks alive)."""
    with suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return True


def start_with_retries(start: Callable[[], T]) -> T:
    """``start()`` (which starts a Ray head or node), tried again on fresh ports when it fails
    the transient ways of :data:`_TRANSIENT`, with what a failed try left running ended;
    any other failure is raised at once. ``start`` picks its ports anew on each call."""
    for attempt in range(1, START_TRIES + 1):
        before = _children()
        try:
            return start()
        except Exception as e:  # Ray raises a bare Exception for both
            _end_processes(_children() - before)
            if not is_transient_start_failure(str(e)) or attempt == START_TRIES:
                raise
            log.warning("the Ray head failed to start (%s); starting it again", e)
    raise AssertionError("unreachable")


def _start_head(cluster_cls: Any) -> tuple[Any, int]:
    """The head node (no GPU, 1 CPU, the dashboard on); returns (cluster, dashboard port)."""

    def start() -> tuple[Any, int]:
        dash = free_port()
        cluster = cluster_cls(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "num_gpus": 0,
                "object_store_memory": 100 * 2**20,
                "include_dashboard": True,
                "dashboard_host": "127.0.0.1",
                "dashboard_port": dash,
                "dashboard_agent_listen_port": free_port(),
                "labels": {"pool": "head"},
                "env_vars": node_env_vars(),  # Serve's controller runs here
            },
        )
        try:
            _agent_serving(cluster)  # job submission goes through the head's agent
        except RuntimeError:
            cluster.shutdown()
            raise
        return cluster, dash

    return start_with_retries(start)


@contextmanager
def embedded_cluster(
    training: Sequence[tuple[str, int]],
    inference: Sequence[tuple[str, int]] = (),
    workdir: Path | None = None,
) -> Iterator[EmbeddedCluster]:
    live = start_embedded(training, inference, workdir)
    try:
        yield live
    finally:
        live.shutdown()
