"""What a hostile submission reaches for, made by the tests themselves: a listener of the test's own on
127.0.0.1 (never an outside address) and another student's Kafka topic with records in it."""
from __future__ import annotations

import socket
import threading


class Listener:
    """A TCP listener on 127.0.0.1 that answers every connection with ``reply`` and counts them."""

    def __init__(self, reply: bytes = b""):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.reply:
                conn.sendall(self.reply)
            conn.close()

    def close(self):
        self.sock.close()


def topic_with_records(servers: str, name: str, count: int = 3) -> str:
    """Create topic ``name`` (one partition) holding ``count`` records, as the grader (ANONYMOUS) would."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=servers)
    admin.create_topics([NewTopic(name, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=servers)
    for i in range(count):
        producer.send(name, f"record {i}".encode())
    producer.flush()
    producer.close()
    return name
