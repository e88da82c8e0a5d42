"""A rumour's map drawn as SVG by Graphviz (`dot`): who told whom, in story time.

The map is `projections.rumour_map`'s; this module only lays it out. Everyone it reached is a
node (name, id, fewest hops, best confidence; a double border for a witness, dashed for a
teller who holds none), each telling an arrow numbered in story order and labelled with its
story time, hop and confidence. Graphviz lays it out left to right, so news flows forward.

`dot` runs as a process of its own, awaited, not in a thread, and is stopped past
`DRAWING_SECONDS` (or when the drawing is cancelled): a map thousands of characters reached
takes it seconds of a core (3,000 holders: 7 s), which the worker's events need.
"""

from __future__ import annotations

import asyncio
import re
from asyncio.subprocess import PIPE

import graphviz

from projections.rumour_map import Holder, RumourMap, Telling

FONT = "DejaVu Sans"
"""A font Debian installs with Graphviz (fonts-dejavu-core)."""


class DrawingUnavailable(Exception):
    """Graphviz's `dot` is not installed where the picture is drawn, failed to draw it, or
    took too long."""


DRAWING_SECONDS = 10.0
"""The longest `dot` may take to draw one picture before it is stopped (and the picture
refused): its time grows faster than the map (1,000 holders: 0.5 s, 3,000: 7 s)."""


NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
"""Characters XML 1.0 forbids: Graphviz would write them into the SVG as they are."""


async def rumour_svg(rumour: RumourMap) -> bytes:
    """The SVG picture of a rumour's map; DrawingUnavailable without Graphviz, when it fails,
    or past `DRAWING_SECONDS`."""
    return await _drawn(
        rumour_source(rumour).encode(),
        f"{len(rumour.holders)} holders, {len(rumour.tellings)} tellings",
    )


async def _drawn(source: bytes, size: str) -> bytes:
    """`source` (DOT) drawn as SVG by `dot`, which is stopped, if it still runs, when the
    drawing ends: past `DRAWING_SECONDS`, or the request cancelled."""
    try:
        dot = await asyncio.create_subprocess_exec(
            "dot", "-Tsvg", stdin=PIPE, stdout=PIPE, stderr=PIPE
        )
    except FileNotFoundError:
        raise DrawingUnavailable(
            "Graphviz's `dot` is not installed here (Debian: apt-get install graphviz)"
        ) from None
    try:
        async with asyncio.timeout(DRAWING_SECONDS):
            svg, complaint = await dot.communicate(source)
    except TimeoutError:
        raise DrawingUnavailable(
            f"Graphviz's `dot` was stopped after {DRAWING_SECONDS:g} s drawing the picture "
            f"({size}): ask for it on a timeline, or as of a position, where it reached fewer"
        ) from None
    finally:
        if dot.returncode is None:
            dot.kill()
            await dot.wait()
    if dot.returncode != 0:
        reason = " ".join(complaint.decode(errors="replace").split()) or f"exit {dot.returncode}"
        raise DrawingUnavailable(f"Graphviz's `dot` failed to draw the picture: {reason}")
    return svg


def rumour_source(rumour: RumourMap) -> str:
    """The picture of a rumour's map as Graphviz's DOT source.

    Nodes are named by index (n0, n1, ...): an id is any text, which DOT would read as a port
    (`npc:ada`), an HTML-like id (`<...>`) or a broken string (a final backslash). Ids and
    names are drawn only in labels."""
    graph = graphviz.Digraph(
        "rumour",
        graph_attr={
            "rankdir": "LR",
            "label": _lines(
                f"“{rumour.content}”",
                f"{rumour.world_id} · timeline {rumour.timeline_id} · belief {rumour.belief_id}",
            ),
            "labelloc": "t",
            "fontname": FONT,
            "bgcolor": "white",
        },
        node_attr={"fontname": FONT, "shape": "box", "style": "rounded,filled"},
        edge_attr={"fontname": FONT, "fontsize": "10"},
    )
    nodes = {holder.entity_id: f"n{index}" for index, holder in enumerate(rumour.holders)}
    for holder in rumour.holders:
        graph.node(nodes[holder.entity_id], **_node(holder))
    for number, telling in enumerate(rumour.tellings, start=1):
        graph.edge(
            nodes[telling.teller], nodes[telling.listener], label=_edge_label(number, telling)
        )
    source: str = graph.source
    return source


def _node(holder: Holder) -> dict[str, str]:
    if holder.hops is None or holder.confidence is None:
        holds = "forgot it" if holder.forgot else "told it, holds none"
        return {"label": _lines(holder.name, holder.entity_id, holds), "style": "rounded,dashed"}
    return {
        "label": _lines(
            holder.name,
            holder.entity_id,
            f"{'saw it' if holder.witnessed else f'hops {holder.hops}'} · "
            f"{holder.confidence:.0%} sure",
        ),
        "peripheries": "2" if holder.witnessed else "1",
        "fillcolor": _shade(holder.confidence),
    }


def _edge_label(number: int, telling: Telling) -> str:
    when = telling.game_time or f"seq {telling.seq}"
    return _lines(f"{number}. {when}", f"hop {telling.hops} · {telling.confidence:.0%}")


def _shade(confidence: float) -> str:
    """Surer holders in a deeper blue (HSV: same hue, saturation with confidence)."""
    return f"0.58 {0.1 + 0.5 * confidence:.3f} 1.0"


def _lines(*lines: str) -> str:
    """A multi-line Graphviz label, each line taken literally: backslashes and `<...>` escaped
    (`graphviz.escape`), `&` too (Graphviz decodes entities in labels), and characters XML
    forbids dropped (they would make the SVG no XML)."""
    return "\\n".join(
        graphviz.escape(NOT_XML.sub("", line).replace("&", "&amp;")) for line in lines
    )
