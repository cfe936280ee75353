#!/usr/bin/env python3
"""Hold every packet of a netfilter queue for a delay with jitter, then let it go.

    streamlab_delay.py --queue N --delay-ms D [--jitter-ms J] --ready FILE

The fault agent's network_delay on a kernel without the netem queueing discipline: an iptables
rule sends the interface's outgoing packets to NFQUEUE N; this program takes them from the
kernel over nfnetlink (standard library only: Python 3.9 or later, as root), and accepts each
one once D ms (plus a uniform jitter in [-J, J] ms, as netem's default) have passed since it
arrived, so the packet really leaves that much later. It writes FILE once it is bound to the
queue. On SIGTERM it lets every held packet go at once and exits. If it dies, the rule's
--queue-bypass lets packets through undelayed, and the kernel drops only those it held.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from pathlib import Path

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 5, 4
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NF_ACCEPT = 1
SO_RCVBUFFORCE = 33
HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
ATTRIBUTE = struct.Struct("=HH")  # nlattr: length, type


def attribute(kind: int, payload: bytes) -> bytes:
    body = ATTRIBUTE.pack(ATTRIBUTE.size + len(payload), kind) + payload
    return body + b"\0" * (-len(body) % 4)


def message(kind: int, queue: int, attributes: bytes, flags: int, sequence: int) -> bytes:
    body = struct.pack("BB", socket.AF_UNSPEC, 0) + struct.pack(">H", queue) + attributes
    msg_type = (NFNL_SUBSYS_QUEUE << 8) | kind
    return HEADER.pack(HEADER.size + len(body), msg_type, flags, sequence, 0) + body


def packet_ids(data: bytes) -> tuple[list[int], list[int]]:
    """The packet ids in a batch of netlink messages, and the error codes of any acks in it."""
    ids, errors = [], []
    offset = 0
    while offset + HEADER.size <= len(data):
        length, msg_type, _, _, _ = HEADER.unpack_from(data, offset)
        if length < HEADER.size:
            break
        if msg_type == NLMSG_ERROR:
            errors.append(struct.unpack_from("=i", data, offset + HEADER.size)[0])
        elif msg_type == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            at = offset + HEADER.size + 4  # after nfgenmsg
            while at + ATTRIBUTE.size <= offset + length:
                size, kind = ATTRIBUTE.unpack_from(data, at)
                if size < ATTRIBUTE.size:
                    break
                if kind & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from(">I", data, at + ATTRIBUTE.size)[0])
                at += size + (-size % 4)
        offset += length + (-length % 4)
    return ids, errors


class Delayer:
    """Bound to one queue: takes packets, hands them back when their time has come."""

    def __init__(self, queue: int, delay_ms: float, jitter_ms: float) -> None:
        self.queue = queue
        self.delay_s = delay_ms / 1000.0
        self.jitter_s = jitter_ms / 1000.0
        self.sequence = itertools.count(1)
        self.held: list[tuple[float, int]] = []  # (release time, packet id): ids grow with arrival
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.bind((0, 0))
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)

    def configure(self) -> None:
        steps = (
            attribute(
                NFQA_CFG_CMD, struct.pack("BB", NFQNL_CFG_CMD_BIND, 0) + struct.pack(">H", 0)
            ),
            attribute(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META)),
            attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", 65536))
            + attribute(NFQA_CFG_FLAGS, struct.pack(">I", NFQA_CFG_F_FAIL_OPEN))
            + attribute(NFQA_CFG_MASK, struct.pack(">I", NFQA_CFG_F_FAIL_OPEN)),
        )
        for attributes in steps:
            flags = NLM_F_REQUEST | NLM_F_ACK
            self.sock.send(
                message(NFQNL_MSG_CONFIG, self.queue, attributes, flags, next(self.sequence))
            )
            _, errors = packet_ids(self.sock.recv(65536))
            if any(errors):
                code = -next(e for e in errors if e)
                raise OSError(code, f"binding netfilter queue {self.queue}: {os.strerror(code)}")

    def accept(self, packet_id: int) -> None:
        verdict = attribute(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))
        self.sock.send(message(NFQNL_MSG_VERDICT, self.queue, verdict, NLM_F_REQUEST, 0))

    def hold(self, packet_id: int, now: float) -> None:
        jitter = random.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0
        heapq.heappush(self.held, (now + max(0.0, self.delay_s + jitter), packet_id))

    def release_due(self, now: float) -> None:
        while self.held and self.held[0][0] <= now:
            self.accept(heapq.heappop(self.held)[1])

    def release_all(self) -> None:
        while self.held:
            self.accept(heapq.heappop(self.held)[1])

    def serve(self, stop: list[bool]) -> None:
        while not stop[0]:
            now = time.monotonic()
            self.release_due(now)
            wait = min(self.held[0][0] - now, 0.2) if self.held else 0.2
            readable, _, _ = select.select([self.sock], [], [], max(wait, 0.0))
            if readable:
                ids, _ = packet_ids(self.sock.recv(1 << 20))
                arrived = time.monotonic()
                for packet_id in ids:
                    self.hold(packet_id, arrived)
        self.release_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--ready", type=Path, required=True)
    args = parser.parse_args(argv)
    stop = [False]

    def on_term(_signum: int, _frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        delayer = Delayer(args.queue, args.delay_ms, args.jitter_ms)
        delayer.configure()
    except OSError as error:
        print(f"streamlab_delay: {error}", file=sys.stderr)
        return 1
    args.ready.write_text(f"{os.getpid()}\n")
    delayer.serve(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
