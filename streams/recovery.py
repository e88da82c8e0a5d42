"""Faust's table recovery, made to start again where Faust's would stop for good.

Faust runs each step of a recovery (flushing the producer, reading highwaters and offsets,
seeking, placing the stream partitions) under `broker_request_timeout`; a step that times out
ends its recovery loop as if the worker were stopping (mode's `wait_first` reports a timeout as
"stopped"), or a seek that times out crashes it. Either way the worker keeps running with its
partitions paused: it serves nothing until it is restarted. `PersistentRecovery` logs the step
that timed out and starts the recovery over, as another rebalance would.
"""

from __future__ import annotations

from typing import Any

from faust.tables.manager import TableManager
from faust.tables.recovery import RebalanceAgain, Recovery, ServiceStopped
from mode.services import WaitArgT

from streams.logs import logger

log = logger("recovery")


class PersistentRecovery(Recovery):
    """Faust's recovery, started over when one of its steps times out."""

    async def _wait(self, coro: WaitArgT, timeout: Any = None) -> None:
        try:
            await super()._wait(coro, timeout=timeout)
        except (ServiceStopped, TimeoutError) as error:
            if self.should_stop:
                raise
            log.error(
                "a recovery step gave no answer within %s s (%r): recovery starts over",
                timeout,
                error,
            )
            self.signal_recovery_start.set()
            raise RebalanceAgain() from error


class StateTableManager(TableManager):
    """Faust's table manager with `PersistentRecovery`."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = PersistentRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
