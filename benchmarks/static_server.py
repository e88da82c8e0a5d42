"""A tiny aiohttp server answering every GET with the same bytes: the read benchmark's baseline.

`python -m benchmarks.static_server PORT BODY_FILE` serves on 127.0.0.1:PORT until SIGTERM.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from aiohttp import web

from localbroker import die_with_parent, free_port, port_open

HOST = "127.0.0.1"


def serve(port: int, body: bytes) -> None:
    """Serve `body` as application/json at every path, until the process is stopped."""

    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/{path:.*}", answer)
    web.run_app(app, host=HOST, port=port, print=None, access_log=None)


class StaticServer:
    """`serve` in a child process on a free port: a context manager that stops it on exit."""

    def __init__(self, body_file: Path, timeout: float = 30.0) -> None:
        self.body_file = body_file
        self.timeout = timeout
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> StaticServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.static_server", str(self.port), str(self.body_file)],
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + self.timeout
        while not port_open(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"static server on port {self.port} did not start")
            time.sleep(0.05)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]).read_bytes())
