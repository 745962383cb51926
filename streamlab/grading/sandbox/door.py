"""The Kafka door: a sandbox's only way out. A socket file the sandbox connects to; each connection is joined to
one the grader opens to the broker, and the sandbox's requests pass one frame at a time, within the topic
budget (``kafka_requests``)."""
from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

from .. import bounds
from .boot import close_both, pump
from .kafka_requests import KafkaBudget, RefusedRequest, read_frame


class KafkaDoor:
    """The sandbox's only way out: a socket file; each connection to it is joined to a connection the
    grader opens to Kafka (``open_outer``: plain TCP to the broker, or, with a principal, an
    authenticated one to its SANDBOX listener: see ``tenancy``).

    Inside, ``boot`` listens on the broker's ports on loopback and joins each connection to the
    socket file, so a Kafka client inside uses the same ``host:port`` as outside. At most
    ``max_connections`` are open at once (each costs the grader two threads and the broker a descriptor):
    one more is closed at once, and counted in ``refused``.
    """

    def __init__(self, path: Path | None, open_outer, *, max_connections: int = bounds.KAFKA_CONNECTIONS,
                 budget: KafkaBudget | None = None, server: socket.socket | None = None):
        """``path``: the socket file to make; or ``server``, a socket already bound (a classroom student's door
        listens on TCP, ``streamlab.classroom.student``)."""
        self.path = Path(path) if path is not None else None
        self.open_outer = open_outer
        self.max_connections = max_connections
        self.budget = budget  # what the sandbox may ask of the broker (see ``kafka_requests``)
        self.refusals: list[str] = []  # why requests were refused
        self.open = 0       # connections joined now
        self.peak = 0       # the most joined at once
        self.refused = 0    # connections closed because ``max_connections`` were open
        self._lock = threading.Lock()
        if server is None:
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(str(self.path))
            os.chmod(self.path, 0o777)  # the sandbox's user connects to it
        self.server = server
        self.server.listen(64)
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True, name="kafka-door")
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                inner, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                admitted = self.open < self.max_connections
                self.open += admitted
                self.peak = max(self.peak, self.open)
                self.refused += not admitted
            if not admitted:
                inner.close()
                continue
            threading.Thread(target=self._open, args=(inner,), daemon=True).start()

    def _release(self) -> None:
        with self._lock:
            self.open -= 1

    def _open(self, inner: socket.socket) -> None:
        try:
            outer = self.open_outer()
            outer.settimeout(None)
        except Exception as err:  # noqa: BLE001 - the client inside sees a closed connection
            print(f"kafka door: could not open a connection to Kafka: {type(err).__name__}: {err}", file=sys.stderr)
            inner.close()
            self._release()
            return
        back = threading.Thread(target=pump, args=(outer, inner), daemon=True)  # Kafka -> the sandbox
        back.start()
        try:
            self._forward_requests(inner, outer)  # the sandbox -> Kafka, in this thread; either end closes both
            back.join()
        finally:
            self._release()

    def _forward_requests(self, inner: socket.socket, outer: socket.socket) -> None:
        """Pass the sandbox's requests on one frame at a time, each within ``bounds.KAFKA_REQUEST_BYTES`` and
        the topic budget; at the first refused one, close the connection."""
        try:
            while (frame := read_frame(inner)) is not None:
                why = self.budget.admit(frame) if self.budget is not None else None
                if why is not None:
                    self.refusals.append(why)
                    print(f"kafka door: refused a request: {why}", file=sys.stderr)
                    break
                outer.sendall(frame)
        except OSError as err:
            if isinstance(err, RefusedRequest):
                self.refusals.append(str(err))
        finally:
            close_both(inner, outer)

    def wait(self) -> None:
        """Until the door is closed (a classroom student's door is open as long as their server)."""
        self._thread.join()

    def close(self) -> None:
        self._closed = True
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
