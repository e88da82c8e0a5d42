"""`python -m benchmarks [--quick] [--repeats N]`: every benchmark, in-process ones first.

The Kafka benchmarks share one Apache Kafka broker, started here and stopped at the end.
"""

from __future__ import annotations

import time

from benchmarks import (
    change_feed,
    dialogue,
    failover,
    history_scaling,
    instructions,
    model_mode,
    projection_core,
    read_latency,
    read_load,
    rebuild,
    recall,
    restart,
    rumours,
    worker_throughput,
)
from benchmarks.support import kafka_bootstrap, parse_options


def main() -> None:
    options = parse_options(__doc__ or "")
    began = time.perf_counter()
    mode = "quick" if options.quick else "full"
    print(f"rumourmill benchmarks ({mode}, {options.repeats} repeats per measurement)")
    projection_core.run(options)
    instructions.run(options)
    history_scaling.run(options)
    rumours.run(options)
    recall.run(options)
    dialogue.run(options)
    model_mode.run(options)
    change_feed.in_process(options)
    with kafka_bootstrap() as bootstrap:
        worker_throughput.run(options, bootstrap)
        change_feed.on_kafka(options, bootstrap)
        read_latency.run(options, bootstrap)
        read_load.run(options, bootstrap)
        failover.run(options, bootstrap)
        restart.run(options, bootstrap)
        rebuild.run(options, bootstrap)
    print(f"\n(all benchmarks took {time.perf_counter() - began:.0f}s)")


if __name__ == "__main__":
    main()
