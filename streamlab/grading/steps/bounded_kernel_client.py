"""``BoundedKernelClient``: a jupyter_client kernel client whose ZeroMQ sockets refuse a message larger than
``bounds.KERNEL_MESSAGE_BYTES`` (ZeroMQ drops the connection and reconnects; the message is lost) and hold at most
``bounds.KERNEL_MESSAGES_QUEUED`` messages: the grader's memory is bounded before a message is parsed."""
from __future__ import annotations

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.connect import channel_socket_types

from ..bounds import KERNEL_MESSAGE_BYTES, KERNEL_MESSAGES_QUEUED


class BoundedKernelClient(AsyncKernelClient):
    def _create_connected_socket(self, channel, identity=None):
        # jupyter_client's own, with the two options set before connect() (ZeroMQ applies them to connections
        # made afterwards)
        socket = self.context.socket(channel_socket_types[channel])
        socket.linger = 1000
        socket.setsockopt(zmq.MAXMSGSIZE, KERNEL_MESSAGE_BYTES)
        socket.setsockopt(zmq.RCVHWM, KERNEL_MESSAGES_QUEUED)
        if identity:
            socket.identity = identity
        if getattr(self, "curve_publickey", None) is not None:
            socket.curve_secretkey = self.curve_secretkey
            socket.curve_publickey = self.curve_publickey
            socket.curve_serverkey = self.curve_publickey
        socket.connect(self._make_url(channel))
        return socket
