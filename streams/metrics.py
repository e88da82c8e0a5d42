"""What a worker counts for Prometheus (`GET /metrics`), in a registry of its own.

Each app gets its own `CollectorRegistry`, never the process-wide one, so two workers in one
process (tests, benchmarks) count apart. Counters count what was sent: a redelivered event's
acks are sent again and counted again, exactly as they appear on the acks topic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client import Counter as PrometheusCounter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from schemas import Ack, Outcome
from schemas.memory import Memory
from streams.json_service import Outcome as CallOutcome

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The Prometheus text exposition format's content type."""
LagByPartition = Callable[[], Mapping[int, int]]
"""Events not yet committed, per partition of the events topic this worker consumes."""
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
PROCESSING_BUCKETS = (*SECONDS_BUCKETS, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""An event waits for its model judgements up to its world's deadline (`memory.model.deadline_ms`,
600 s at most): past 2.5 s every slow event fell in one bucket, +Inf."""
BATCH_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 200, 500, 1000, 2000, 4096)
READ_BUCKETS = (*SECONDS_BUCKETS, 5.0, 10.0, 30.0, 60.0)
"""A recall waits for its reranker up to `RUMOURMILL_RERANK_TIMEOUT_SECONDS` (2 s; 60 at
most), a reply check for the model up to its deadline: past 1 s every slow read fell in +Inf."""


def no_lag() -> Mapping[int, int]:
    """No partitions consumed (a web server without a worker)."""
    return {}


class _LagCollector(Collector):
    """A lag per partition as a gauge, asked of the worker at each scrape."""

    def __init__(self, name: str, documentation: str, lag: LagByPartition) -> None:
        self.name, self.documentation, self.lag = name, documentation, lag

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(self.name, self.documentation, labels=["partition"])
        for partition, lag in sorted(self.lag().items()):
            gauge.add_metric([str(partition)], lag)
        yield gauge


class Metrics:
    """The worker's counters, histograms and the lag gauges, in one registry."""

    def __init__(self, lag: LagByPartition = no_lag, standby_lag: LagByPartition = no_lag) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.events = PrometheusCounter(
            "rumourmill_events",
            "Event acks sent, by outcome (processed, deferred, duplicate, rejected).",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in Outcome:
            self.events.labels(outcome=outcome.value)
        self.processing = Histogram(
            "rumourmill_processing_seconds",
            "Time to project one message (model judgements included), before its batch is sent.",
            buckets=PROCESSING_BUCKETS,
            registry=self.registry,
        )
        self.batch_events = Histogram(
            "rumourmill_batch_events",
            "Events the ingest agent took in one batch: at RUMOURMILL_BATCH_EVENTS while a "
            "backlog waits, a few when the worker keeps up.",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.laying_in = Histogram(
            "rumourmill_lay_in_seconds",
            "Time to lay one batch's state writes of a partition into its RocksDB, on the state "
            "writes' thread. rocksdict holds the GIL meanwhile: while a backlog waits, the agent "
            "waits for it too.",
            buckets=PROCESSING_BUCKETS,
            registry=self.registry,
        )
        self.dead_letters = PrometheusCounter(
            "rumourmill_dead_letters",
            "Messages sent to the dead-letter topic.",
            registry=self.registry,
        )
        self.memories_formed = PrometheusCounter(
            "rumourmill_memories_formed",
            "Memories formed by perception, conversation or a player's words.",
            registry=self.registry,
        )
        self.rumours_passed = PrometheusCounter(
            "rumourmill_rumours_passed",
            "Memories passed on as rumours when characters met (meetings, group exchanges).",
            registry=self.registry,
        )
        self.model_calls = PrometheusCounter(
            "rumourmill_model_calls",
            "Calls to the model, by how they ended (answered; refused, malformed, http_error, "
            "unreachable, timeout: the rules judged; resting: not asked; busy: a reply check "
            "not asked, as many reads asking already; cancelled: cut by an event's deadline or "
            "a stop).",
            ["outcome"],
            registry=self.registry,
        )
        self.rerank_calls = PrometheusCounter(
            "rumourmill_rerank_calls",
            "Calls to the reranker, by how they ended (answered; refused, malformed, http_error, "
            "unreachable, timeout: recall chose by its searches; resting, busy: not asked; "
            "cancelled: the recall's client went).",
            ["outcome"],
            registry=self.registry,
        )
        for call_outcome in CallOutcome:
            self.model_calls.labels(outcome=call_outcome.value)
            self.rerank_calls.labels(outcome=call_outcome.value)
        self.reads = Histogram(
            "rumourmill_read_seconds",
            "Time to answer an HTTP read, by endpoint (route template).",
            ["endpoint"],
            buckets=READ_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(
            _LagCollector(
                "rumourmill_consumer_lag",
                "Events on the events topic past this worker's committed offset, per partition.",
                lag,
            )
        )
        self.registry.register(
            _LagCollector(
                "rumourmill_standby_lag",
                "State changelog records past what this worker's standby copy of the partition"
                " has read (a failover to it lays them in first), per standby partition.",
                standby_lag,
            )
        )

    def sent(self, acks: Iterable[Ack], dead_letters: int) -> None:
        """Count what a batch of messages produced: its acks, and how many dead letters."""
        for outcome, count in Counter(ack.outcome for ack in acks).items():
            self.events.labels(outcome=outcome.value).inc(count)
        if dead_letters:
            self.dead_letters.inc(dead_letters)

    def formed(self, memories: Sequence[Memory], rumours: Sequence[Memory]) -> None:
        """Count what one applied event formed (`projections.projector.FormationObserver`)."""
        self.memories_formed.inc(len(memories))
        self.rumours_passed.inc(len(rumours))

    def model_call(self, outcome: CallOutcome) -> None:
        """Count one call to the model (`streams.json_service.Count`)."""
        self.model_calls.labels(outcome=outcome.value).inc()

    def rerank_call(self, outcome: CallOutcome) -> None:
        """Count one call to the reranker (`streams.json_service.Count`)."""
        self.rerank_calls.labels(outcome=outcome.value).inc()

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format."""
        return generate_latest(self.registry)
