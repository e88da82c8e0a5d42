"""Ports on 127.0.0.1, and the probe that tells a broker is serving clients."""

from __future__ import annotations

import socket
import struct

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def metadata_broker_count(port: int, host: str = HOST, timeout: float = 2.0) -> int:
    """Send a raw Metadata v4 request and return how many brokers the answer lists.

    A broker that lists itself is serving clients (Kafka lists only unfenced brokers).
    Raw protocol instead of a client library: no event loop needed, so a broker also starts
    from inside a running asyncio loop, and nothing logs noise while the broker is booting.
    """
    client_id = b"rumourmill-probe"
    # header v1: api_key=3 (Metadata), api_version=4, correlation_id, client_id
    # body v4: topics=null (all), allow_auto_topic_creation=false
    payload = struct.pack(">hhih", 3, 4, 7, len(client_id)) + client_id + struct.pack(">ib", -1, 0)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        head = b""
        while len(head) < 16:  # size, correlation_id, throttle_time_ms, brokers count
            chunk = sock.recv(16 - len(head))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            head += chunk
    _size, correlation_id, _throttle, n_brokers = struct.unpack(">iiii", head)
    if correlation_id != 7:
        raise ConnectionError(f"unexpected correlation id {correlation_id}")
    return int(n_brokers)
