"""A tiny aiohttp server answering GETs with bytes fixed in advance: the read benchmarks' baseline.

`python -m benchmarks.static_server PORT BODIES_FILE` serves on 127.0.0.1:PORT until SIGTERM;
BODIES_FILE is a JSON object from a path with its query string to the JSON text served there.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import orjson
from aiohttp import web

from localbroker import die_with_parent, free_port, port_open

HOST = "127.0.0.1"


def serve(port: int, bodies: Mapping[str, bytes]) -> None:
    """Serve each body as application/json at its path and query, until the process is stopped:
    a dictionary lookup is all a static handler does beyond HTTP itself."""

    async def answer(request: web.Request) -> web.Response:
        body = bodies.get(request.path_qs)
        if body is None:
            return web.Response(status=404)
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/{path:.*}", answer)
    web.run_app(app, host=HOST, port=port, print=None, access_log=None)


class StaticServer:
    """`serve` in a child process on a free port: a context manager that stops it on exit.

    `bodies` (JSON, by path and query) are handed over in a file of `workdir`.
    """

    def __init__(self, bodies: Mapping[str, bytes], workdir: Path, timeout: float = 30.0) -> None:
        self.file = workdir / f"static-bodies-{id(self)}.json"
        self.file.write_bytes(orjson.dumps({path: body.decode() for path, body in bodies.items()}))
        self.timeout = timeout
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> StaticServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.static_server", str(self.port), str(self.file)],
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


def read_bodies(bodies_file: Path) -> dict[str, bytes]:
    """The bodies `StaticServer` wrote, by path and query, as the very bytes it was given."""
    texts: dict[str, str] = orjson.loads(bodies_file.read_bytes())
    return {path: text.encode() for path, text in texts.items()}


if __name__ == "__main__":
    serve(int(sys.argv[1]), read_bodies(Path(sys.argv[2])))
