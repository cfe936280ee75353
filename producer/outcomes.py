"""produced.jsonl written as the run goes: a line per message once its outcome is known.

The Kafka callbacks only queue the id (DeliveryLog.resolved); the main thread turns the queue
into lines every WRITE_INTERVAL_NS, one write() per batch, so a producer that dies leaves
produced.jsonl.part with every outcome known up to a fraction of a second before its death.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from producer.clock import NS_PER_MS, NS_PER_S, Clock
from producer.delivery import UNRESOLVED_ERROR, DeliveryLog, produced_line
from producer.files import LineOutput
from producer.schedule import Schedule

WRITE_INTERVAL_NS = NS_PER_S // 5


class Flushable(Protocol):
    def flush(self, timeout: float | None = None) -> None: ...


class PeriodicWriter(Protocol):
    """What the send loop needs of a writer: when it is due, and the call to make then."""

    due_ns: int

    def write_resolved(self, now_ns: int) -> None: ...


class NoWriter:
    """A writer that is never due (the send loop alone, e.g. in tests of pacing)."""

    due_ns = 2**63

    def write_resolved(self, now_ns: int) -> None:
        return None


class ProducedWriter:
    """Appends the lines of resolved messages to produced.jsonl.part; commit() publishes it.

    The send loop compares its clock reading with `due_ns` (cheap) and calls write_resolved()
    when it has passed.
    """

    def __init__(self, out: Path, log: DeliveryLog, schedule: Schedule, clock: Clock) -> None:
        self.log = log
        self.schedule = schedule
        self.clock = clock
        self.lines = 0
        self.batches = 0
        self._output = LineOutput(out)
        self.due_ns = clock.now_ns() + WRITE_INTERVAL_NS

    def write_resolved(self, now_ns: int) -> None:
        """Write the line of every message resolved so far (one write), then wait an interval."""
        self.due_ns = now_ns + WRITE_INTERVAL_NS
        lines = self.log.take_resolved_lines(self.schedule)
        if not lines:
            return
        self._output.write_lines("".join(lines))
        self.lines += len(lines)
        self.batches += 1

    def write_unresolved(self) -> int:
        """Once the client is closed: a line for every message that never got an outcome."""
        self.write_resolved(self.clock.now_ns())
        lines = [
            produced_line(
                msg_id,
                self.schedule.slot_ns(msg_id) // NS_PER_MS,
                self.log.sent_ns(msg_id) // NS_PER_MS,
                UNRESOLVED_ERROR,
            )
            for msg_id in self.log.unresolved()
        ]
        if lines:
            self._output.write_lines("".join(lines))
            self.lines += len(lines)
        return len(lines)

    def commit(self) -> None:
        """fsync, then rename to produced.jsonl (the collector takes that as 'producer done')."""
        self._output.commit()


def flush_while_writing(sender: Flushable, writer: ProducedWriter) -> None:
    """sender.flush() on a helper thread, writing resolved lines every interval meanwhile.

    A final flush can take up to the client's delivery timeout (minutes after a broker fault);
    the acknowledgements that arrive during it are on disk within an interval all the same.
    """
    failure: list[BaseException] = []

    def flush() -> None:
        try:
            sender.flush()
        except BaseException as error:  # re-raised on the main thread
            failure.append(error)

    thread = threading.Thread(target=flush, name="produce-flush", daemon=True)
    thread.start()
    while True:
        thread.join(WRITE_INTERVAL_NS / NS_PER_S)
        writer.write_resolved(writer.clock.now_ns())
        if not thread.is_alive():
            break
    if failure:
        raise failure[0]
