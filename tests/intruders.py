"""What a hostile submission reaches for, made by the tests themselves: a listener of the test's own on
127.0.0.1 (never an outside address) and another student's Kafka topic with records in it; and the
hostile submission itself: a lab's blank notebook with a cell of attack on top."""
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


def notebook_name(lab: str) -> str:
    """The lab's (first) notebook's name."""
    from streamlab import grading

    return grading.lab_notebooks(lab)[0]


def with_attack(lab: str, code: str, *, on_reference: bool = False):
    """``lab``'s blank notebook, as students get it (``on_reference``: the reference answers), with ``code`` in a
    cell of its own at the top."""
    import nbformat

    from streamlab import grading

    nb = (grading.reference_notebook if on_reference else grading.released_notebook)(lab, notebook_name(lab))
    nb.cells.insert(0, nbformat.v4.new_code_cell(code.strip("\n")))
    return nb
