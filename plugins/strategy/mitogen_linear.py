"""The kit's strategy (ansible.cfg): Ansible's linear strategy run over Mitogen's SSH
connections, with a deadline on Ctrl-C.

Mitogen (a pinned dependency in pyproject.toml) keeps one Python interpreter per host and
user for the whole run and sends modules to it, instead of starting a new interpreter over
SSH for every task, which about halves a converged lab's re-run
(docs/decisions/mitogen-strategy.md). Its plugin lives in its package, whose path depends on the
virtualenv; this file makes it one name for ansible.cfg. Plays run exactly as with `linear`
(ANSIBLE_STRATEGY=linear runs them without Mitogen).

Ctrl-C: under Mitogen an experiment sent SIGINT once had not exited a minute later. Its
multiplexer processes ignore SIGINT and the top-level process waits for them at exit
(ansible_mitogen.process), so anything that keeps one from shutting down keeps
`ansible-playbook` waiting. Here the first SIGINT to the top-level process also starts a
watchdog: if Ansible has not exited STOP_GRACE_S later, it says so on stderr, kills the
multiplexers (which ends their SSH connections) and, if the process is still there
MUX_EXIT_GRACE_S after that, exits at once with Ansible's status for an interrupted run (99).
What the interrupted run left on the hosts is what a control node that died leaves: the next
experiment and teardown.yml find and stop it.

Only SSH goes through Mitogen. A local connection (the embedded default inventory, tasks on the
control node) stays Ansible's own: Mitogen's asks `sudo` for `become` even when the control node
already runs as the become user (root, on a machine without sudo), where Ansible's skips it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

import ansible_mitogen.process
import ansible_mitogen.strategy
from ansible_mitogen.plugins.strategy.mitogen_linear import StrategyModule as MitogenLinear

ansible_mitogen.strategy.REDIRECTED_CONNECTION_PLUGINS = tuple(
    name for name in ansible_mitogen.strategy.REDIRECTED_CONNECTION_PLUGINS if name != "local"
)

# How long Ansible and Mitogen get to stop on their own after a Ctrl-C (Ansible's own clean-up
# of its workers polls for up to a few seconds), then how long after the multiplexers are killed.
STOP_GRACE_S = 15.0
MUX_EXIT_GRACE_S = 5.0
# ansible-playbook's exit status for a run the user interrupted (ansible.cli).
INTERRUPTED_STATUS = 99

_watchdog_started = threading.Event()


def _multiplexer_pids() -> list[int]:
    """The PIDs of Mitogen's multiplexer processes, children of this process."""
    model = ansible_mitogen.process._classic_worker_model
    return [mux.pid for mux in getattr(model, "_muxes", None) or () if getattr(mux, "pid", None)]


def _stop_late_exit() -> None:
    time.sleep(STOP_GRACE_S)
    pids = _multiplexer_pids()
    sys.stderr.write(
        f"streamlab: ansible-playbook had not stopped {STOP_GRACE_S:.0f} s after Ctrl-C; killing "
        f"Mitogen's multiplexer processes {pids}. What the run started on the hosts is stopped "
        "by the next experiment or by playbooks/teardown.yml.\n"
    )
    sys.stderr.flush()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(MUX_EXIT_GRACE_S)
    sys.stderr.write(f"streamlab: still not stopped; exiting with status {INTERRUPTED_STATUS}.\n")
    sys.stderr.flush()
    os._exit(INTERRUPTED_STATUS)


def _arm_stop_deadline() -> None:
    """Chain a handler before the current SIGINT handler (Ansible's task queue manager's, which
    passes the signal on to its workers and raises KeyboardInterrupt) that starts the watchdog
    once, in this process only (forked workers install handlers of their own)."""
    previous = signal.getsignal(signal.SIGINT)
    if getattr(previous, "streamlab_stop_deadline", False):
        return
    owner = os.getpid()

    def on_interrupt(signum, frame):  # noqa: ANN001, ANN202 (signal handler signature)
        if os.getpid() == owner and not _watchdog_started.is_set():
            _watchdog_started.set()
            threading.Thread(target=_stop_late_exit, name="stop-deadline", daemon=True).start()
        if callable(previous):
            return previous(signum, frame)
        if previous == signal.SIG_IGN:
            return None
        raise KeyboardInterrupt

    on_interrupt.streamlab_stop_deadline = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, on_interrupt)


class StrategyModule(MitogenLinear):
    def run(self, iterator, play_context, result=0):  # noqa: ANN001, ANN201 (Ansible's API)
        if threading.current_thread() is threading.main_thread():
            _arm_stop_deadline()
        return super().run(iterator, play_context, result)


__all__ = ["StrategyModule"]
