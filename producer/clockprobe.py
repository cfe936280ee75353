"""Measure a host's clock offset from the driver host with round trips (Cristian's algorithm).

On the driver:   python3 clockprobe.py serve --bind ADDR [--port P] --port-file F [--stop-file S]
                 [--duration-s 60]
On each host:    python3 clockprobe.py measure --server ADDR:PORT [--samples 25]

`measure` prints {"offset_ms": host clock - driver clock, "rtt_ms": round trip of the best
sample, "samples": n}. The sample with the shortest round trip bounds the error by rtt/2.
Only the standard library is used, so the file runs on any host with Python 3.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from pathlib import Path

REPLY = struct.Struct("!q")
# A timed-out recvfrom raises socket.timeout, which is TimeoutError only from Python 3.10 on;
# the hosts may run 3.9.
RECV_TIMEOUT = (TimeoutError, socket.timeout)


STOP_POLL_S = 0.5


def serve(
    bind: str,
    port: int,
    port_file: Path | None,
    duration_s: float,
    stop_file: Path | None = None,
) -> None:
    """Answer every datagram with the driver's wall clock in ns, for duration_s seconds or until
    stop_file exists (looked for whenever no datagram came for STOP_POLL_S), freeing the port.

    Port 0 takes a free port; port_file then tells the hosts which one (written atomically).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((bind, port))
        if port_file is not None:
            partial = port_file.with_name(port_file.name + ".part")
            partial.write_text(f"{sock.getsockname()[1]}\n")
            partial.replace(port_file)
        deadline = time.monotonic() + duration_s
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(min(left, STOP_POLL_S))
            try:
                _, peer = sock.recvfrom(64)
            except RECV_TIMEOUT:
                if stop_file is not None and stop_file.exists():
                    break
                continue
            sock.sendto(REPLY.pack(time.time_ns()), peer)


def measure(server: str, samples: int, timeout_s: float) -> dict[str, float | int]:
    host, _, port = server.rpartition(":")
    best: tuple[int, int] | None = None  # (rtt_ns, offset_ns)
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1.0)
        answered = 0
        while answered < samples and time.monotonic() < deadline:
            sent = time.time_ns()
            sock.sendto(b"t", (host, int(port)))
            try:
                data, _ = sock.recvfrom(64)
            except RECV_TIMEOUT:
                continue
            received = time.time_ns()
            (driver_ns,) = REPLY.unpack(data)
            rtt = received - sent
            offset = (sent + received) // 2 - driver_ns
            answered += 1
            if best is None or rtt < best[0]:
                best = (rtt, offset)
    if best is None:
        raise SystemExit(f"no answer from the clock probe at {server} within {timeout_s:.0f} s")
    return {
        "offset_ms": round(best[1] / 1e6, 3),
        "rtt_ms": round(best[0] / 1e6, 3),
        "samples": answered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve_args = sub.add_parser("serve")
    serve_args.add_argument("--bind", default="0.0.0.0")  # noqa: S104 - every host must reach it
    serve_args.add_argument("--port", type=int, default=0, help="0: any free port")
    serve_args.add_argument("--port-file", type=Path, help="where to write the port taken")
    serve_args.add_argument("--duration-s", type=float, default=60.0)
    serve_args.add_argument("--stop-file", type=Path, help="stop once this file exists")
    measure_args = sub.add_parser("measure")
    measure_args.add_argument("--server", required=True, help="driver ADDR:PORT")
    measure_args.add_argument("--samples", type=int, default=25)
    measure_args.add_argument("--timeout-s", type=float, default=20.0)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.bind, args.port, args.port_file, args.duration_s, args.stop_file)
    else:
        print(json.dumps(measure(args.server, args.samples, args.timeout_s)))


if __name__ == "__main__":
    sys.exit(main())
