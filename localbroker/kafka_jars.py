"""Apache Kafka's broker jars, fetched from Maven Central once and cached outside the repo."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from pathlib import Path

DEFAULT_KAFKA_VERSION = "4.1.1"
"""The Apache Kafka version fetched unless another is asked for (`RUMOURMILL_KAFKA_VERSION`)."""
DEFAULT_KAFKA_CACHE = Path("~/.cache/rumourmill")
"""Where the jars are kept unless told otherwise (`RUMOURMILL_KAFKA_CACHE`)."""
POM = Path(__file__).with_name("kafka_pom.xml")


def fetch_apache_kafka(
    version: str = DEFAULT_KAFKA_VERSION, cache: Path = DEFAULT_KAFKA_CACHE, *, mvn: str = "mvn"
) -> Path:
    """Download the Kafka broker jars (once) and return their directory, `cache/kafka-VERSION/libs`.

    A stamp file holding a hash of the pom and version marks a finished download, so an
    interrupted one, or a changed pom, is fetched again.
    """
    home = cache.expanduser() / f"kafka-{version}"
    libs = home / "libs"
    stamp = home / ".complete"
    want = hashlib.sha256(POM.read_bytes() + version.encode()).hexdigest()
    if stamp.is_file() and stamp.read_text().strip() == want and libs.is_dir():
        return libs
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers: one downloads, the others wait
        if stamp.is_file() and stamp.read_text().strip() == want and libs.is_dir():
            return libs
        stamp.unlink(missing_ok=True)
        partial = home / "libs.partial"
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
            f"-Dkafka.version={version}", "-DincludeScope=runtime", f"-DoutputDirectory={partial}",
        ]  # fmt: skip
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except FileNotFoundError as exc:
            raise RuntimeError(f"Maven ({mvn!r}) is needed to fetch the Kafka jars: {exc}") from exc
        if result.returncode != 0 or not any(partial.glob(f"kafka_2.13-{version}.jar")):
            output = result.stdout[-4000:] + result.stderr[-4000:]
            raise RuntimeError(
                f"fetching Apache Kafka {version} failed ({' '.join(cmd)}):\n{output}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        stamp.write_text(want + "\n")
    return libs
