"""`rumourmill replay FILE.ndjson`: a story folded in-process, its outcomes and world digests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
from click.testing import CliRunner

from streams.cli import main
from tests.tavern import TAVERN_FILE as TAVERN
from tests.tavern import TAVERN_LINES as LINES


def replay(path: Path) -> tuple[dict[str, int], dict[str, str]]:
    """The outcome counts and the digests by tenant/world the command prints."""
    result = CliRunner().invoke(main, ["replay", str(path)])
    assert result.exit_code == 0, result.output
    counts: dict[str, int] = {}
    digests: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, value = line.split(": ")
        if name.startswith("digest "):
            digests[name.removeprefix("digest ")] = value
        else:
            counts[name] = int(value)
    return counts, digests


def story(tmp_path: Path, lines: list[bytes], name: str = "story.ndjson") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_the_tavern_example_is_processed_whole_with_one_digest_for_its_world() -> None:
    counts, digests = replay(TAVERN)
    assert counts == {"processed": 6}
    assert list(digests) == ["default/save-1"]
    assert len(digests["default/save-1"]) == 64
    assert int(digests["default/save-1"], 16) > 0


def test_the_same_story_prints_the_same_digest_in_every_process(tmp_path: Path) -> None:
    """No dict order or hash seed leaks into the digest: two interpreters, two hash seeds."""
    printed = [
        subprocess.run(
            [sys.executable, "-m", "streams", "replay", str(TAVERN)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    ]
    assert printed[0] == printed[1]
    assert f"digest default/save-1: {replay(TAVERN)[1]['default/save-1']}" in printed[0]


def test_blank_lines_duplicates_and_reordering_change_the_counts_not_the_digest(
    tmp_path: Path,
) -> None:
    _, clean = replay(TAVERN)
    main, reload = LINES[:5], LINES[5:]
    noisy = [b"", main[1], main[0], b"   ", main[3], main[2], main[0], main[4], *reload, b""]
    counts, digests = replay(story(tmp_path, noisy))
    assert counts == {"processed": 6, "deferred": 2, "duplicate": 1}
    assert digests == clean


def test_a_bad_line_is_rejected_and_the_rest_of_the_story_is_processed(tmp_path: Path) -> None:
    _, clean = replay(TAVERN)
    not_json = b'{"world_instance_id": "save-1", "seq": '
    no_key = orjson.dumps({"world_instance_id": "save-1", "timeline_id": "main", "seq": 9})
    no_timeline = orjson.dumps({"world_instance_id": "save-1", "timeline_id": "..", "seq": 1})
    path = story(tmp_path, [b"", *LINES[:2], not_json, *LINES[2:], no_key, no_timeline])
    counts, digests = replay(path)
    assert counts == {"processed": 6, "rejected": 3}
    assert digests == clean
    refused = CliRunner().invoke(main, ["replay", str(path)]).stderr.splitlines()
    assert refused == [  # each numbered as read; a position where the line names one
        f"{path}:4: rejected: not valid JSON: EOF while parsing a value at line 1 column 39",
        f"{path}:9: rejected (main#9): invalid event: key: Field required",
        f"{path}:10: rejected: invalid event: timeline_id: '.' and '..' are no ids: a URL cannot"
        " name them; key: Field required",
    ]


def test_a_story_of_two_worlds_prints_a_digest_for_each(tmp_path: Path) -> None:
    elsewhere = [line.replace(b'"save-1"', b'"save-2"') for line in LINES]
    counts, digests = replay(story(tmp_path, [*LINES, *elsewhere]))
    assert counts == {"processed": 12}
    assert sorted(digests) == ["default/save-1", "default/save-2"]
    assert digests["default/save-1"] == replay(TAVERN)[1]["default/save-1"]
    assert digests["default/save-2"] != digests["default/save-1"]  # the world id is in every key


def test_a_tenants_deletion_prints_a_digest_for_no_world_but_a_world_called_star_has_one(
    tmp_path: Path,
) -> None:
    """A tenant's deletion is acked naming the world `*`: no world of that name was folded, and
    the replay printed a digest for it (rebuild does not); a world called `*` has its own."""
    deleted = orjson.dumps(
        {"world_instance_id": "*", "timeline_id": "*", "seq": 1, "key": "tenant.deleted"}
    )
    counts, digests = replay(story(tmp_path, [*LINES, deleted]))
    assert counts == {"processed": 7}
    assert sorted(digests) == ["default/save-1"]
    starred = [line.replace(b'"save-1"', b'"*"') for line in LINES]
    assert sorted(replay(story(tmp_path, starred, "starred.ndjson"))[1]) == ["default/*"]


def test_a_missing_file_is_refused_by_name(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["replay", str(tmp_path / "nowhere.ndjson")])
    assert result.exit_code == 2
    assert "nowhere.ndjson" in result.output and "does not exist" in result.output


def test_the_largest_message_the_worker_takes_is_the_replays_too(tmp_path: Path) -> None:
    """RUMOURMILL_MAX_EVENT_BYTES rejects in a replay what it dead-letters in the worker, so the
    replay's digest is the live one's."""
    result = CliRunner().invoke(
        main, ["replay", str(TAVERN)], env={"RUMOURMILL_MAX_EVENT_BYTES": "250"}
    )
    assert result.exit_code == 0, result.output
    over = sum(1 for line in LINES if len(line) > 250)
    assert 0 < over < len(LINES)
    assert f"rejected: {over}" in result.output.splitlines()


def test_a_replay_refuses_the_records_too_large_for_the_workers_changelog(tmp_path: Path) -> None:
    """RUMOURMILL_CHANGELOG_BATCH_BYTES bounds the state records an event may write in a replay
    as in the worker (`projections.record_bounds`): the declaration the twelfth note would grow
    past the least setting's record is refused in both, so the replay's digest is the live
    one's."""
    noted = [
        orjson.dumps(
            {
                "world_instance_id": "save-1",
                "timeline_id": "main",
                "seq": seq,
                "key": "trade.done",
                "entities": {"npc-mara": {f"note_{seq}": "x" * 7_000}},
            }
        )
        for seq in range(1, 13)
    ]
    settings = {"RUMOURMILL_CHANGELOG_BATCH_BYTES": "16384", "RUMOURMILL_MAX_EVENT_BYTES": "8192"}
    result = CliRunner().invoke(main, ["replay", str(story(tmp_path, noted))], env=settings)
    assert result.exit_code == 0, result.output
    assert {"processed: 11", "rejected: 1"} <= set(result.output.splitlines())


def test_a_line_publish_takes_whole_is_replayed_whole(tmp_path: Path) -> None:
    """Found by a reviewer: a bare carriage return is JSON's whitespace, within one line;
    `publish` sent such a line whole and the replay split it in two, refusing both. Lines
    ended by CRLF are read as publish reads them too."""
    _, clean = replay(TAVERN)
    spaced = LINES[0].replace(b'"seq":1,', b'"seq":1,\r')
    assert spaced != LINES[0]
    path = tmp_path / "story.ndjson"
    path.write_bytes(b"\r\n".join([spaced, *LINES[1:]]) + b"\r\n")
    assert replay(path) == ({"processed": 6}, clean)


def test_worlds_whose_ids_hold_a_slash_are_printed_apart(tmp_path: Path) -> None:
    """Tenant `a/b`'s world `c` and tenant `a`'s world `b/c` were both printed `a/b/c`, each
    with its own digest."""
    first, second = LINES[0], LINES[0].replace(b'"save-1"', b'"b/c"')
    lines = [
        first.replace(b'"save-1"', b'"c"').replace(b"{", b'{"tenant_id":"a/b",', 1),
        second.replace(b"{", b'{"tenant_id":"a",', 1),
    ]
    counts, digests = replay(story(tmp_path, lines))
    assert counts == {"processed": 2}
    assert sorted(digests) == ['"a"/"b/c"', '"a/b"/"c"']


def test_a_world_whose_id_holds_a_backslash_or_a_line_break_is_printed_quoted_on_one_line(
    tmp_path: Path,
) -> None:
    """An id holding a line break split its digest line in two; one holding `\\x00` read as
    one holding the character NUL (shown escaped)."""
    lines = [LINES[0].replace(b'"save-1"', orjson.dumps(world)) for world in ("x\ny", "a\\x00b")]
    counts, digests = replay(story(tmp_path, lines))
    assert counts == {"processed": 2}
    assert sorted(digests) == ['"default"/"a\\\\x00b"', '"default"/"x\\ny"']
