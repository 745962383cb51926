"""A Kafka broker of your own, to stop and start under a running query without touching the
course's shared broker (module 04)."""
from __future__ import annotations

import atexit
import os
import secrets
import subprocess
import sys
from pathlib import Path

from .paths import data_dir, project_root


class PrivateBroker:
    """A second native Kafka broker with its own data folder and port, for experiments that stop
    the broker (the course's shared broker keeps running). ``stop()`` shuts it down like a crash
    of the Kafka side; ``start()`` brings it back with its topics on the same port.

        with sl.m04.PrivateBroker() as kafka:        # stopped and deleted at the end
            with kafka.as_default():             # sl.new_topic, sl.produce, Spark readers use it
                topic = sl.new_topic("requests")
            kafka.stop(); kafka.start()
    """

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder else data_dir() / "private-brokers" / f"broker-{secrets.token_hex(3)}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.bootstrap_servers: str | None = None

    def _call(self, code: str, timeout_s: float = 150) -> str:
        env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
        env["STREAMLAB_DATA_DIR"] = str(self.folder)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(project_root()), env.get("PYTHONPATH", "")] if p)
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"the private broker failed: {proc.stderr[-2000:]}")
        return proc.stdout.strip()

    def start(self) -> str:
        """Start (or restart) it and wait until it accepts clients; returns its ``host:port``."""
        port = "None" if self.bootstrap_servers is None else self.bootstrap_servers.rsplit(":", 1)[1]
        if port == "None":
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = str(s.getsockname()[1])
        self.bootstrap_servers = self._call(
            f"from streamlab.stack import broker; print(broker.start({port}, quiet=True).bootstrap_servers)")
        _LIVE_BROKERS[str(self.folder)] = self
        return self.bootstrap_servers

    def stop(self) -> None:
        """Stop it (SIGTERM, as an operator or a failing machine would)."""
        self._call("from streamlab.stack import broker; broker.stop(quiet=True)")

    def running(self) -> bool:
        return self._call("from streamlab.stack import broker; print(broker.status().running)") == "True"

    def as_default(self):
        """A context in which ``sl.new_topic``, ``sl.produce``, ``sl.kafka_stream`` ... use this broker."""
        from contextlib import contextmanager

        @contextmanager
        def default():
            before = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
            os.environ["KAFKA_BOOTSTRAP_SERVERS"] = self.bootstrap_servers
            try:
                yield self
            finally:
                if before is None:
                    os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)
                else:
                    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = before
        return default()

    def close(self) -> None:
        """Stop it and delete its data."""
        import shutil

        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            _LIVE_BROKERS.pop(str(self.folder), None)

    def __enter__(self) -> PrivateBroker:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_LIVE_BROKERS: dict[str, PrivateBroker] = {}


@atexit.register
def _stop_private_brokers() -> None:
    """A private broker never outlives the Python process that started it (unless that one is SIGKILLed)."""
    for private in list(_LIVE_BROKERS.values()):
        try:
            private.close()
        except Exception:  # best effort at exit
            pass
