"""Every harness the report reads: add a `Host` (hosts/base.py) in a folder beside this one and list it here, or
call `add_host` from your own package."""

from __future__ import annotations

from pathlib import Path

from lmms_contam.hosts.base import Host
from lmms_contam.hosts.inspect_ai.host import HOST as INSPECT_AI
from lmms_contam.hosts.lmms_eval.host import HOST as LMMS_EVAL
from lmms_contam.hosts.vlmevalkit.host import HOST as VLMEVALKIT
from lmms_contam.listing import add_once

HOSTS: dict[str, Host] = {host.key: host for host in (LMMS_EVAL, VLMEVALKIT, INSPECT_AI)}


def add_host(host: Host) -> None:
    """Make the report read `host`'s runs (a host of another package, or a test's)."""
    listed = HOSTS[host.key].name if host.key in HOSTS else ""
    add_once(HOSTS, host.key, host, f"a host named {host.key!r} is already listed: {listed}")


def host_named(key: str) -> Host:
    try:
        return HOSTS[key]
    except KeyError:
        raise ValueError(f"no host {key!r}; the hosts are {', '.join(HOSTS)}") from None


def hosts_of(path: Path) -> list[Host]:
    """The hosts whose output files `path` is or holds (a folder may hold several hosts' runs)."""
    return [host for host in HOSTS.values() if host.wrote(path)]
