"""docker-compose.yml: the Prometheus service scrapes the worker it runs beside.

The file is parsed as Compose reads it (YAML); `docker compose config` checks it against the
Compose specification where the plugin is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from streams.cli import main
from streams.stopping import STOP_DEADLINE_SECONDS
from streams.web import ROUTES

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def prometheus_config(service: dict[str, Any]) -> dict[str, Any]:
    """The prometheus.yml the service mounts, read from beside the compose file."""
    mounts = [volume.split(":") for volume in service["volumes"]]
    [source] = [source for source, target, *_ in mounts if target.endswith("prometheus.yml")]
    config: dict[str, Any] = yaml.safe_load((COMPOSE.parent / source).read_text())
    return config


def test_prometheus_scrapes_the_worker_service_on_its_web_port() -> None:
    services = compose()["services"]
    prometheus = services["prometheus"]
    worker_name = next(name for name, s in services.items() if s.get("command") == ["worker"])
    worker = services[worker_name]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert worker_name in prometheus["depends_on"]
    [job] = prometheus_config(prometheus)["scrape_configs"]
    assert job["metrics_path"] in ROUTES
    [targets] = [group["targets"] for group in job["static_configs"]]
    assert targets == [f"{worker_name}:{worker['environment']['RUMOURMILL_WEB_PORT']}"]
    assert worker["environment"]["RUMOURMILL_WEB_HOST"] == "0.0.0.0"  # reachable from Prometheus


def test_docker_waits_for_the_workers_own_stop_before_killing_it() -> None:
    """Docker's default grace (10 s) is under the worker's stop deadline: a stop waiting for
    Kafka was killed before its own line saying what it gave up."""
    services = compose()["services"]
    [worker] = [service for service in services.values() if service.get("command") == ["worker"]]
    grace = worker["stop_grace_period"]
    assert grace.endswith("s") and float(grace[:-1]) > STOP_DEADLINE_SECONDS


def _compose_command() -> list[str] | None:
    """`docker compose` (the plugin) or `docker-compose`; None when neither works here."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        probe = subprocess.run([*command, "version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return command
    return None


def test_docker_compose_accepts_the_file() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("no docker compose plugin on this machine")
    checked = subprocess.run(
        [*command, "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continued lines joined), as (INSTRUCTION, arguments)."""
    joined = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_image_runs_as_a_user_of_its_own_who_owns_the_data_dir() -> None:
    """Run as root, the image was refused where containers may not be (Kubernetes'
    `runAsNonRoot`); run as another user, the worker could not write its data dir."""
    instructions = dockerfile()
    [user] = [arguments for instruction, arguments in instructions if instruction == "USER"]
    assert user not in ("root", "0")
    [data_dir] = re.findall(r"RUMOURMILL_DATA_DIR=(\S+)", str(instructions))
    installs = [arguments for instruction, arguments in instructions if instruction == "RUN"]
    assert any(f"chown {user}:0 {data_dir}" in arguments for arguments in installs)
    position = {instruction: index for index, (instruction, _) in enumerate(instructions)}
    assert position["USER"] < position["VOLUME"] and position["USER"] < position["ENTRYPOINT"]


def test_the_images_health_is_the_workers_readiness() -> None:
    """Asked at 127.0.0.1, a worker bound to one address of its own was never healthy:
    `rumourmill ready` asks where it listens (tested against a worker in `test_restart`)."""
    [check] = [arguments for instruction, arguments in dockerfile() if instruction == "HEALTHCHECK"]
    assert re.search(r'CMD \["rumourmill", "ready"', check), check
    [entrypoint] = [
        arguments for instruction, arguments in dockerfile() if instruction == "ENTRYPOINT"
    ]
    assert entrypoint == '["rumourmill"]'
    assert "ready" in main.commands


def test_the_brokers_events_outlive_its_container() -> None:
    """Without a volume, the apache/kafka image keeps its log under /tmp in the container:
    recreated, every event was gone, and the worker threw its state away as ahead of it."""
    kafka = compose()["services"]["kafka"]
    log_dirs = kafka["environment"]["KAFKA_LOG_DIRS"]
    assert any(volume.split(":")[1] == log_dirs for volume in kafka["volumes"])


def test_each_worker_replica_gives_the_others_its_own_address() -> None:
    """One `RUMOURMILL_WEB_URL` for the service told every replica's address as the same: a
    worker bound to every interface gives its own (`Settings.canonical_url`)."""
    [worker] = [s for s in compose()["services"].values() if s.get("command") == ["worker"]]
    assert "RUMOURMILL_WEB_URL" not in worker["environment"]
    assert worker["environment"]["RUMOURMILL_WEB_HOST"] == "0.0.0.0"
