"""Keep an embedded Ray's Serve replicas off every network interface but loopback.

Ray's own services (GCS, raylet, workers, Serve's proxy) listen where the node's address says: 127.0.0.1 in
single-machine mode, which ``gpt2-onnx serve`` turns on without ``--address``. One server does not follow it: each
Serve replica starts an inter-deployment gRPC server on ``[::]:0`` (every interface, an ephemeral port), with no
setting to change that (Ray 2.60: ``ray.serve._private.replica``, ``_on_initialized``; ray-project/ray#64544 asks
for one). It carries handle calls only when ``RAY_SERVE_USE_GRPC_BY_DEFAULT`` is on, and callers reach it at the
node's address, so on a loopback node it loses nothing by listening on loopback alone.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

__all__ = ["bind_replica_grpc_to_node", "is_loopback"]

log = logging.getLogger(__name__)

EVERY_INTERFACE = "[::]:"  # the address prefix the replica's inter-deployment server is given


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IPv4/IPv6 address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_replica_grpc_to_node() -> None:
    """In a replica's process, before Serve starts its gRPC server: when this Ray node's address is loopback,
    make the server listen there instead of on every interface. On any other node nothing changes."""
    import ray
    from ray.serve._private import replica

    node = str(ray.util.get_node_ip_address())
    if not is_loopback(node):
        return
    bind = replica.add_port_to_grpc_server
    if getattr(bind, "loopback_host", None) == node:
        return  # this process's earlier replica did it already

    def bind_on_node(server: Any, address: str) -> Any:
        if address.startswith(EVERY_INTERFACE):
            address = f"{node}:{address[len(EVERY_INTERFACE) :]}"
        return bind(server, address)

    bind_on_node.loopback_host = node  # type: ignore[attr-defined]  # a marker: this process is patched
    replica.add_port_to_grpc_server = bind_on_node
    log.debug("replica gRPC server bound to %s", node)
