"""`rumourmill rebuild`'s first check of the live worker, against a real HTTP server on
127.0.0.1 answering as what may stand in front of the workers does (`ProxyErrors`): what it
says, and when it names `--workers-stopped`."""

from __future__ import annotations

import pytest

from streams.rebuild import RebuildFailed, check_live
from streams.settings import Settings
from tests.streams.test_read_commands import ProxyErrors, serving


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_gateway_with_no_worker_behind_it_names_the_flag_for_stopped_workers(
    status: int,
) -> None:
    with serving(ProxyErrors) as proxy, pytest.raises(RebuildFailed) as refused:
        check_live(Settings(web_url=f"{proxy}/{status}"))
    assert str(refused.value).startswith(f"the live worker at {proxy}/{status}: {status}: ")
    assert str(refused.value).endswith("(with the workers stopped: --workers-stopped)")


def test_another_server_answering_is_no_sign_of_stopped_workers() -> None:
    with serving(ProxyErrors) as proxy, pytest.raises(RebuildFailed) as refused:
        check_live(Settings(web_url=f"{proxy}/404"))
    assert "--workers-stopped" not in str(refused.value)
