#!/usr/bin/env python3
"""Inject faults on this host on a schedule, each undone by a reverter armed before it starts.

Runs on the target host with its own Python (3.9 or later, standard library only), as root.

  streamlab_fault.py check SPEC.json      can the fault be applied here now? (changes nothing)
  streamlab_fault.py schedule SPEC.json   start the schedule in the background; prints its pid
  streamlab_fault.py records SPEC.json [--wait-s S]
                                          the schedule's fault records (times on the driver clock)
  streamlab_fault.py recover STATE_DIR --address A --supervisorctl CTL --supervisor-conf CONF
                                          cancel every schedule, undo every fault the kit applies

A schedule is `count` occurrences, the first at `first_at_ms` (driver clock; 0: now), one every
`every_ms`, each lasting `duration_ms`. For each occurrence the schedule first starts a reverter
(its own session, so it outlives the schedule, the SSH session and the control node), which
sleeps until the end and undoes the fault; only then is the fault applied. Every step appends
an event to STATE_DIR/<id>.events.jsonl; `records` merges them.

Actions (the fault types in roles/fault/tasks/types/ choose one):
  kill_group     SIGKILL the process group of supervisord programs; undo: start them again
  stop_programs  stop supervisord programs in order; undo: start them again
  pause_group    SIGSTOP the process group of supervisord programs; undo: SIGCONT
  kill_matching  SIGKILL the processes of this host whose command line holds every `match`
                 string; undo: none (the engine restarts them): waits for new ones and notes them
  partition      drop every packet in and out of the cluster interface (nftables table
                 streamlab_fault); undo: delete the table
  delay          delay with jitter of every packet the cluster interface sends: a tc netem root
                 qdisc (handle 5e1a:), or, on a kernel without sch_netem, an iptables NFQUEUE rule
                 (comment streamlab_fault) whose packets streamlab_delay.py holds; undo: delete
                 the qdisc, or the rule and the delayer

Exit codes: 0 done, 1 the fault cannot be applied (the message says why), 64 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NFT_TABLE = "streamlab_fault"
NETEM_HANDLE = "5e1a:"
DELAY_QUEUE = 5157
KIT_COMMENT = "streamlab_fault"
DELAYER = Path(__file__).resolve().with_name("streamlab_delay.py")
DELAYER_READY_S = 5.0
WORKER_WAIT_STEP_S = 0.5
ACTIONS = ("kill_group", "stop_programs", "pause_group", "kill_matching", "partition", "delay")
Spec = dict[str, Any]


class FaultError(Exception):
    """The fault cannot be applied or undone; the message names the cause."""


def now_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def sleep_until_ms(when_ms: int) -> None:
    while True:
        left = when_ms - now_ms()
        if left <= 0:
            return
        time.sleep(min(left / 1000.0, 1.0))


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and done.returncode != 0:
        raise FaultError(f"{' '.join(argv)} failed ({done.returncode}): {done.stdout.strip()}")
    return done


# ------------------------------------------------------------------ processes of this host


def own_netns() -> str | None:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def on_this_host(pid: int, netns: str | None) -> bool:
    """True when pid lives in this host's network namespace (test hosts share one PID space)."""
    if netns is None:
        return True
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == netns
    except OSError:
        return False


def all_pids() -> list[int]:
    """Every process id, from /proc (empty where there is none, as on macOS: the group is
    still signalled, only the record of its members is empty)."""
    if not os.path.isdir("/proc"):
        return []
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def command_line(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def process_group(pgid: int, netns: str | None) -> list[int]:
    members = []
    for pid in all_pids():
        try:
            if os.getpgid(pid) == pgid and on_this_host(pid, netns):
                members.append(pid)
        except OSError:
            continue
    return sorted(members)


def is_kit_process(pid: int) -> bool:
    """The agent's own processes: schedules, reverters and delayers."""
    line = command_line(pid)
    return "streamlab_fault.py" in line or "streamlab_delay.py" in line


def matching_processes(match: list[str], netns: str | None) -> list[int]:
    me = os.getpid()
    found = []
    for pid in all_pids():
        if pid == me or not on_this_host(pid, netns):
            continue
        line = command_line(pid)
        if line and all(part in line for part in match) and "streamlab_fault" not in line:
            found.append(pid)
    return sorted(found)


# ------------------------------------------------------------------ supervisord programs


class Programs:
    """The supervisord programs of this host, through its supervisorctl."""

    def __init__(self, supervisorctl: list[str]) -> None:
        if not supervisorctl:
            raise FaultError("no supervisorctl command given")
        self.supervisorctl = supervisorctl

    def pid(self, program: str) -> int:
        done = run([*self.supervisorctl, "pid", program], check=False)
        text = done.stdout.strip()
        if not text.isdigit() or int(text) == 0:
            raise FaultError(
                f"{program} is not running here (supervisorctl pid: {text or done.returncode})"
            )
        return int(text)

    def running(self, program: str) -> bool:
        text = run([*self.supervisorctl, "pid", program], check=False).stdout.strip()
        return text.isdigit() and int(text) > 0

    def start(self, programs: list[str]) -> dict[str, str]:
        """Start the programs at once (one supervisorctl each, in parallel, as when a machine
        boots; one request would start them one after the other): name -> answer."""
        running = [
            (name, subprocess.Popen(
                [*self.supervisorctl, "start", name],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            ))
            for name in programs
        ]  # fmt: skip
        answers, failed = {}, {}
        for name, child in running:
            text = child.communicate()[0].strip()
            answer = text.split(": ", 1)[1] if text.startswith(f"{name}: ") else text
            answers[name] = answer
            if "started" not in answer:
                failed[name] = answer
        if failed:
            raise FaultError(f"supervisorctl start: {failed}")
        return answers

    def stop(self, program: str) -> str:
        return run([*self.supervisorctl, "stop", program]).stdout.strip()

    def autostarted_not_running(self) -> list[str]:
        """Programs supervisord starts on its own (autostart) that are not running now."""
        avail = run([*self.supervisorctl, "avail"]).stdout.splitlines()
        wanted = [
            line.split()[0] for line in avail if len(line.split()) > 3 and line.split()[3] == "auto"
        ]
        status = run([*self.supervisorctl, "status"], check=False).stdout.splitlines()
        state = {line.split()[0]: line.split()[1] for line in status if len(line.split()) > 1}
        return [name for name in wanted if state.get(name) not in ("RUNNING", "STARTING")]


# ------------------------------------------------------------------ the actions


def interface_of(address: str) -> str:
    """The interface that holds address (the host's cluster interface)."""
    if not address:
        return ""
    shown = run([need_tool("ip"), "-o", "addr", "show"], check=False).stdout
    for line in shown.splitlines():
        fields = line.split()
        if (
            len(fields) > 3
            and fields[2] in ("inet", "inet6")
            and fields[3].split("/")[0] == address
        ):
            return fields[1].split("@")[0]
    raise FaultError(f"no interface of this host holds the cluster address {address}")


def interface_exists(iface: str) -> bool:
    return Path(f"/sys/class/net/{iface}").exists()


def find_tool(name: str) -> str | None:
    """The path of a system tool, also where sbin is not on PATH (an SSH session's PATH)."""
    candidates = (Path("/usr/sbin") / name, Path("/sbin") / name)
    return shutil.which(name) or next((str(p) for p in candidates if p.exists()), None)


def has_tool(name: str) -> bool:
    return find_tool(name) is not None


def need_tool(name: str) -> str:
    path = find_tool(name)
    if path is None:
        raise FaultError(
            f"'{name}' is not installed on this host: install its package (the common role "
            "installs ip, tc and nft on Linux hosts, and iptables on Debian ones)"
        )
    return path


def netem_installed(iface: str) -> bool:
    shown = run([need_tool("tc"), "qdisc", "show", "dev", iface, "root"], check=False).stdout
    return f"qdisc netem {NETEM_HANDLE}" in shown


def foreign_root_qdisc(iface: str) -> str | None:
    """A root qdisc on iface that someone else added (the kit would replace it), if any."""
    shown = run(
        [need_tool("tc"), "qdisc", "show", "dev", iface, "root"], check=False
    ).stdout.strip()
    first = shown.splitlines()[0] if shown else ""
    kind = first.split()[1] if len(first.split()) > 1 else ""
    if (
        not first
        or kind in ("noqueue", "pfifo_fast", "fq_codel", "mq", "fq")
        or NETEM_HANDLE in first
    ):
        return None
    return first


def kept_ssh(keep_ssh: Spec | None) -> tuple[str, str, int] | None:
    """(nft family, address, port) of the connection a partition keeps open, or None. An IPv4
    address in IPv6 form (a dual-stack sshd's ::ffff:a.b.c.d) is the IPv4 one."""
    if not keep_ssh:
        return None
    text = str(keep_ssh.get("address") or "").removeprefix("::ffff:")
    try:
        address = ipaddress.ip_address(text)
        port = int(keep_ssh.get("port") or 0)
    except ValueError as error:
        raise FaultError(f"keep_ssh {keep_ssh!r} is not an address and a port: {error}") from None
    if "%" in text:
        raise FaultError(f"keep_ssh address {text} has a zone, which nftables cannot match")
    if not 0 < port < 65536:
        raise FaultError(f"keep_ssh port {port} is not a TCP port")
    return ("ip6" if address.version == 6 else "ip"), str(address), port


def nft_partition_ruleset(iface: str, keep_ssh: Spec | None = None) -> str:
    """An nftables table that drops every packet in and out of iface (loopback is untouched),
    except, with keep_ssh ({"address", "port"}), the control node's SSH connection to this host,
    so that Ansible still reaches a partitioned host (over IPv6 with the neighbour discovery it
    needs)."""
    kept = {"input": "", "output": ""}
    found = kept_ssh(keep_ssh)
    if found:
        family, address, port = found
        kept["input"] = f'iifname "{iface}" {family} saddr {address} tcp dport {port} accept; '
        kept["output"] = f'oifname "{iface}" {family} daddr {address} tcp sport {port} accept; '
        if family == "ip6":
            nd = "icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept; "
            kept["input"] += f'iifname "{iface}" {nd}'
            kept["output"] += f'oifname "{iface}" {nd}'

    def chain(hook: str, side: str) -> str:
        rule = f'{kept[hook]}{side} "{iface}" drop;'
        return (
            f"  chain {hook} {{ type filter hook {hook} priority -300; policy accept; {rule} }}\n"
        )

    return f"table inet {NFT_TABLE} {{\n{chain('input', 'iifname')}{chain('output', 'oifname')}}}\n"


def kernel_has(option: str, module: str) -> bool:
    """False when the running kernel says it was built without option (and has no module)."""
    config = Path("/proc/config.gz")
    if not config.exists():
        return True  # no way to tell: the tool will say so if it is missing
    text = gzip.decompress(config.read_bytes()).decode(errors="replace")
    if f"CONFIG_{option}=y" in text:
        return True
    return f"CONFIG_{option}=m" in text and bool(
        list(Path("/lib/modules").glob(f"{os.uname().release}/**/{module}.ko*"))
    )


def kernel_has_netem() -> bool:
    return kernel_has("NET_SCH_NETEM", "sch_netem")


def nfqueue_delay_rule(iface: str) -> list[str]:
    """The iptables rule (after -I/-D) that queues the interface's outgoing packets."""
    return [
        "POSTROUTING", "-o", iface, "-m", "comment", "--comment", KIT_COMMENT,
        "-j", "NFQUEUE", "--queue-num", str(DELAY_QUEUE), "--queue-bypass",
    ]  # fmt: skip


def nfqueue_rules() -> list[list[str]]:
    """The kit's NFQUEUE rules in place, each as the arguments that delete it."""
    if not has_tool("iptables"):
        return []
    shown = run([need_tool("iptables"), "-t", "mangle", "-S", "POSTROUTING"], check=False).stdout
    return [
        ["-D", *line.split()[1:]]
        for line in shown.splitlines()
        if line.startswith("-A ") and KIT_COMMENT in line
    ]


def remove_nfqueue_rules() -> int:
    rules = nfqueue_rules()
    for rule in rules:
        run([need_tool("iptables"), "-t", "mangle", *[r.strip('"') for r in rule]])
    return len(rules)


def partition_installed() -> bool:
    return run([need_tool("nft"), "list", "table", "inet", NFT_TABLE], check=False).returncode == 0


class Fault:
    """One action with its parameters; apply() and undo() return details for the record."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.action = spec["action"]
        self.programs_list: list[str] = list(spec.get("programs") or [])
        self.match: list[str] = list(spec.get("match") or [])
        self.address: str = spec.get("address") or ""
        self.netns = own_netns()
        self._programs: Programs | None = None
        self._iface: str | None = None

    @property
    def iface(self) -> str:
        if self._iface is None:
            self._iface = interface_of(self.address)
        return self._iface

    @property
    def programs(self) -> Programs:
        if self._programs is None:
            self._programs = Programs(list(self.spec.get("supervisorctl") or []))
        return self._programs

    def acting_programs(self) -> list[str]:
        """The programs to act on: all given ones, or (only_running) those running now."""
        if not self.programs_list:
            raise FaultError(f"{self.action} needs at least one program")
        if not self.spec.get("only_running"):
            return self.programs_list
        running = [p for p in self.programs_list if self.programs.running(p)]
        if not running:
            raise FaultError(f"none of {', '.join(self.programs_list)} runs on this host")
        return running

    def check(self) -> dict[str, Any]:
        """Raise FaultError when the fault cannot be applied here, else say what it would hit."""
        if self.action in ("kill_group", "stop_programs", "pause_group"):
            return {"pids": {p: self.programs.pid(p) for p in self.acting_programs()}}
        if self.action == "kill_matching":
            pids = matching_processes(self.match, self.netns)
            if not pids:
                raise FaultError(
                    f"no process on this host has {' and '.join(self.match)} in its command line"
                )
            return {"pids": pids}
        if not sys.platform.startswith("linux"):
            raise FaultError(
                f"network faults need Linux (nftables, tc or iptables); this host is {sys.platform}"
            )
        if not interface_exists(self.iface):
            raise FaultError(f"this host has no interface {self.iface!r}")
        if self.action == "partition":
            need_tool("nft")
            if partition_installed():
                raise FaultError(
                    f"a partition is already in place (nftables table inet {NFT_TABLE})"
                )
            ruleset = nft_partition_ruleset(self.iface, self.spec.get("keep_ssh"))
            tried = subprocess.run(
                [need_tool("nft"), "-c", "-f", "-"],
                input=ruleset,
                capture_output=True,
                text=True,
                check=False,
            )
            if tried.returncode != 0:
                raise FaultError(f"nft would refuse the partition rules: {tried.stderr.strip()}")
            return {"iface": self.iface}
        if not kernel_has_netem():
            if not kernel_has("NETFILTER_XT_TARGET_NFQUEUE", "xt_NFQUEUE"):
                raise FaultError(
                    "this host's kernel has neither the netem queueing discipline (sch_netem) nor"
                    " the NFQUEUE target, so no delay can be added here: load sch_netem"
                )
            need_tool("iptables")
            if nfqueue_rules():
                raise FaultError(f"a delay is already in place (iptables rule {KIT_COMMENT})")
            return {"iface": self.iface, "method": "nfqueue"}
        need_tool("tc")
        foreign = foreign_root_qdisc(self.iface)
        if foreign:
            raise FaultError(
                f"{self.iface} has a root qdisc the kit did not add ({foreign}); remove it first"
            )
        if netem_installed(self.iface):
            raise FaultError(f"a netem delay is already in place on {self.iface}")
        return {"iface": self.iface, "method": "netem"}

    def start_delayer(self, delay: int, jitter: int) -> int:
        """Start streamlab_delay.py on the delay queue; return its pid once it is bound."""
        state_dir = Path(self.spec["state_dir"])
        ready = state_dir / f"{self.spec['id']}.delay.ready"
        ready.unlink(missing_ok=True)
        argv = [sys.executable, str(DELAYER), "--queue", str(DELAY_QUEUE), "--delay-ms", str(delay)]
        argv += ["--jitter-ms", str(jitter), "--ready", str(ready)]
        log = state_dir / f"{self.spec['id']}.delay.log"
        pid = detach(argv, log)
        pid_file(self.spec, "delayer").write_text(str(pid))
        deadline = time.monotonic() + DELAYER_READY_S
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not ready.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            raise FaultError(f"the delayer did not bind its queue: {log.read_text()[-400:]}")
        return pid

    def signal_groups(self, sig: int) -> tuple[dict[str, list[int]], dict[str, int]]:
        """Send sig to the process group of each program acted on: its members, and its pgid."""
        members, pgids = {}, {}
        for program in self.acting_programs():
            pgid = os.getpgid(self.programs.pid(program))
            members[program], pgids[program] = process_group(pgid, self.netns), pgid
            os.killpg(pgid, sig)
        return members, pgids

    def apply(self) -> dict[str, Any]:
        if self.action == "kill_group":
            killed, _ = self.signal_groups(signal.SIGKILL)
            return {"signal": "KILL", "programs": list(killed), "pids": killed}
        if self.action == "stop_programs":
            programs = self.acting_programs()
            pids = {
                p: process_group(os.getpgid(self.programs.pid(p)), self.netns) for p in programs
            }
            for program in programs:
                self.programs.stop(program)
            return {"programs": programs, "pids": pids}
        if self.action == "pause_group":
            paused, pgids = self.signal_groups(signal.SIGSTOP)
            return {"signal": "STOP", "pids": paused, "pgids": pgids}
        if self.action == "kill_matching":
            pids = matching_processes(self.match, self.netns)
            if not pids:
                raise FaultError(
                    f"no process on this host has {' and '.join(self.match)} in its command line"
                )
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return {"signal": "KILL", "pids": pids}
        if self.action == "partition":
            ruleset = nft_partition_ruleset(self.iface, self.spec.get("keep_ssh"))
            done = subprocess.run(
                [need_tool("nft"), "-f", "-"],
                input=ruleset,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            if done.returncode != 0:
                raise FaultError(f"nft refused the partition rules: {done.stdout.strip()}")
            kept = kept_ssh(self.spec.get("keep_ssh"))
            return {
                "iface": self.iface,
                "nft_table": f"inet {NFT_TABLE}",
                "kept_open": f"SSH from {kept[1]} to port {kept[2]}" if kept else "nothing",
            }
        delay, jitter = int(self.spec.get("delay_ms") or 0), int(self.spec.get("jitter_ms") or 0)
        if not kernel_has_netem():
            pid = self.start_delayer(delay, jitter)
            run([need_tool("iptables"), "-t", "mangle", "-I", *nfqueue_delay_rule(self.iface)])
            return {
                "iface": self.iface,
                "delay_ms": delay,
                "jitter_ms": jitter,
                "method": "nfqueue",
                "delayer_pid": pid,
            }
        argv = [
            need_tool("tc"),
            "qdisc",
            "add",
            "dev",
            self.iface,
            "root",
            "handle",
            NETEM_HANDLE,
            "netem",
            "delay",
            f"{delay}ms",
        ]
        if jitter:
            argv.append(f"{jitter}ms")
        run(argv)
        return {"iface": self.iface, "delay_ms": delay, "jitter_ms": jitter, "method": "netem"}

    def undo(self, applied: dict[str, Any], end_monotonic_ms: int) -> dict[str, Any]:
        if self.action in ("kill_group", "stop_programs"):
            programs = applied.get("programs") or self.programs_list
            return {"started": self.programs.start(list(programs))}
        if self.action == "pause_group":
            resumed = []
            pgids = applied.get("pgids") or {  # not recorded (the schedule died): look them up
                p: os.getpgid(self.programs.pid(p))
                for p in self.programs_list
                if self.programs.running(p)
            }
            for pgid in pgids.values():
                try:
                    os.killpg(int(pgid), signal.SIGCONT)
                    resumed.append(int(pgid))
                except ProcessLookupError:
                    pass
            return {"resumed_pgids": resumed}
        if self.action == "kill_matching":
            # The engine restarts them: note when new ones appeared (up to the fault's end).
            before = set(applied.get("pids") or [])
            while True:
                fresh = [p for p in matching_processes(self.match, self.netns) if p not in before]
                if fresh or monotonic_ms() >= end_monotonic_ms:
                    return {"restarted": bool(fresh), "new_pids": fresh}
                time.sleep(WORKER_WAIT_STEP_S)
        if self.action == "partition":
            if partition_installed():
                run([need_tool("nft"), "delete", "table", "inet", NFT_TABLE])
            return {"nft_table_removed": True}
        # Whichever way the delay was added (also when the schedule died before recording it).
        removed = remove_nfqueue_rules()
        pid = int(applied.get("delayer_pid") or 0)
        recorded = pid_file(self.spec, "delayer")
        if not pid and recorded.exists():
            pid = int(recorded.read_text().strip() or 0)
        if pid and "streamlab_delay" in command_line(pid):
            os.kill(pid, signal.SIGTERM)  # it lets the packets it holds go, then exits
            deadline = time.monotonic() + DELAYER_READY_S
            while "streamlab_delay" in command_line(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        recorded.unlink(missing_ok=True)
        netem = has_tool("tc") and netem_installed(self.iface)
        if netem:
            run(
                [need_tool("tc"), "qdisc", "del", "dev", self.iface, "root", "handle", NETEM_HANDLE]
            )
        return {
            "nfqueue_rules_removed": removed,
            "delayer_stopped": pid or None,
            "netem_removed": netem,
        }


# ------------------------------------------------------------------ the schedule


class Events:
    """STATE_DIR/<id>.events.jsonl: one JSON object a line, appended and flushed at once."""

    def __init__(self, state_dir: Path, schedule_id: str) -> None:
        self.path = state_dir / f"{schedule_id}.events.jsonl"

    def append(self, **event: Any) -> None:
        line = json.dumps({"t_ms": now_ms(), **event}, sort_keys=True) + "\n"
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        events = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a crash while it was written
        return events


def occurrence_times(spec: Spec) -> list[int]:
    """Host-clock start of each occurrence: the driver-clock schedule plus this host's offset."""
    offset = int(round(float(spec.get("clock_offset_ms") or 0)))
    first = int(spec["first_at_ms"]) + offset
    return [first + k * int(spec.get("every_ms") or 0) for k in range(int(spec.get("count") or 1))]


def load_spec(path: str) -> Spec:
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    for key in ("id", "fault", "action", "first_at_ms", "duration_ms", "state_dir"):
        if key not in spec:
            raise FaultError(f"the fault spec {path} has no {key!r}")
    if spec["action"] not in ACTIONS:
        raise FaultError(f"unknown action {spec['action']!r}; known: {', '.join(ACTIONS)}")
    if not re.match(r"^[A-Za-z0-9._-]+$", str(spec["id"])):
        raise FaultError(f"bad schedule id {spec['id']!r}")
    return spec


def pid_file(spec: Spec, role: str, k: int = 0) -> Path:
    return Path(spec["state_dir"]) / f"{spec['id']}.{role}{k}.pid"


def detach(argv: list[str], log: Path) -> int:
    """Start argv in a session of its own with no terminal and return its pid."""
    with open(log, "ab") as out:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return child.pid


def run_schedule(spec_path: str) -> int:
    """The schedule itself (in the background): arm, apply, wait for the reverter; repeat."""
    spec = load_spec(spec_path)
    events = Events(Path(spec["state_dir"]), spec["id"])
    fault = Fault(spec)
    duration = int(spec["duration_ms"])
    for k, at_ms in enumerate(occurrence_times(spec)):
        sleep_until_ms(at_ms)
        # The fault's clock starts here, before the undo is armed, so it lasts at least duration.
        # Its length is kept on the monotonic clock (shared by every process of the host), which
        # no clock step moves; end_at, on the wall clock, is only recorded.
        start = now_ms()
        end_at = start + duration
        end_at_monotonic_ms = monotonic_ms() + duration
        reverter = subprocess.Popen(
            [
                *(sys.executable, os.path.abspath(__file__), "_revert", spec_path, str(k)),
                *(str(end_at), str(end_at_monotonic_ms)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        pid_file(spec, "reverter", k).write_text(str(reverter.pid))
        events.append(event="armed", k=k, reverter_pid=reverter.pid, revert_at_ms=end_at)
        try:
            details = fault.apply()
        except (FaultError, OSError) as error:
            # Part of it may have been applied (one daemon of two killed): the reverter sees the
            # failure and undoes at once.
            events.append(event="failed", k=k, start_ms=start, error=str(error))
            reverter.wait()
            continue
        events.append(event="applied", k=k, start_ms=start, applied_ms=now_ms(), details=details)
        reverter.wait()
    events.append(event="done")
    pid_file(spec, "schedule").unlink(missing_ok=True)
    return 0


def run_reverter(spec_path: str, k: int, end_at_monotonic_ms: int) -> int:
    """Sleep until the fault's end (on the monotonic clock), then undo it (whatever happened to
    the schedule)."""
    spec = load_spec(spec_path)
    events = Events(Path(spec["state_dir"]), spec["id"])
    stopped = {"now": False}

    def undo_now(_signum: int, _frame: Any) -> None:
        stopped["now"] = True

    signal.signal(signal.SIGTERM, undo_now)  # undo at once
    while not stopped["now"] and monotonic_ms() < end_at_monotonic_ms:
        time.sleep(min(max(end_at_monotonic_ms - monotonic_ms(), 1) / 1000.0, 0.2))
        if any(e.get("event") == "failed" and e.get("k") == k for e in events.read()):
            break  # the apply failed, maybe part way: undo what it did now
    applied = next(
        (
            e.get("details") or {}
            for e in events.read()
            if e.get("event") == "applied" and e.get("k") == k
        ),
        {},
    )
    begun = now_ms()
    try:
        details = Fault(spec).undo(applied, end_at_monotonic_ms)
        events.append(
            event="reverted", k=k, revert_begun_ms=begun, end_ms=now_ms(), details=details
        )
    except (FaultError, OSError) as error:
        events.append(
            event="revert_failed", k=k, revert_begun_ms=begun, end_ms=now_ms(), error=str(error)
        )
        return 1
    finally:
        pid_file(spec, "reverter", k).unlink(missing_ok=True)
    return 0


def records(spec: Spec) -> dict[str, Any]:
    """Merge the events into one record per occurrence, times converted to the driver clock."""
    offset = float(spec.get("clock_offset_ms") or 0)

    def driver(ms: int | None) -> int | None:
        return None if ms is None else int(round(ms - offset))

    events = Events(Path(spec["state_dir"]), spec["id"]).read()
    merged: list[dict[str, Any]] = []
    for k, at_ms in enumerate(occurrence_times(spec)):
        mine = {e["event"]: e for e in events if e.get("k") == k}
        if not mine:
            continue
        applied, ended = mine.get("applied"), mine.get("reverted") or mine.get("revert_failed")
        record: dict[str, Any] = {
            "fault": spec["fault"],
            "host": spec.get("host"),
            "occurrence": k + 1,
            "start_ms": driver(applied["start_ms"]) if applied else None,
            "end_ms": driver(ended["end_ms"]) if ended else None,
            "scheduled_ms": driver(at_ms),
            "late_ms": applied["start_ms"] - at_ms if applied else None,
            "host_start_ms": applied["start_ms"] if applied else None,
            "host_end_ms": ended["end_ms"] if ended else None,
            "clock_offset_ms": spec.get("clock_offset_ms"),
            "action": spec["action"],
            "daemons": spec.get("programs") or [],
            "duration_s": int(spec["duration_ms"]) / 1000.0,
            "parameters": spec.get("parameters") or {},
            "applied": applied["details"] if applied else None,
            "reverted": ended.get("details") if ended else None,
        }
        if ended:
            record["revert_begun_ms"] = driver(ended.get("revert_begun_ms"))
        errors = [mine[e]["error"] for e in ("failed", "revert_failed") if e in mine]
        if errors:
            record["error"] = "; ".join(errors)
        merged.append(record)
    done = any(e.get("event") == "done" for e in events)
    return {"done": done, "records": merged}


# ------------------------------------------------------------------ recovery


def recover(state_dir: Path, iface: str, supervisorctl: list[str]) -> dict[str, Any]:
    """Cancel pending schedules, undo every kind of fault the kit applies, restart daemons."""
    repaired: list[str] = []
    netns = own_netns()
    # A schedule that ends on its own removes its pid file: one may go at any moment here.
    for pid_path in sorted(state_dir.glob("*.pid")) if state_dir.is_dir() else []:
        try:
            pid = int(pid_path.read_text().strip())
        except FileNotFoundError:
            continue
        except ValueError:
            pid = 0
        if pid and on_this_host(pid, netns) and is_kit_process(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                repaired.append(f"cancelled {pid_path.name.split('.')[-2]} (pid {pid})")
            except ProcessLookupError:
                pass
        pid_path.unlink(missing_ok=True)
    for pid in all_pids():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        state = stat.rsplit(")", 1)[-1].split()[0]
        if state == "T" and on_this_host(pid, netns) and "/streamlab" in command_line(pid):
            os.kill(pid, signal.SIGCONT)
            repaired.append(f"resumed stopped process {pid}")
    removed = remove_nfqueue_rules()
    if removed:
        repaired.append(f"removed {removed} iptables NFQUEUE delay rule(s)")
    if has_tool("nft") and partition_installed():
        run([need_tool("nft"), "delete", "table", "inet", NFT_TABLE])
        repaired.append(f"removed the nftables table inet {NFT_TABLE}")
    if iface and interface_exists(iface) and has_tool("tc") and netem_installed(iface):
        run([need_tool("tc"), "qdisc", "del", "dev", iface, "root", "handle", NETEM_HANDLE])
        repaired.append(f"removed the netem qdisc on {iface}")
    if supervisorctl:
        programs = Programs(supervisorctl)
        down = programs.autostarted_not_running()
        if down:
            programs.start(down)
            repaired.extend(f"started {program}" for program in down)
    return {"repaired": repaired}


# ------------------------------------------------------------------ command line


def start_schedule(spec_path: str, spec: Spec) -> dict[str, Any]:
    """Check the fault can be applied now, then run the schedule in a session of its own."""
    Fault(spec).check()
    if int(spec["first_at_ms"]) == 0:  # now, on the driver clock
        spec["first_at_ms"] = now_ms() - int(round(float(spec.get("clock_offset_ms") or 0)))
        Path(spec_path).write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    state_dir = Path(spec["state_dir"])
    pid = detach(
        [sys.executable, os.path.abspath(__file__), "_schedule", spec_path],
        state_dir / f"{spec['id']}.log",
    )
    pid_file(spec, "schedule").write_text(str(pid))
    return {"schedule_pid": pid, "events": str(Events(state_dir, spec["id"]).path)}


def wait_for_records(spec: Spec, wait_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    while not records(spec)["done"] and time.monotonic() < deadline:
        time.sleep(0.5)
    return records(spec)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # _revert SPEC K END_WALL_MS END_MONOTONIC_MS: the wall-clock end shows in `ps`; the
    # monotonic one is waited for.
    if args[:1] == ["_revert"] and len(args) == 5:
        return run_reverter(args[1], int(args[2]), int(args[4]))
    if args[:1] == ["_revert"] and len(args) == 4:
        # Started by a schedule of an earlier agent (the file is rewritten at every fault
        # start), which gave the wall-clock end only: the time left to it, from now.
        return run_reverter(args[1], int(args[2]), monotonic_ms() + int(args[3]) - now_ms())
    if args[:1] == ["_schedule"] and len(args) == 2:
        return run_schedule(args[1])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("check", "schedule", "records"):
        one = sub.add_parser(name)
        one.add_argument("spec")
        if name == "records":
            one.add_argument("--wait-s", type=float, default=0.0)
    rec = sub.add_parser("recover")
    rec.add_argument("state_dir")
    rec.add_argument("--address", default="", help="the host's cluster address")
    rec.add_argument("--supervisorctl", default="", help="this host's supervisorctl")
    rec.add_argument("--supervisor-conf", default="", help="its supervisord.conf")
    options = parser.parse_args(args)
    try:
        if options.command == "recover":
            supervisorctl = [options.supervisorctl, "-c", options.supervisor_conf]
            answer = recover(
                Path(options.state_dir),
                interface_of(options.address),
                supervisorctl if options.supervisorctl else [],
            )
        else:
            spec = load_spec(options.spec)
            if options.command == "check":
                answer = Fault(spec).check()
            elif options.command == "schedule":
                answer = start_schedule(options.spec, spec)
            else:
                answer = wait_for_records(spec, options.wait_s)
    except FaultError as error:
        print(json.dumps({"error": str(error)}))
        return 1
    print(json.dumps(answer, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
