"""`make run` as a new user meets it: `rumourmill dev` on the embedded Tansu broker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from localbroker import free_port

pytestmark = pytest.mark.integration  # starts the embedded Tansu broker


def test_make_run_publishes_the_demo_story_serves_and_stops_on_ctrl_c() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "streams", "dev", "--web-port", str(free_port())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line.rstrip())
            if line.startswith("serving until Ctrl-C"):
                break
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    output = "\n".join(seen)
    assert "published 6 events" in output, output
    assert "ack main#5: processed (processed_seq 5)" in output, output
    assert "ack reload#3: processed (processed_seq 3)" in output, output
    assert "npc-mara on save-1/main: at loc-tavern; processed 5 of 5 received" in output, output
    assert "Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)" in output, output
    reload = output[output.index("npc-mara on save-1/reload") :]
    assert "defeated" not in reload.split("relations")[0], output
    assert "gift given" in reload, output
    assert "stopped" in rest
    assert process.returncode == 0
