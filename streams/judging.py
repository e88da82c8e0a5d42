"""Model judgements in the worker: the model asked what an event raises, within the world's
deadline, and every answer kept on the judgements topic before the event is applied.

For each message of a world in model mode (of any world, when a model is configured: the
referee asks it in either mode): the projector names the questions (`Projector.questions`, a
pass over scratch state); answers already on the topic for those positions are read back, so a
message redelivered after a crash, or a rebuild into a fresh app id, asks nothing twice; the
rest are asked at once, and what has no answer by the world's `memory.model.deadline_ms` is
made by the rules (a partition never waits longer). The records go to the compacted topic
`PREFIX.judgements`, keyed by the event's position (and part: `judgement_parts`) on the
partition of its world, and Kafka stores them before the event is applied with them.
Applying records them in the state too (`projections.judgements`), where a redelivery finds the
message's outbox and asks nothing. Deleting a world tombstones its records
(`JudgementLog.forget`), so a worker reading the topic back, or a rebuild, takes a deleted
world's answers for none of its positions.

A model that ran out of time on every question of a message is left to rest
(`streams.json_service.REST_SECONDS`): until then the rules answer at once, so a hanging model
slows a partition once, not at every event. Cut by a world's deadline, it rests for the worlds
whose deadline is no longer, and for the reply checks as impatient (`ModelClient.out_of_time`);
by the client's own timeout, for all.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaTimeoutError
from aiokafka.structs import ConsumerRecord
from pydantic import ValidationError

from projections.chronicle_summaries import LEADING
from projections.delivery import SourceMessage
from projections.judgements import (
    NO_MODEL,
    Position,
    Question,
    RecordedAnswers,
    answered,
    judgement_key,
    judgement_parts,
    position_of,
    position_of_key,
    record_key,
)
from projections.projector import Projector
from projections.state import StateTransaction
from schemas.judgements import Answer, EventJudgements, JudgementKind, RecordedJudgement
from streams.json_service import REST_SECONDS, TIMED_OUT
from streams.kafka_clients import kafka_options
from streams.logs import logger
from streams.model_client import ModelClient
from streams.settings import Settings

log = logger("judging")

ROUNDS = 8
"""How many times a message's questions are put: answers may raise more (`RAISING`): the
model's feelings and retellings, then the chapters their words close, then the condensed
chapter; a verdict, then the challenge of a later line of the message speaking of the same
(a round a line: eight lines of a message filling a gap, each speaking of what the one before
it spoke of, are judged as in order). All share the world's deadline."""
LEFT_BY_ROUNDS = (
    f"rounds: not asked (the message's questions took all {ROUNDS} rounds, the answers of each"
    " raising more)"
)
"""The reason a question a message's last round raised is recorded with, unasked."""
DEADLINE = "deadline"
"""How the reason of a question the deadline cut begins."""
STOPPED = "stop"
"""How the reason of a question the worker's stop cut begins."""
STOP_WAIT_SECONDS = 5.0
"""How long a stopping worker still waits for the model's answers to the events it is taking
in: the rest of a world's deadline (up to 10 minutes) held the stop past its own bound
(`streams.stopping.STOP_DEADLINE_SECONDS`), and the worker gave up on it, blaming Kafka."""

FORGOTTEN_AT_ONCE = 1000
"""Tombstones in flight at once: a tenant's deletion may remove hundreds of thousands."""
Send = Callable[[int, bytes, bytes | None], Awaitable[None]]
"""Store (partition, key, value) on the judgements topic, a value None as a tombstone; returns
once Kafka has it."""
Wanted = Callable[[Position], bool]
"""Whether the records of a position are to be kept, read back."""
Read = Callable[[int, Wanted], Awaitable[list[EventJudgements]]]
"""The records of one partition of the judgements topic as compaction leaves them (the latest
of each key, none of a key whose latest is a tombstone), of the positions wanted."""
Parts = list[EventJudgements]
"""A position's records, part by part (`projections.judgements.judgement_parts`)."""


def by_position(records: Iterable[EventJudgements]) -> dict[Position, Parts]:
    """Records as the parts of each position, in order; of a part given twice, the later."""
    latest = {(position_of(record), record.part): record for record in records}
    parts: dict[Position, Parts] = {}
    for (position, _), record in sorted(latest.items(), key=lambda item: item[0][1]):
        parts.setdefault(position, []).append(record)
    return parts


@dataclass
class JudgementLog:
    """The judgements topic as this worker needs it: what was recorded for the positions of the
    partitions it owns and has not applied yet (read from the topic once per assignment)."""

    read: Read
    send: Send
    recorded: dict[int, dict[Position, Parts]] = field(default_factory=dict)

    async def read_back(
        self, partition: int, positions: Collection[Position], applied: Callable[[Position], bool]
    ) -> dict[Position, Parts]:
        """The records of `positions` on the topic. The partition is read to its end the first
        time; records of positions already `applied` are not kept, nor decoded (the topic holds
        every judged event of every world of the partition: 50,000 records held decoded
        while read took 432 MiB)."""
        if partition not in self.recorded:
            records = await self.read(partition, lambda position: not applied(position))
            self.recorded[partition] = by_position(records)
            log.info(
                "judgements topic, partition %d: read back, %d record(s) of %d position(s) not"
                " applied yet",
                partition,
                len(records),
                len(self.recorded[partition]),
            )
        held = self.recorded[partition]
        return {position: held[position] for position in positions if position in held}

    async def keep(self, partition: int, held: Parts, parts: Parts) -> Parts:
        """Store a position's `parts` on the topic (and for the read-back) before they are used,
        one after the other (a crash leaves the first few, which the next run reads back and
        stores on): those not `held` there already."""
        for part in parts:
            if part.part >= len(held) or held[part.part] != part:
                await self.send(partition, record_key(part), part.to_bytes())
        self.recorded.setdefault(partition, {})[position_of(parts[0])] = parts
        return parts

    async def forget(self, partition: int, keys: Sequence[bytes]) -> None:
        """Tombstone `keys` on the topic (the judgements of a deleted world,
        `Intake.forgotten_judgements`), `FORGOTTEN_AT_ONCE` at a time; returns once Kafka has
        them all. The read-back forgets them too: a world begun anew at the same positions is
        never answered with the deleted world's records."""
        if not keys:
            return
        held = self.recorded.get(partition, {})
        for start in range(0, len(keys), FORGOTTEN_AT_ONCE):
            chunk = keys[start : start + FORGOTTEN_AT_ONCE]
            await asyncio.gather(*(self.send(partition, key, None) for key in chunk))
        positions = [position_of_key(key) for key in keys]
        for position in positions:
            held.pop(position, None)
        for (tenant, world), count in Counter(position[:2] for position in positions).items():
            log.info(
                "judgements topic, partition %d: %d record(s) of world %r of tenant %r"
                " tombstoned (deleted)",
                partition,
                count,
                world,
                tenant,
            )

    def applied(self, partition: int, positions: Iterable[Position]) -> None:
        """The state holds these positions' records now: the read-back need not."""
        held = self.recorded.get(partition, {})
        for position in positions:
            held.pop(position, None)

    def keep_partitions(self, partitions: Collection[int]) -> None:
        """After a rebalance: what another worker may have written since is read again."""
        for partition in list(self.recorded):
            if partition not in partitions:
                del self.recorded[partition]


def topic_reader(settings: Settings, topic: str, stall_seconds: float | None = None) -> Read:
    """Reads a partition of the judgements topic on Kafka from its start to its end
    (`read_to_end`): with `stall_seconds` (a rebuild), a broker gone stops the read; without
    (a worker, whose events wait on the same broker), the read waits for it to come back."""

    async def read(partition: int, wanted: Wanted) -> list[EventJudgements]:
        consumer = AIOKafkaConsumer(
            **kafka_options(settings),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            return await read_to_end(consumer, tp, end, stall_seconds, wanted)
        finally:
            await consumer.stop()

    return read


async def read_to_end(
    consumer: AIOKafkaConsumer,
    tp: TopicPartition,
    end: int,
    stall_seconds: float | None,
    wanted: Wanted = lambda position: True,
) -> list[EventJudgements]:
    """The records of `tp` from the consumer's position up to `end`, as compaction leaves them
    (`compact`), of the positions `wanted`. Raises `KafkaTimeoutError` once `stall_seconds`
    (if given) pass without the position moving before the end: a consumer of a broker gone
    fetches nothing, and raises nothing."""
    latest: dict[bytes | None, EventJudgements] = {}
    last_moved, last_position = time.monotonic(), -1
    while True:
        try:
            position = await asyncio.wait_for(consumer.position(tp), stall_seconds)
        except TimeoutError:
            raise _stalled(tp, stall_seconds) from None
        if position >= end:
            return list(latest.values())
        if position > last_position:  # records read, or offsets that hold none (compacted)
            last_moved, last_position = time.monotonic(), position
        elif stall_seconds is not None and time.monotonic() - last_moved > stall_seconds:
            raise _stalled(tp, stall_seconds, f", {end - position} offset(s) short of its end")
        for message in (await consumer.getmany(tp, timeout_ms=1000)).get(tp, []):
            compact(latest, message, wanted)


def _stalled(tp: TopicPartition, stall_seconds: float | None, short: str = "") -> KafkaTimeoutError:
    return KafkaTimeoutError(
        f"judgements topic {tp.topic} partition {tp.partition}: nothing read for"
        f" {stall_seconds or 0:.0f} s{short}"
    )


def compact(
    latest: dict[bytes | None, EventJudgements],
    message: ConsumerRecord[bytes, bytes],
    wanted: Wanted = lambda position: True,
) -> None:
    """Take the next record of the topic into `latest` (each key's), as compaction would: a
    tombstone (value None: a deleted world's position) takes its key's record away, silently.
    The topic shows both until compaction removes them. A record of a position not `wanted`
    is left, undecoded (its key names its position)."""
    if message.value is None:
        latest.pop(message.key, None)
        return
    position = _position_of(message.key)
    if position is not None and not wanted(position):
        return
    try:
        latest[message.key] = EventJudgements.model_validate_json(message.value)
    except ValidationError as error:
        log.error("judgements topic %d@%d: %s", message.partition, message.offset, error)


def _position_of(key: bytes | None) -> Position | None:
    """The position a record's key names; None for a key that names none (its record is read,
    and its fault logged, as ever)."""
    try:
        return None if key is None else position_of_key(key)
    except ValueError:
        return None


@dataclass
class MemoryTopic:
    """The judgements topic kept in process (replays and benchmarks without Kafka)."""

    partitions: dict[int, list[EventJudgements]] = field(default_factory=dict)

    async def read(self, partition: int, wanted: Wanted) -> list[EventJudgements]:
        return [
            record for record in self.partitions.get(partition, []) if wanted(position_of(record))
        ]

    async def send(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Keep a record; a tombstone takes its key's records away, as compaction would."""
        if value is None:
            self.partitions[partition] = [
                record for record in self.partitions.get(partition, []) if record_key(record) != key
            ]
        else:
            self.partitions.setdefault(partition, []).append(
                EventJudgements.model_validate_json(value)
            )


@dataclass
class Judge:
    """Answers an event's questions: from the topic, else from the model, else the rules."""

    client: ModelClient | None
    log: JudgementLog
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set as the worker begins to stop (`stop`)."""
    stop_by: float = 0.0
    """When (the loop's time) questions still unanswered are cut, as the deadline cuts them,
    and the rules judge: `STOP_WAIT_SECONDS` after the stop began."""

    def stop(self) -> None:
        """The worker begins to stop: wait `STOP_WAIT_SECONDS` more for the model at most."""
        if not self.stopping.is_set():
            self.stop_by = asyncio.get_running_loop().time() + STOP_WAIT_SECONDS
            self.stopping.set()

    async def message(
        self, projector: Projector, tx: StateTransaction, message: SourceMessage
    ) -> RecordedAnswers | None:
        """The answers to the judgements taking `message` into `tx` raises (stored on the
        topic); None when it raises none (rules mode, a redelivery, a duplicate...)."""
        configured = self.client is not None
        found = projector.questions(tx, message, configured)
        questions = found.asked
        if not questions:
            return None
        tenant, world_id = questions[0].position[:2]
        full_ms = deadline_ms = projector.policies(tenant, world_id).memory.model.deadline_ms

        def applied(position: Position) -> bool:
            return tx.get(judgement_key(position)) is not None

        def recorded() -> RecordedAnswers:
            """Every round's records, as the answers they hold."""
            return RecordedAnswers(
                (part for parts in records.values() for part in parts),
                model_configured=configured,
            )

        # the topic is read back first (after an assignment, the whole partition): the rounds
        # share the deadline, and that read is none of the model's time
        await self.log.read_back(message.partition, positions_of(questions), applied)
        ends = time.monotonic() + deadline_ms / 1000
        # every round's records, by position: a round may ask of fewer positions than the one
        # before (a message filling a gap applies the events it released too)
        records: dict[Position, Parts] = {}
        for _ in range(ROUNDS):
            records |= await self.answers(
                message.partition, questions, deadline_ms, applied, full=deadline_ms == full_ms
            )
            answers = recorded()
            if not raises_more(questions, answers, found.waited):
                break
            found = projector.questions(tx, message, configured, answers)
            questions = found.asked
            if not questions:
                break
            deadline_ms = int((ends - time.monotonic()) * 1000)  # under 1: recorded as cut
        else:  # the questions the rounds left, and those their rules answers raise in turn:
            # recorded unasked, so that no later run of the message asks them either
            while questions:
                records |= await self.answers(
                    message.partition, questions, 0, applied, unasked=LEFT_BY_ROUNDS
                )
                answers = recorded()
                questions = projector.questions(tx, message, configured, answers).asked
        return answers

    async def answers(
        self,
        partition: int,
        questions: list[Question],
        deadline_ms: int,
        applied: Callable[[Position], bool],
        full: bool = True,
        unasked: str | None = None,
    ) -> dict[Position, Parts]:
        """The records of the positions of `questions` (all of one message), each holding its
        answers: read back from the topic, or asked and stored there (`full`: within the
        world's whole deadline; with a reason `unasked`, not asked: stored with it)."""
        records = await self.log.read_back(partition, positions_of(questions), applied)
        known = {
            (position, (made.npc_id, made.belief_id, made.judgement))
            for position, parts in records.items()
            for part in parts
            for made in part.judgements
        }
        to_ask = [
            question for question in questions if (question.position, question.key) not in known
        ]
        if to_ask:
            fresh: dict[Position, list[RecordedJudgement]] = {}
            made_all = (
                [answered(question, unasked) for question in to_ask]
                if unasked is not None
                else await self._ask(to_ask, deadline_ms, full)
            )
            for question, made in zip(to_ask, made_all, strict=True):
                fresh.setdefault(question.position, []).append(made)
            for position, asked in fresh.items():
                held = records.get(position, [])
                recorded = [judgement for part in held for judgement in part.judgements]
                parts = judgement_parts(position, [*recorded, *asked], at_least=len(held))
                records[position] = await self.log.keep(partition, held, parts)
        return records

    async def _ask(
        self, questions: list[Question], deadline_ms: int, full: bool
    ) -> list[RecordedJudgement]:
        """Every question asked at once; what has no answer by the deadline gets a reason. Only
        a cut by a world's `full` deadline rests the model for worlds as impatient: a later
        round's remainder of it says nothing of how fast the model answers."""
        if self.client is None:
            return [answered(question, NO_MODEL) for question in questions]
        if deadline_ms < 1:  # earlier rounds took the time: recorded, so a rebuild agrees
            spent = f"{DEADLINE}: earlier rounds of the event's questions took all its time"
            return [answered(question, spent) for question in questions]
        client = self.client
        if (resting := client.rests_for(deadline_ms, calls=len(questions))) is not None:
            return [answered(question, resting) for question in questions]
        calls = [
            asyncio.ensure_future(
                client.ask(question.instructions, question.prompt, question.answer_type)
            )
            for question in questions
        ]
        answers = asyncio.ensure_future(asyncio.wait(calls, timeout=deadline_ms / 1000))
        stop = asyncio.ensure_future(self._stop_waited())
        try:
            await asyncio.wait([answers, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:  # past the deadline or the stop, or this wait cancelled (a rebalance)
            stopped = stop.done() and not stop.cancelled()
            for task in (answers, stop, *calls):
                task.cancel()  # no call outlives its question, holding a connection
        late = (
            f"{STOPPED}: the worker stopped, no answer within {STOP_WAIT_SECONDS:g} s of it"
            if stopped
            else f"{DEADLINE}: no answer within {deadline_ms} ms"
        )
        outcomes = [
            call.result() if call.done() and not call.cancelled() else late for call in calls
        ]
        if all(_slow(outcome) for outcome in outcomes):
            if late in outcomes:  # cut by this world's deadline: rests for worlds as impatient
                if full:
                    client.out_of_time(deadline_ms, late)
            else:  # by the client's own timeout, which bounds every call: rests for all
                client.rest(REST_SECONDS, "ran out of time lately", str(outcomes[0]))
        return [
            answered(question, outcome)
            for question, outcome in zip(questions, outcomes, strict=True)
        ]

    async def _stop_waited(self) -> None:
        """Returns `STOP_WAIT_SECONDS` after the worker began to stop."""
        await self.stopping.wait()
        await asyncio.sleep(max(0.0, self.stop_by - asyncio.get_running_loop().time()))


RAISING: frozenset[JudgementKind] = LEADING | {"verdict"}
"""The judgements whose answers, the model's, may raise questions the pass that found them did
not: those others are made of (`LEADING`), and the referee's verdicts (a belief weakened or
held, which a later line of a message filling a gap challenges or not)."""


def raises_more(questions: Iterable[Question], answers: RecordedAnswers, waited: bool) -> bool:
    """Whether another scratch pass, with `answers`, may find questions the one that found
    `questions` did not: one of them waited for answers it is made of, or the model answered
    one of the `RAISING` judgements. Were those all the rules', everything is as the pass just
    made it: a model mode worker without a model made a second pass of every event for nothing
    (1,457 events/s to 597)."""
    return waited or any(
        question.judgement in RAISING and not isinstance(answers.answer(question), str)
        for question in questions
    )


def positions_of(questions: Iterable[Question]) -> list[Position]:
    """The positions `questions` are of, each once, in order."""
    return list(dict.fromkeys(question.position for question in questions))


def _slow(outcome: Answer | str) -> bool:
    """Whether a call ran out of time (its own timeout, or the event's deadline)."""
    return isinstance(outcome, str) and outcome.startswith((TIMED_OUT, DEADLINE))
