"""`rumourmill rebuild`'s first check of the live worker, against a real HTTP server on
127.0.0.1 answering as what may stand in front of the workers does: what it says, and when it
names `--workers-stopped`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streams.rebuild import RebuildFailed, check_live
from streams.settings import Settings


@contextmanager
def answering(status: int) -> Iterator[str]:
    """A server answering every GET with `status` and a proxy's plain page; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html>upstream unavailable</html>"
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_gateway_with_no_worker_behind_it_names_the_flag_for_stopped_workers(
    status: int,
) -> None:
    with answering(status) as url, pytest.raises(RebuildFailed) as refused:
        check_live(Settings(web_url=url))
    assert str(refused.value).startswith(f"the live worker at {url}: {status}: ")
    assert str(refused.value).endswith("(with the workers stopped: --workers-stopped)")


def test_another_server_answering_is_no_sign_of_stopped_workers() -> None:
    with answering(404) as url, pytest.raises(RebuildFailed) as refused:
        check_live(Settings(web_url=url))
    assert "--workers-stopped" not in str(refused.value)
