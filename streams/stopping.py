"""The worker process, whose stop ends within `STOP_DEADLINE_SECONDS` whatever Kafka does.

Faust's clean stop waits for Kafka without a bound: it commits, flushing the producer first,
which waits until Kafka has confirmed every record sent (aiokafka sends again to a broker that
is gone until Faust's producer request timeout, 20 minutes, runs out), then the offset commit
waits for a group coordinator that never answers; with nothing left to send, the consumer's
thread still takes a minute to give up. A worker stopped (Ctrl-C, SIGTERM) while its broker was
gone with events in flight still ran 30 minutes later, and a second Ctrl-C did nothing. A stop
with Kafka answering takes about 2 s.

Past the deadline the worker says so and exits at once, with code 1: as after a SIGKILL,
nothing is lost or applied twice. An event's offset is committed only once Kafka has what it
produced (`streams.app.ack_when_delivered`), so the events not committed come again at the next
start and the projector recognises those it already took in; a partition the worker wrote to
keeps its dirty marker, so the next start restores its last checkpoint (`streams.durability`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from faust.worker import Worker

from streams.logs import logger

log = logger("worker")

STOP_DEADLINE_SECONDS = 15.0
"""How long a stop may take before the worker exits without the rest of it."""
GAVE_UP_EXIT_CODE = 1
"""The exit code of a worker that gave up on its clean stop (0 after a clean one)."""


class BoundedStopWorker(Worker):
    """Faust's worker, which exits `STOP_DEADLINE_SECONDS` after its stop began if that is
    still running; told to stop by a signal, it first goes on serving `drain_seconds`, having
    called `draining` (`/ready` says it is stopping).

    The deadline is kept by a thread, not the event loop: it fires even while the loop is
    blocked, or past the loop's end when the process has not exited yet."""

    def __init__(
        self,
        *services: Any,
        drain_seconds: float = 0.0,
        draining: Callable[[], None] = lambda: None,
        stopping: Callable[[], None] = lambda: None,
        **options: Any,
    ) -> None:
        super().__init__(*services, **options)
        self.drain_seconds = drain_seconds
        self.draining = draining
        self.stopping = stopping
        """Told first as the stop begins (the model's answers are waited for a while only)."""
        self.drain: asyncio.Future[None] | None = None
        """The drain under way, which a second signal cuts short."""

    def _schedule_shutdown(self, signal: signal.Signals) -> None:
        """mode's, but a second signal during the drain stops now (mode ignores every signal
        after the first: a drain of a minute could only be cut short by a SIGKILL)."""
        if self.drain is not None and not self.drain.done():
            log.info("stopping now: told again")
            self.drain.cancel()
            return
        super()._schedule_shutdown(signal)

    async def _stop_on_signal(self, signal: signal.Signals) -> None:
        """mode's stop on SIGTERM or SIGINT, after the drain."""
        self.draining()
        if self.drain_seconds:
            log.info(
                "stopping in %g s (RUMOURMILL_STOP_DRAIN_SECONDS): serving meanwhile, /ready"
                " answering 503; a second Ctrl-C or SIGTERM stops now",
                self.drain_seconds,
            )
            self.drain = asyncio.ensure_future(asyncio.sleep(self.drain_seconds))
            with contextlib.suppress(asyncio.CancelledError):
                await self.drain
        await super()._stop_on_signal(signal)

    @property
    def shortlabel(self) -> str:
        """What the worker's own log lines name it (`[^Worker]: Ready`): Faust's worker's name,
        which operators (and a test) look for, not this class's."""
        return "Worker"

    async def on_stop(self) -> None:
        """Runs first when the worker stops, whatever stops it."""
        self.stopping()
        await super().on_stop()
        log.info(
            "stopping: at most %.0f s, after which the worker exits without waiting for Kafka"
            " any longer",
            STOP_DEADLINE_SECONDS,
        )
        deadline = threading.Timer(STOP_DEADLINE_SECONDS, self.give_up)
        deadline.daemon = True  # a stop that ends in time leaves it behind
        deadline.start()

    def give_up(self) -> None:
        """Exit now, as a SIGKILL would, saying why and what the next start does. A worker
        stopping on a crash (said already) waits for the events it had in hand, which the
        crash left unacked: the deadline then is no sign of Kafka gone."""
        if self.app.crash_reason is not None:
            why = f"after it crashed ({self.app.crash_reason})"
        else:
            brokers = ", ".join(f"{url.host}:{url.port}" for url in self.app.conf.broker)
            why = f"(is Kafka at {brokers} reachable?)"
        log.critical(
            "the worker did not stop within %.0f s %s: exiting without the rest of the clean"
            " stop; the events not committed come again at the next start, and each partition"
            " it wrote to is restored from its last checkpoint",
            STOP_DEADLINE_SECONDS,
            why,
        )
        os._exit(GAVE_UP_EXIT_CODE)
