"""Apache Kafka as one KRaft node: broker and controller in one JVM, small and quick to start."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from localbroker.network import HOST

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
"""
"""The broker's log4j2 configuration: everything into one file, `{log}`."""


def cluster_id() -> str:
    """A cluster id like Kafka's ``Uuid.randomUuid()`` (url-safe base64, no leading '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def server_properties(port: int, controller_port: int, data_dir: Path) -> dict[str, str]:
    """Single node, everything replicated once, quick to (re)start."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
        "offsets.topic.replication.factor": "1",
        # 1 instead of 50: creating __consumer_offsets is on the first group's critical path
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # after a SIGKILL the new incarnation waits for the old one's session to expire
        # (default 9 s) before it can register; shorter keeps crash-restart tests quick
        "broker.session.timeout.ms": "4000",
        "broker.heartbeat.interval.ms": "1000",
    }
