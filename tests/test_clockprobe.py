"""clockprobe: the measure loop goes on after a reply that never comes (a timeout)."""

from __future__ import annotations

import importlib
import socket
import threading
import time

import pytest

from producer import clockprobe

# Real sockets and timeouts: offsets under 50 ms, a 1 s timeout timed.
pytestmark = pytest.mark.realtime


def dropping_server(drop_first):
    """A driver-side server on a free port that ignores the first drop_first requests."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)

    def serve():
        seen = 0
        try:
            while True:
                _, peer = sock.recvfrom(64)
                seen += 1
                if seen > drop_first:
                    sock.sendto(clockprobe.REPLY.pack(time.time_ns()), peer)
        except OSError:
            return

    threading.Thread(target=serve, daemon=True).start()
    return sock, f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_lost_reply_times_out_and_the_next_sample_is_taken():
    sock, address = dropping_server(drop_first=1)
    try:
        started = time.monotonic()
        result = clockprobe.measure(address, samples=3, timeout_s=10)
    finally:
        sock.close()
    assert result["samples"] == 3
    assert abs(result["offset_ms"]) < 50 and result["rtt_ms"] >= 0
    assert 1.0 <= time.monotonic() - started < 5  # one 1 s timeout, then three answers


class Python39Timeout(OSError):
    """socket.timeout as Python 3.9 has it: an OSError, but not a TimeoutError."""


class Python39Socket:
    """A UDP socket whose first receive times out the 3.9 way; then the driver answers."""

    def __init__(self, *args):
        self.receives = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def settimeout(self, seconds):
        pass

    def sendto(self, data, address):
        pass

    def recvfrom(self, size):
        self.receives += 1
        if self.receives == 1:
            raise Python39Timeout("timed out")
        return clockprobe.REPLY.pack(time.time_ns()), ("127.0.0.1", 1)


@pytest.fixture
def python39_sockets(monkeypatch):
    monkeypatch.setattr(socket, "timeout", Python39Timeout)
    monkeypatch.setattr(socket, "socket", Python39Socket)
    yield importlib.reload(clockprobe)
    monkeypatch.undo()
    importlib.reload(clockprobe)


def test_on_python_3_9_socket_timeout_is_caught_too(python39_sockets):
    assert not issubclass(Python39Timeout, TimeoutError)
    result = python39_sockets.measure("127.0.0.1:1", samples=2, timeout_s=5)
    assert result["samples"] == 2


def test_the_server_stops_when_the_stop_file_appears_and_frees_its_port(tmp_path):
    stop = tmp_path / "probe.stop"
    port_file = tmp_path / "probe.port"
    server = threading.Thread(
        target=clockprobe.serve, args=("127.0.0.1", 0, port_file, 60.0, stop), daemon=True
    )
    server.start()
    deadline = time.monotonic() + 5
    while not port_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    port = int(port_file.read_text())
    assert clockprobe.measure(f"127.0.0.1:{port}", samples=3, timeout_s=5)["samples"] == 3
    stop.touch()
    server.join(timeout=3)
    assert not server.is_alive()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:  # the port is free again
        again.bind(("127.0.0.1", port))
