"""The Kafka door (``sandbox.KafkaDoor``) with no sandbox around it: its caps, seen from both ends."""
from __future__ import annotations

import socket
import threading
import time

import pytest
from test_kafka_requests import create_topics

from streamlab.grading.sandbox.door import KafkaDoor
from streamlab.grading.sandbox.kafka_requests import KafkaBudget


class Recorder:
    """Stands in for the broker: accepts connections on 127.0.0.1 and keeps what each one sends."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        while data := conn.recv(65536):
            self.received.append(data)

    def connect(self):
        return socket.create_connection(self.server.getsockname(), timeout=5)


def _closed(sock: socket.socket, wait_s: float = 3) -> bool:
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


@pytest.mark.slow
def test_connections_past_the_cap_are_closed_and_counted(tmp_path):
    broker = Recorder()
    door = KafkaDoor(tmp_path / "kafka.sock", broker.connect, max_connections=3)
    clients = []
    try:
        for _ in range(5):
            client = socket.socket(socket.AF_UNIX)
            client.connect(str(tmp_path / "kafka.sock"))
            clients.append(client)
        time.sleep(0.5)  # the door's accept thread takes them in turn
        closed = [_closed(c, 1) for c in clients]
        assert closed.count(True) == 2 and door.refused == 2 and door.peak == 3
        clients[0].close()  # one ends: a new one gets its place
        deadline = time.monotonic() + 5
        while door.open > 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        again = socket.socket(socket.AF_UNIX)
        again.connect(str(tmp_path / "kafka.sock"))
        clients.append(again)
        assert not _closed(again, 1)
    finally:
        for c in clients:
            c.close()
        door.close()


def test_a_request_past_the_budget_never_reaches_the_broker(tmp_path):
    broker = Recorder()
    door = KafkaDoor(tmp_path / "kafka.sock", broker.connect, budget=KafkaBudget(prefix="s1-"))
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(tmp_path / "kafka.sock"))
    try:
        fine = create_topics(7, [("s1-events", 2)])
        client.sendall(fine)
        deadline = time.monotonic() + 5
        while b"".join(broker.received) != fine and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b"".join(broker.received) == fine
        client.sendall(create_topics(7, [("s1-flood", 2000)]))
        assert _closed(client)
        assert b"".join(broker.received) == fine, "the refused request was passed on"
        assert door.refusals and "partitions" in door.refusals[0]
    finally:
        client.close()
        door.close()
