"""The picture of a rumour: served as SVG, drawn by Graphviz, rendered by headless Chromium
(Debian's `chromium`) into a PNG that is not blank, every teller named; `rumourmill rumour-map`
writes the same picture to a file. Bad requests and a missing `dot` get clear errors."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import zlib
from itertools import pairwise
from pathlib import Path
from typing import Any, cast
from xml.etree import ElementTree

import faust
import orjson
import pytest
from aiohttp.test_utils import TestServer
from click.testing import CliRunner, Result
from faust.web.drivers.aiohttp import Web as AiohttpWeb

from projections.rumour_map import Holder, RumourMap, Telling, rumour_map
from projections.timelines import load
from schemas.records import TimelineRecord
from streams import rumour_picture, web
from streams.cli import main
from streams.rumour_picture import rumour_svg
from streams.web import MOST_PICTURES_WAITING, register_views
from tests.projections.test_rumour_map import (
    MEMORIES_HELD,
    POLICY,
    STATE,
    WORLD,
    farthest_travelled,
)
from tests.streams.test_web import MemoryReads, serve, served_client

SVG_NAMESPACE = "{http://www.w3.org/2000/svg}"
MAIN = "timeline 'main'"


def picture_path(belief_id: str, query: str = "") -> str:
    return f"/v2/memory/worlds/{WORLD}/rumours/{belief_id}.svg{query}"


def ask(*paths: str) -> list[tuple[int, Any]]:
    """Each path answered by the views over the story's state: status, and the JSON body or
    the text of another (the picture)."""
    return serve(MemoryReads(STATE), *((path, {}) for path in paths))


def drawn_now(rumour: RumourMap) -> bytes:
    """The picture of `rumour`, drawn in a loop of its own."""
    return asyncio.run(rumour_svg(rumour))


def texts(svg: bytes) -> list[str]:
    """Every line of text the picture shows."""
    root = ElementTree.fromstring(svg)
    return [element.text or "" for element in root.iter(f"{SVG_NAMESPACE}text")]


def screenshot(svg: bytes, directory: Path) -> bytes:
    """The picture as headless Chromium renders it, as PNG bytes."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is needed (apt-get install chromium; .ci/run does)"
    page, png = directory / "rumour.svg", directory / "rumour.png"
    page.write_bytes(svg)
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={directory / 'profile'}",
            f"--screenshot={png}",
            "--window-size=1000,500",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return png.read_bytes()


def pixels(png: bytes) -> list[bytes]:
    """The pixels of an 8-bit RGB or RGBA PNG, decoded with zlib alone (no imaging library)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks: dict[bytes, bytes] = {}
    at = 8
    while at < len(png):
        length, kind = int.from_bytes(png[at : at + 4], "big"), png[at + 4 : at + 8]
        chunks[kind] = chunks.get(kind, b"") + png[at + 8 : at + 8 + length]
        at += 12 + length
    header = chunks[b"IHDR"]
    width, height = int.from_bytes(header[:4], "big"), int.from_bytes(header[4:8], "big")
    assert header[8] == 8, "8-bit channels"
    channels = {2: 3, 6: 4}[header[9]]
    stride = width * channels
    raw = zlib.decompress(chunks[b"IDAT"])
    previous = bytearray(stride)
    found = []
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            line[x] = (line[x] + _predicted(kind, left, up, corner)) & 0xFF
        found += [bytes(line[x : x + channels]) for x in range(0, stride, channels)]
        previous = line
    return found


def _predicted(kind: int, left: int, up: int, corner: int) -> int:
    """PNG's five row filters."""
    if kind == 0:
        return 0
    if kind == 1:
        return left
    if kind == 2:
        return up
    if kind == 3:
        return (left + up) // 2
    estimate = left + up - corner
    closest = min(
        (abs(estimate - left), 0, left),
        (abs(estimate - up), 1, up),
        (abs(estimate - corner), 2, corner),
    )
    return closest[2]


def test_the_picture_names_every_teller_and_renders_in_chromium(tmp_path: Path) -> None:
    named = farthest_travelled()
    expected = rumour_map(STATE, "default", WORLD, named.belief_id, POLICY)
    [(status, picture)] = ask(picture_path(named.belief_id))
    assert status == 200
    svg = picture.encode()
    shown = texts(svg)
    names = {holder.entity_id: holder.name for holder in expected.holders}
    tellers = {telling.teller for telling in expected.tellings}
    assert len(tellers) >= 2
    for teller in tellers:
        assert names[teller] in shown and teller in shown, teller
    for number, telling in enumerate(expected.tellings, start=1):
        assert f"{number}. {telling.game_time}" in shown  # each telling, in story order
    colours = {pixel[:3] for pixel in pixels(screenshot(svg, tmp_path))}
    assert len(colours) > 1, "the rendered picture is blank"


def test_an_unknown_belief_or_timeline_is_a_404_and_a_bad_id_a_400() -> None:
    belief = farthest_travelled().belief_id
    answers = ask(
        picture_path("0" * 32),
        picture_path(belief, "?timeline_id=elsewhere"),
        picture_path(belief, "?timeline_id=" + "x" * 200),
    )
    assert [status for status, _ in answers] == [404, 404, 400]
    assert answers[0][1] == {"detail": f"no memory {'0' * 32!r} in world {WORLD!r}"}
    assert "never received events" in answers[1][1]["detail"]


def test_the_picture_is_drawn_as_of_a_position_as_every_read_is() -> None:
    farthest = farthest_travelled()
    named = min(  # the rumour's first memory: the news went on after it
        (m for m in MEMORIES_HELD if m.origin == farthest.origin and m.timeline_id == "main"),
        key=lambda m: m.seq,
    )
    reached = cast(TimelineRecord, load(STATE, "default", WORLD, "main")).processed_seq
    then = rumour_map(STATE, "default", WORLD, named.belief_id, POLICY, as_of_seq=named.seq)
    assert then.tellings != rumour_map(STATE, "default", WORLD, named.belief_id, POLICY).tellings
    answers = ask(
        *(
            picture_path(named.belief_id, f"?as_of_seq={asked}")
            for asked in (named.seq, named.seq - 1, "abc", 999, f"2&as_of_seq={named.seq}")
        )
    )
    assert answers[0] == (200, drawn_now(then).decode())
    assert answers[1:] == [
        (404, {"detail": f"{MAIN} does not see memory {named.belief_id!r}"}),
        (400, {"detail": "query parameter 'as_of_seq' must be a positive integer"}),
        (400, {"detail": f"as_of_seq 999 is beyond the processed_seq {reached} of {MAIN}"}),
        (400, {"detail": "query parameter 'as_of_seq' must be given once"}),
    ]


def test_without_graphviz_the_picture_is_a_503_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on it
    [(status, body)] = ask(picture_path(farthest_travelled().belief_id))
    assert status == 503
    assert "Graphviz's `dot` is not installed" in body["detail"]


def run_command(*arguments: str) -> Result:
    """`rumourmill ARGUMENTS` against a web server serving the story's state."""

    async def run() -> Result:
        app = faust.App("picture-command-test", autodiscover=False)
        register_views(app, MemoryReads(STATE))
        server = TestServer(cast(AiohttpWeb, app.web).web_app)
        await server.start_server()
        try:
            url = str(server.make_url("")).rstrip("/")
            command: list[Any] = [*arguments, "--url", url]
            return await asyncio.to_thread(CliRunner().invoke, main, command)
        finally:
            await server.close()

    return asyncio.run(run())


def test_the_rumour_map_command_writes_the_picture(tmp_path: Path) -> None:
    named = farthest_travelled()
    out = tmp_path / "rumour.svg"
    result = run_command("rumour-map", named.belief_id, "--world", WORLD, "--out", str(out))
    assert result.exit_code == 0, result.output
    [(_, served)] = ask(picture_path(named.belief_id))
    assert out.read_text() == served
    missing = run_command("rumour-map", "0" * 32, "--world", WORLD, "--out", str(out))
    assert missing.exit_code == 1
    assert "404: no memory" in missing.output


def test_the_rumour_map_command_says_when_graphviz_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # the worker answering has no `dot`
    out = tmp_path / "rumour.svg"
    belief = farthest_travelled().belief_id
    result = run_command("rumour-map", belief, "--world", WORLD, "--out", str(out))
    assert result.exit_code == 1
    assert "503: Graphviz's `dot` is not installed" in result.output
    assert not out.exists()


def test_names_are_drawn_as_they_were_declared() -> None:
    declared = ['Old "Salt" Bram', "back\\slash\\n", "<b>Ilka</b>", "{Odo|Sefa}", "Ünï 🐉"]
    holders = [Holder(f"npc-{n}", name, 1, 0.5, False) for n, name in enumerate(declared)]
    tellings = [
        Telling(f"npc-{n}", f"npc-{n + 1}", 1, 0.5, n + 1, f"day {n}")
        for n in range(len(declared) - 1)
    ]
    shown = texts(drawn_now(RumourMap("w", "main", "b", 'said "so"', holders, tellings)))
    assert set(declared) <= set(shown)
    assert '“said "so"”' in shown


def test_one_who_forgot_the_news_is_drawn_as_such_and_one_who_never_held_it_too() -> None:
    """A holder who forgot was drawn by the memory forgotten, as sure as when told."""
    holders = [
        Holder("npc-ada", "Ada", None, None, False, forgot=True),
        Holder("npc-bo", "Bo", None, None, False),
        Holder("npc-cy", "Cy", 2, 0.5, False),
    ]
    tellings = [Telling("npc-ada", "npc-cy", 1, 0.5, 1, None)]
    shown = texts(drawn_now(RumourMap("w", "main", "b", "so", holders, tellings)))
    assert {"forgot it", "told it, holds none", "hops 2 · 50% sure"} <= set(shown)


def drawn(svg: bytes) -> tuple[list[str], list[tuple[str, str]]]:
    """The ids on the picture's nodes (each node's second line), and its arrows as (teller id,
    listener id)."""
    root = ElementTree.fromstring(svg)
    ids: dict[str, str] = {}
    arrows: list[str] = []
    for group in root.iter(f"{SVG_NAMESPACE}g"):
        title = group.findtext(f"{SVG_NAMESPACE}title") or ""
        lines = [element.text or "" for element in group.iter(f"{SVG_NAMESPACE}text")]
        if group.get("class") == "node":
            ids[title] = lines[1]
        elif group.get("class") == "edge":
            arrows.append(title)
    return list(ids.values()), [
        (ids[teller], ids[listener]) for teller, listener in (a.split("->") for a in arrows)
    ]


def test_any_id_is_a_node_of_its_own_with_its_own_arrows() -> None:
    odd = ["npc:ada", "<npc-bo>", "npc-bo", "npc-cy\\", "node", "a->b"]
    holders = [Holder(entity, entity.upper(), 1, 0.5, False) for entity in odd]
    tellings = [
        Telling(teller, listener, 1, 0.5, n, None)
        for n, (teller, listener) in enumerate(pairwise(odd), start=1)
    ]
    nodes, arrows = drawn(drawn_now(RumourMap("w", "main", "b", "so", holders, tellings)))
    assert sorted(nodes) == sorted(odd)
    assert arrows == [(telling.teller, telling.listener) for telling in tellings]


def test_labels_are_drawn_literally_and_the_picture_is_well_formed() -> None:
    declared = {"npc-a": "Ada\x07\x1b[31m", "npc-b": "&#xD800;", "npc-c": "R&amp;D"}
    holders = [Holder(entity, name, 1, 0.5, False) for entity, name in declared.items()]
    tellings = [Telling("npc-a", "npc-b", 1, 0.5, 1, "&lt;dawn&gt;")]
    svg = drawn_now(RumourMap("w", "main", "b", "Tom & Jerry &bogus;", holders, tellings))
    shown = texts(svg)  # parses: well-formed XML
    assert {"Ada[31m", "&#xD800;", "R&amp;D", "“Tom & Jerry &bogus;”", "1. &lt;dawn&gt;"} <= {
        *shown
    }


def test_a_graphviz_that_fails_is_a_503_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "dot"
    broken.write_text("#!/bin/sh\necho 'dot: out of memory' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    [(status, body)] = ask(picture_path(farthest_travelled().belief_id))
    assert status == 503
    assert body == {"detail": "Graphviz's `dot` failed to draw the picture: dot: out of memory"}


def fake_dot(directory: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `dot` on the PATH running `script` (sh) in `directory`; returns its log file there."""
    dot = directory / "dot"
    dot.write_text(f"#!/bin/sh\ncd {directory}\n{script}\n")
    dot.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    return directory / "log"


def test_a_picture_that_takes_dot_too_long_is_a_503_and_dot_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graphviz drew a picture for as long as it took (a rumour 3,000 characters heard: 7 s
    of a core, and more the larger it was), after its client had gone too."""
    fake_dot(tmp_path, "echo $$ > pid\nexec sleep 5", monkeypatch)
    monkeypatch.setattr(rumour_picture, "DRAWING_SECONDS", 0.3)
    [(status, body)] = ask(picture_path(farthest_travelled().belief_id))
    assert status == 503
    assert body["detail"].startswith(
        "Graphviz's `dot` was stopped after 0.3 s drawing the picture (4 holders, 3 tellings)"
    )
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)


def test_pictures_are_drawn_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request ran a `dot` of its own at once: however many a tenant sent, all drawing
    together, every core was theirs and the events of every tenant waited."""
    log = fake_dot(
        tmp_path,
        "echo start >> log\ncat > /dev/null\nsleep 0.2\necho end >> log\n"
        "echo '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'",
        monkeypatch,
    )

    async def run() -> list[int]:
        client = served_client(MemoryReads(STATE))
        await client.start_server()
        try:
            path = picture_path(farthest_travelled().belief_id)
            answers = await asyncio.gather(*(client.get(path) for _ in range(3)))
            return [answer.status for answer in answers]
        finally:
            await client.close()

    assert asyncio.run(run()) == [200, 200, 200]
    assert log.read_text().split() == ["start", "end"] * 3


def test_pictures_past_those_already_waiting_are_a_503_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests queued for the one `dot` without end: the tenth waited for nine pictures, up
    to 10 s each, its rumour map held all along. Four may wait; the rest are told to come
    back, before their maps are read (each read its map first), and every picture asked is
    drawn once the queue has room."""
    drawn_maps: list[RumourMap] = []

    def counted_map(*args: Any) -> RumourMap:
        drawn_maps.append(rumour_map(*args))
        return drawn_maps[-1]

    monkeypatch.setattr(web, "rumour_map", counted_map)
    drawing, opened = tmp_path / "drawing", tmp_path / "opened"
    fake_dot(  # each picture is drawn once the test opens the gate (a file)
        tmp_path,
        f"cat > /dev/null\ntouch {drawing}\nwhile [ ! -e {opened} ]; do sleep 0.01; done\n"
        "echo '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'",
        monkeypatch,
    )

    async def run() -> tuple[list[tuple[int, Any]], int]:
        client = served_client(MemoryReads(STATE))
        await client.start_server()
        try:
            path = picture_path(farthest_travelled().belief_id)
            asked = [asyncio.ensure_future(client.get(path))]
            while not drawing.exists():  # drawing the first
                await asyncio.sleep(0.01)
            asked += [asyncio.ensure_future(client.get(path)) for _ in range(6)]
            while sum(answer.done() for answer in asked) < 2:  # those told to come back
                await asyncio.sleep(0.01)
            opened.touch()
            answers = [
                (answer.status, await answer.read()) for answer in await asyncio.gather(*asked)
            ]
            again = await client.get(path)
            return answers, again.status
        finally:
            await client.close()

    answers, again = asyncio.run(run())
    assert [status for status, _ in answers].count(200) == 1 + MOST_PICTURES_WAITING
    refused = [orjson.loads(body) for status, body in answers if status == 503]
    busy = "4 pictures wait to be drawn on this worker already; ask again once they are"
    assert refused == [{"detail": busy}] * 2
    assert again == 200
    assert len(drawn_maps) == 1 + MOST_PICTURES_WAITING + 1
