"""Where the per-shard work runs: in this process (the default) or as tasks on a Ray cluster.

Both run the same function on the same jobs and hand results back to the caller as they finish;
the caller saves each one, so a rerun after a crash skips what is done, whichever runner ran it.
On a multi-node cluster the shard files must be readable at the same paths on every node (shared
storage), and lmms-contam installed in the workers' environment.
"""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any


class LocalRunner:
    name = "in-process"
    resubmitted: tuple = ()  # in-process jobs are never lost to a worker
    in_order = True  # jobs run one after another here: the next one's input can be read ahead

    def imap(
        self, function: Callable[[Any, Any], Any], shared: Any, jobs: list, labels: list[str] | None = None
    ) -> Iterator[tuple[int, Any]]:
        """(job index, function(shared, job)) for each job; `labels` name the jobs where one is lost."""
        for index, job in enumerate(jobs):
            yield index, function(shared, job)


CONNECT_TIMEOUT_S = 10.0


class ClusterUnreachable(ValueError):
    """Nothing answers at the Ray address given (Ray itself would retry it for minutes)."""


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A TCP connection to a cluster's `host:port` (or `ray://host:port`) within `timeout_s`, before Ray is
    asked to join it."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ClusterUnreachable(f"--ray {address}: not an address of the form HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterUnreachable(
            f"--ray {address}: no Ray cluster answers there within {timeout_s:g} s ({exc}); start one with `ray start "
            "--head` and give its address, or give --ray alone for a local cluster"
        ) from exc


RESUBMITS = 3  # a job whose worker process or node is lost is submitted again at most this many times
NO_CPU_LIMIT_S = 600.0  # a cluster offering no CPU this long is lost: an autoscaler adds a node in minutes
WAIT_STEP_S = 5.0


class ClusterWithoutCpu(RuntimeError):
    """The cluster has had no CPU to run a job for the whole limit: its worker nodes are gone or never joined."""


class RayRunner:
    """Jobs as Ray tasks; `shared` (the eval matrix) goes into the object store once, not once per task. A job
    whose worker or node dies is submitted again by the runner itself, not by Ray's silent retry, so each loss
    is recorded in `resubmitted` (and the scan's summary says so)."""

    def __init__(
        self, address: str | None = None, num_cpus: int | None = None, no_cpu_limit_s: float = NO_CPU_LIMIT_S
    ) -> None:
        import ray

        if address is not None:
            check_reachable(address)
        if not ray.is_initialized():
            # None: Ray's own rule ($RAY_ADDRESS, else a running local cluster, else start one).
            ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        self.ray = ray
        self.name = f"Ray ({address or 'auto'})"
        self.in_order = False  # any worker on any node takes the next job
        self.resubmitted: list[dict] = []  # the last imap's jobs submitted again: {"job": label, "lost": error}
        self.no_cpu_limit_s = no_cpu_limit_s

    def imap(
        self, function: Callable[[Any, Any], Any], shared: Any, jobs: list, labels: list[str] | None = None
    ) -> Iterator[tuple[int, Any]]:
        """(job index, function(shared, job)) as jobs finish; `labels` name the jobs in `resubmitted` (default:
        their index)."""
        from ray.exceptions import NodeDiedError, WorkerCrashedError

        remote = self.ray.remote(max_retries=0)(function)
        shared_ref = self.ray.put(shared)
        pending = {remote.remote(shared_ref, job): index for index, job in enumerate(jobs)}
        self.resubmitted = []  # per scan: a runner serves every eval set of a `scan` command
        losses: Counter = Counter()
        while pending:
            ready = self._next_finished(list(pending))
            index = pending.pop(ready)
            try:
                result = self.ray.get(ready)
            except (WorkerCrashedError, NodeDiedError) as exc:
                losses[index] += 1
                if losses[index] > RESUBMITS:
                    raise
                self.resubmitted.append({"job": labels[index] if labels else index, "lost": type(exc).__name__})
                pending[remote.remote(shared_ref, jobs[index])] = index
                continue
            yield index, result

    def _next_finished(self, pending: list) -> Any:
        """The next job to finish; a cluster that offers no CPU for `no_cpu_limit_s` raises instead of waiting on
        forever (what finished before is saved by the caller, so a rerun goes on from there)."""
        without_cpu_since = None
        while True:
            ready, _ = self.ray.wait(pending, num_returns=1, timeout=WAIT_STEP_S)
            if ready:
                return ready[0]
            if self.ray.cluster_resources().get("CPU", 0) > 0:
                without_cpu_since = None
                continue
            without_cpu_since = without_cpu_since or time.monotonic()
            if time.monotonic() - without_cpu_since >= self.no_cpu_limit_s:
                alive = sum(node["Alive"] for node in self.ray.nodes())
                raise ClusterWithoutCpu(
                    f"{self.name}: no node of the cluster has offered a CPU for {self.no_cpu_limit_s:g} s "
                    f"({alive} node(s) alive, {len(pending)} job(s) waiting); the results saved so far are kept: "
                    "start or restart its worker nodes and run the same command again"
                )


def make_runner(ray_address: str | None) -> LocalRunner | RayRunner:
    """`--ray` absent: in-process; `--ray` alone ('auto'): Ray's default cluster; else that address."""
    if ray_address is None:
        return LocalRunner()
    return RayRunner(None if ray_address == "auto" else ray_address)
