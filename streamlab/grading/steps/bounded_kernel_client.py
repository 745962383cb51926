"""``BoundedKernelClient``: a jupyter_client kernel client whose ZeroMQ sockets refuse a message larger than
``bounds.KERNEL_MESSAGE_BYTES`` and hold at most ``bounds.KERNEL_MESSAGES_QUEUED`` messages: the grader's memory is
bounded before a message is parsed.

ZeroMQ refuses a message over the bound by dropping the connection, and never connects that socket again: before
``reconnect_dropped()``, one output over the bound lost every later cell's outputs (what the lab's own cells print
among them) and cost each later cell the wait for its "idle"; one execute reply over the bound (a 20 MB payload) left
every later cell without its reply, each waiting out the cell limit. Each socket is watched (a ZeroMQ monitor), and
``reconnect_dropped()``, called before each cell, connects a dropped one again."""
from __future__ import annotations

import time

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.connect import channel_socket_types
from zmq.utils.monitor import recv_monitor_message

from .. import bounds


class BoundedKernelClient(AsyncKernelClient):
    def _create_connected_socket(self, channel, identity=None):
        # jupyter_client's own, with the two options set before connect() (ZeroMQ applies them to connections
        # made afterwards)
        socket = self.context.socket(channel_socket_types[channel])
        socket.linger = 1000
        socket.setsockopt(zmq.MAXMSGSIZE, bounds.KERNEL_MESSAGE_BYTES)
        socket.setsockopt(zmq.RCVHWM, bounds.KERNEL_MESSAGES_QUEUED)
        if identity:
            socket.identity = identity
        if getattr(self, "curve_publickey", None) is not None:
            socket.curve_secretkey = self.curve_secretkey
            socket.curve_publickey = self.curve_publickey
            socket.curve_serverkey = self.curve_publickey
        url = self._make_url(channel)
        self._watch(socket, url)
        socket.connect(url)
        return socket

    def _watch(self, socket, url: str) -> None:
        """Events of ``socket``'s connection, on a socket of the client's own context (so that the context's
        ``destroy()`` closes it too: an open socket would keep the context from ending), read without an event loop
        through a plain view of it."""
        address = f"inproc://streamlab-kernel-socket-{id(socket)}"
        socket.monitor(address, zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        owner = self.context.socket(zmq.PAIR)
        owner.linger = 0
        owner.connect(address)
        self.__dict__.setdefault("_watched", []).append((socket, owner, url))

    def reconnect_dropped(self) -> list[str]:
        """Connect again each socket whose connection ZeroMQ dropped since the last call: their addresses."""
        again = []
        for socket, owner, url in self.__dict__.get("_watched", []):
            if socket.closed or owner.closed:
                continue
            watcher = zmq.Socket.shadow(owner.underlying)  # a view: closing the owner closes it
            dropped = False
            while watcher.poll(0):
                dropped |= recv_monitor_message(watcher)["event"] == zmq.EVENT_DISCONNECTED
            if not dropped:
                continue
            socket.disconnect(url)
            socket.connect(url)
            # the handshake, then a moment for a SUB socket's subscription to reach the kernel
            while watcher.poll(int(bounds.KERNEL_RECONNECT_WAIT_S * 1000)):
                if recv_monitor_message(watcher)["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    time.sleep(bounds.KERNEL_SUBSCRIBE_WAIT_S)
                    break
            again.append(url)
        return again

    def stop_channels(self) -> None:
        for socket, owner, _ in self.__dict__.pop("_watched", []):
            if not socket.closed:
                try:
                    socket.disable_monitor()
                except zmq.ZMQError:
                    pass
            owner.close(linger=0)
        super().stop_channels()
