"""Print a new KRaft cluster id (the kafka role formats every broker's storage with it).

Like Kafka's own Uuid.randomUuid(): 16 random bytes in URL-safe base64 without padding, and never
one that starts with '-', which kafka-storage's --cluster-id would take for an option (1 id in
64 does). Runs with the control node's Python (3.9 or later), standard library only.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable


def new_cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    while True:
        cluster_id = base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


if __name__ == "__main__":
    print(new_cluster_id())
