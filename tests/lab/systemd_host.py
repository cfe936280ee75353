"""A Debian test host booted with systemd under systemd-nspawn (the lab's systemd host).

The machine's PID 1 need not be systemd: the host is a debootstrapped Debian root file system
(built once and cached under CACHE_DIR), seen by each instance through an overlayfs mount whose
upper layer is the instance's own "disk", and booted with ``systemd-nspawn -b`` on a lab bridge.

Lifecycle, as testhosts.py drives it::

    ensure_tools()
    rootfs = ensure_rootfs(recipe)                # cached; rebuilt only when recipe.key changes
    create_instance(instance, rootfs)             # overlay mount (idempotent)
    prepare_instance(instance, ...)               # hostname, address, keys; PREPARED stamp last
    boot(instance, bridge=..., log_file=...)      # detached systemd-nspawn
    wait_booted(instance, timeout)                # `systemctl is-system-running` says running
    reboot(...) / poweroff(...) / kill_instance(...)
    remove_instance(instance)                     # never touches the cached rootfs

No system bus is needed on the machine: nspawn runs with ``--register=no --keep-unit``, and
commands reach the host with ``nsenter -t <its PID 1> -a`` (see nsenter_cmd), not machinectl.

What callers should know:

- Network: nspawn's ``--network-bridge`` makes the veth ``vb-<name>`` on the bridge and
  ``host0`` inside. systemd-networkd (enabled by prepare_instance) gives host0 the static
  address and pins its MAC (``[Link] MACAddress=``); the vb- side's MAC is derived by nspawn
  from the machine name, so it is stable too. No DHCP, no IPv6 link-local address.
- SSH host keys are the instance's own, made by prepare_instance under
  ``<root_dir>/merged/etc/ssh`` (kept in the overlay's upper layer, so they survive reboots
  and re-preparing, and change only when the instance is removed): see host_public_key.
- The cached rootfs has no apt lists: packages the host needs must be in its Recipe (the
  host's network has no route to a mirror).
- Exit status of nspawn: 133 when the host rebooted, 0 when it powered off; reboot() starts it
  again itself (nothing restarts nspawn on this machine).
- Each instance's nspawn runs in its own cgroup (CGROUP_PARENT); the host gets no resource
  limits there (the machine's cgroup v1 controllers are not delegated).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import processes
from labutil import CLEAN_ENV, LabError, log, run, services_not_started, write_if_changed

CACHE_DIR = Path("/var/cache/streamlab-lab")

# Bump when the way a root file system is built changes (steps in ensure_rootfs), so that
# cached ones built the old way are replaced.
RECIPE_VERSION = 1

# Enough for systemd as PID 1, sshd, Ansible (python3) and systemctl/loginctl over SSH.
BASE_PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "libpam-systemd",
    "openssh-server",
    "python3",
    "iproute2",
    "netbase",
    "ca-certificates",
)

DEBOOTSTRAP_TIMEOUT = 900.0
TERM_GRACE = 10.0
APT_SOURCES = Path("/etc/apt/sources.list")
APT_SOURCES_DIR = Path("/etc/apt/sources.list.d")
MIRROR_SUITES = ("bookworm", "trixie")
# Set to a Debian mirror's URI to use it instead of the one found in apt's sources.
MIRROR_OVERRIDE = "STREAMLAB_LAB_DEBIAN_MIRROR"
NSPAWN_ENV = {**CLEAN_ENV, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"}
NSPAWN = "systemd-nspawn"
# nspawn exits with this status when the container rebooted (systemd-nspawn@.service restarts
# on it with RestartForceExitStatus=133).
NSPAWN_REBOOT_STATUS = 133
BOOT_HEADER = "--- boot "  # starts the line boot() writes to the console log

# Each instance's nspawn runs in its own cgroup <hierarchy>/CGROUP_PARENT/<name> (in the cgroup2
# hierarchy and the named "systemd" v1 one): with --keep-unit nspawn puts its "payload" and
# "supervisor" cgroups beside itself, so two instances started from one cgroup would share them.
# On a machine whose PID 1 is systemd, a transient scope (systemd-run --scope) does that instead.
CGROUP_PARENT = "streamlab-lab"
SYSTEMD_BOOTED = Path("/run/systemd/system")
NSPAWN_RUN_DIR = Path("/run/systemd/nspawn")

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,11}$")  # "vb-" + name must fit IFNAMSIZ unshortened
MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
UNIT_DIR = "usr/lib/systemd/system"

# Units enabled or masked in every instance (symlinks written by prepare_instance; no systemctl
# runs on the machine or in a chroot).
ENABLED_UNITS: tuple[tuple[str, str], ...] = (
    ("systemd-networkd.service", "multi-user.target"),
    ("systemd-networkd.socket", "sockets.target"),
)
# apt's timers would try to reach the network (the host has no route out) and run upgrades
# behind the tests' back.
MASKED_UNITS: tuple[str, ...] = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "apt-daily.service",
    "apt-daily-upgrade.service",
)
# Failed units that do not make a booted host unusable; wait_booted accepts "degraded" if only
# these failed. Empty: the instance is set up so that nothing fails.
HARMLESS_FAILED_UNITS: frozenset[str] = frozenset()

TOOLS = {
    "debootstrap": "debootstrap",
    NSPAWN: "systemd-container",
    "nsenter": "util-linux",
    "mount": "mount",
    "ssh-keygen": "openssh-client",
    "ip": "iproute2",
}


# --------------------------------------------------------------------------- recipe


@dataclass(frozen=True)
class Recipe:
    """What a cached root file system is built from: Debian suite, mirror, extra packages."""

    suite: str
    mirror: str
    packages: tuple[str, ...] = ()

    def canonical(self) -> str:
        """Canonical JSON of everything the root file system depends on."""
        return json.dumps(
            {
                "recipe_version": RECIPE_VERSION,
                "suite": self.suite,
                "mirror": self.mirror.rstrip("/"),
                "packages": self.all_packages(),
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    def all_packages(self) -> list[str]:
        """BASE_PACKAGES and the recipe's packages, sorted and deduplicated."""
        return sorted(set(BASE_PACKAGES) | set(self.packages))

    @property
    def key(self) -> str:
        """Short hash naming the cached root file system."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:16]


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (first http(s) URI of a stanza or line whose
    suites include bookworm or trixie, not a -security suite)."""
    if override := os.environ.get(MIRROR_OVERRIDE, "").strip():
        return override.rstrip("/")
    files = sorted(APT_SOURCES_DIR.glob("*.sources")) if APT_SOURCES_DIR.is_dir() else []
    for path in files:
        if mirror := _mirror_from_deb822(path.read_text(errors="replace")):
            return mirror
    one_line = [APT_SOURCES]
    if APT_SOURCES_DIR.is_dir():
        one_line += sorted(APT_SOURCES_DIR.glob("*.list"))
    for path in one_line:
        if path.is_file() and (mirror := _mirror_from_one_line(path.read_text(errors="replace"))):
            return mirror
    raise LabError(
        f"no Debian mirror found: add a 'deb' source for {' or '.join(MIRROR_SUITES)} to "
        f"{APT_SOURCES_DIR}/debian.sources (deb822: URIs: and Suites: lines) or {APT_SOURCES}, "
        f"or set {MIRROR_OVERRIDE} to a Debian mirror's URI"
    )


def _mirror_suite(suites: Sequence[str]) -> bool:
    """True if suites name a main Debian suite this kit knows (not -security)."""
    return any(s.split("-", 1)[0] in MIRROR_SUITES and not s.endswith("-security") for s in suites)


def _http_uri(uris: Sequence[str]) -> str | None:
    """First http/https URI of a Debian archive (its path ends in /debian; a third-party
    repository for the same suite does not), without a trailing slash."""
    for uri in uris:
        if uri.startswith(("http://", "https://")) and uri.rstrip("/").endswith("/debian"):
            return uri.rstrip("/")
    return None


def _mirror_from_deb822(text: str) -> str | None:
    """Mirror URI from a deb822 .sources file, or None."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        if "deb" not in fields.get("types", "").split():
            continue
        if _mirror_suite(fields.get("suites", "").split()) and (
            uri := _http_uri(fields.get("uris", "").split())
        ):
            return uri
    return None


def _mirror_from_one_line(text: str) -> str | None:
    """Mirror URI from a one-line-style sources.list, or None."""
    for line in text.splitlines():
        line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0])  # drop [options]
        parts = line.split()
        ok = len(parts) >= 3 and parts[0] == "deb" and _mirror_suite([parts[2]])
        if ok and (uri := _http_uri([parts[1]])):
            return uri
    return None


# --------------------------------------------------------------------------- machine tools


def _dpkg_state(package: str) -> tuple[str, str] | None:
    """(status abbreviation, version) of a package, None if dpkg does not know it."""
    proc = run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}\t${Version}", package], check=False)
    if proc.returncode != 0 or "\t" not in proc.stdout:
        return None
    status, version = proc.stdout.split("\t", 1)
    return status.strip(), version.strip()


def _apt_install(packages: Sequence[str]) -> None:
    """apt-get install packages on this machine without starting any service."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    with services_not_started():
        for attempt in range(2):
            proc = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
            if proc.returncode == 0:
                return
            if attempt == 0:  # stale lists: refresh once and retry
                subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
    raise LabError(
        f"{shlex.join(install)} failed; install them by hand and retry:\n"
        f"{proc.stdout[-2000:]}{proc.stderr}"
    )


def ensure_tools() -> None:
    """Install debootstrap and systemd-container (pinned to the machine's systemd version, so the
    machine's systemd is never upgraded) unless present; check the other commands used here."""
    systemd = _dpkg_state("systemd")
    if systemd is None or systemd[0] != "ii":
        raise LabError(
            "package 'systemd' is not installed on this machine: systemd-container (for "
            "systemd-nspawn) must match its version; install systemd (it need not be PID 1)"
        )
    version = systemd[1]
    wanted = []
    container = _dpkg_state("systemd-container")
    if container is None or container[0] != "ii":
        wanted.append(f"systemd-container={version}")
    elif container[1] != version:
        raise LabError(
            f"systemd-container {container[1]} does not match systemd {version}: install "
            f"systemd-container={version} (apt-get install systemd-container={version})"
        )
    debootstrap = _dpkg_state("debootstrap")
    if debootstrap is None or debootstrap[0] != "ii":
        wanted.append("debootstrap")
    if wanted:
        log(f"installing {' '.join(wanted)}")
        _apt_install(wanted)
    missing = [
        f"'{tool}' not found: apt-get install {package}"
        for tool, package in TOOLS.items()
        if shutil.which(tool, path=CLEAN_ENV["PATH"]) is None
    ]
    if missing:
        raise LabError("missing required commands:\n  " + "\n  ".join(missing))


# --------------------------------------------------------------------------- mounts


def _unescape_mount_field(field: str) -> str:
    """Undo mountinfo's octal escapes (\\040 for a space, ...)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mountinfo() -> list[tuple[str, str, str]]:
    """(mount point, fs type, super options) of every mount in this mount namespace."""
    entries = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        entries.append(
            (_unescape_mount_field(fields[4]), fields[sep + 1], _unescape_mount_field(fields[-1]))
        )
    return entries


def mounts_below(directory: Path) -> list[str]:
    """Mount points at or under directory, deepest first."""
    prefix = str(directory).rstrip("/")
    points = {p for p, _, _ in _mountinfo() if p == prefix or p.startswith(prefix + "/")}
    return sorted(points, key=lambda p: (p.count("/"), p), reverse=True)


def unmount_below(directory: Path) -> None:
    """Lazily unmount everything at or under directory; LabError if anything stays mounted, so
    that a following rmtree can never reach into a mounted file system (e.g. /dev or /proc)."""
    for _ in range(3):
        points = mounts_below(directory)
        if not points:
            return
        for point in points:
            run(["umount", "--lazy", point], check=False)
    left = mounts_below(directory)
    if left:
        raise LabError(
            f"cannot unmount {', '.join(left)}; unmount by hand (umount --lazy) and retry"
        )


def _remove_tree(directory: Path) -> None:
    """Unmount what is under directory, then delete it."""
    if not directory.exists() and not directory.is_symlink():
        return
    unmount_below(directory)
    shutil.rmtree(directory)


def _lowerdirs_in_use() -> set[str]:
    """Lower directories of every mounted overlayfs."""
    used = set()
    for _, fstype, options in _mountinfo():
        if fstype != "overlay":
            continue
        for option in options.split(","):
            if option.startswith("lowerdir="):
                used.update(option.removeprefix("lowerdir=").split(":"))
    return used


# --------------------------------------------------------------------------- root file system


def _rootfs_dir(key: str) -> Path:
    return CACHE_DIR / f"rootfs-{key}"


def _stamp(rootfs: Path) -> Path:
    """The file whose presence (written last) marks rootfs complete."""
    return rootfs.with_name(rootfs.name + ".complete")


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    """Serialise builders of the cache (two `up`s at once must not both debootstrap)."""
    CACHE_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    with (CACHE_DIR / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_rootfs(recipe: Recipe) -> Path:
    """The cached root file system for recipe, built with debootstrap if missing (once)."""
    bad = [p for p in recipe.all_packages() if not PACKAGE_RE.match(p)]
    if bad:
        raise LabError(f"not Debian package names: {', '.join(bad)}")
    if shutil.which("debootstrap", path=CLEAN_ENV["PATH"]) is None:
        raise LabError("debootstrap not found: call ensure_tools() (apt-get install debootstrap)")
    rootfs = _rootfs_dir(recipe.key)
    with _cache_lock():
        _remove_stale(keep=recipe.key)
        stamp = _stamp(rootfs)
        if rootfs.is_dir() and stamp.is_file() and stamp.read_text() == recipe.canonical():
            return rootfs
        if rootfs.exists():
            log(f"removing incomplete root file system {rootfs}")
            _remove_tree(rootfs)
        stamp.unlink(missing_ok=True)
        tmp = CACHE_DIR / f".rootfs-{recipe.key}.tmp"
        _remove_tree(tmp)
        tmp.mkdir(mode=0o755)
        started = time.monotonic()
        log(f"building Debian {recipe.suite} root file system {rootfs.name} (debootstrap)")
        try:
            _debootstrap(recipe, tmp)
            _finish_rootfs(tmp)
        except BaseException:
            _remove_tree(tmp)
            raise
        tmp.rename(rootfs)
        stamp.write_text(recipe.canonical())
        log(f"built {rootfs} in {time.monotonic() - started:.0f}s")
        return rootfs


def _remove_stale(keep: str) -> None:
    """Remove leftovers of interrupted builds, and the root file systems (with their stamps and
    debootstrap logs) of other recipes unless an overlay still uses one as its lower directory."""
    in_use = _lowerdirs_in_use()
    for entry in sorted(CACHE_DIR.glob(".rootfs-*.tmp")):
        log(f"removing interrupted build {entry}")
        _remove_tree(entry)
    kept = {keep}
    for entry in sorted(CACHE_DIR.glob("rootfs-*")):
        key = entry.name.removeprefix("rootfs-")
        if not entry.is_dir() or key == keep:
            continue
        if str(entry) in in_use:
            log(f"keeping old root file system {entry}: an instance still uses it")
            kept.add(key)
            continue
        log(f"removing old root file system {entry}")
        _remove_tree(entry)
    for entry in [*CACHE_DIR.glob("rootfs-*.complete"), *CACHE_DIR.glob("debootstrap-*.log")]:
        key = entry.name.removeprefix("rootfs-").removeprefix("debootstrap-").split(".", 1)[0]
        if key not in kept:
            entry.unlink(missing_ok=True)


def _debootstrap(recipe: Recipe, target: Path) -> None:
    """Run debootstrap into target in its own process group; on timeout or interrupt kill the
    whole group and detach what it had mounted under target."""
    log_file = CACHE_DIR / f"debootstrap-{recipe.key}.log"
    cmd = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(recipe.all_packages())}",
        recipe.suite,
        str(target),
        recipe.mirror,
    ]
    with log_file.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**CLEAN_ENV, "DEBIAN_FRONTEND": "noninteractive"},
            cwd="/",
        )
        try:
            status = proc.wait(timeout=DEBOOTSTRAP_TIMEOUT)
        except BaseException as exc:
            _kill_group(proc)
            unmount_below(target)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise LabError(
                    f"debootstrap did not finish within {DEBOOTSTRAP_TIMEOUT:.0f}s "
                    f"(log: {log_file}); check the mirror {recipe.mirror} is reachable"
                ) from exc
            raise
    if status != 0:
        inner = target / "debootstrap" / "debootstrap.log"
        detail = _tail(inner, 30) if inner.is_file() else _tail(log_file, 30)
        unmount_below(target)
        raise LabError(
            f"debootstrap of {recipe.suite} from {recipe.mirror} failed ({status}); "
            f"log: {log_file}\n{detail}"
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM then SIGKILL proc's process group, and reap proc."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=TERM_GRACE)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; kill what it may have left in its group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return


def _finish_rootfs(root: Path) -> None:
    """Make a fresh debootstrap tree a shareable lower layer: no apt lists or package caches, no
    ssh host keys and no machine-id (each instance gets its own from prepare_instance)."""
    for pattern in (
        "var/lib/apt/lists/*",
        "var/cache/apt/*.bin",
        "var/cache/apt/archives/*.deb",
        "var/cache/apt/archives/partial/*",
        "etc/ssh/ssh_host_*",
    ):
        for path in root.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    (root / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
    # Emptied here; prepare_instance writes each instance its own (left empty, systemd would
    # treat every boot as a first boot).
    (root / "etc/machine-id").write_text("")


def _tail(path: Path, lines: int) -> str:
    """Last lines of a text file ('' if unreadable)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --------------------------------------------------------------------------- instances


@dataclass(frozen=True)
class Instance:
    """One systemd host: its name (machine name, host-side veth vb-<name>) and directory."""

    name: str
    root_dir: Path

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise LabError(f"bad instance name {self.name!r}: want {NAME_RE.pattern}")

    @property
    def upper(self) -> Path:
        """Overlay upper directory: everything the host changed (its own disk)."""
        return self.root_dir / "upper"

    @property
    def work(self) -> Path:
        """Overlay work directory."""
        return self.root_dir / "work"

    @property
    def merged(self) -> Path:
        """The host's root directory (overlay mount point)."""
        return self.root_dir / "merged"

    @property
    def pid_file(self) -> Path:
        """PID of the systemd-nspawn process."""
        return self.root_dir / "nspawn.pid"

    @property
    def prepared_stamp(self) -> Path:
        """Written last by prepare_instance; holds the rootfs key."""
        return self.root_dir / "PREPARED"

    @property
    def console_log_path(self) -> Path:
        """Holds the path of the console log that boot() last wrote to."""
        return self.root_dir / "console-log-path"

    @property
    def veth(self) -> str:
        """Host-side veth that nspawn's --network-bridge creates."""
        return f"vb-{self.name}"


def _overlay_mounted(instance: Instance) -> str | None:
    """Super options of the overlay mounted on instance.merged, None if nothing is."""
    for point, fstype, options in _mountinfo():
        if point == str(instance.merged):
            return options if fstype == "overlay" else f"(not overlay: {fstype})"
    return None


def create_instance(instance: Instance, rootfs: Path) -> None:
    """Mount the overlay rootfs + upper -> merged unless already mounted."""
    for path in (instance.root_dir, rootfs):
        if any(c in str(path) for c in ",:\\ "):
            raise LabError(f"{path}: overlayfs paths must not contain ',', ':', '\\' or spaces")
    mounted = _overlay_mounted(instance)
    if mounted is not None:
        if f"lowerdir={rootfs}," in mounted + ",":
            return
        raise LabError(
            f"{instance.merged} is already mounted with other options ({mounted}); "
            f"remove the instance first (remove_instance)"
        )
    instance.root_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    instance.root_dir.chmod(0o755)
    for path in (instance.upper, instance.work, instance.merged):
        path.mkdir(mode=0o755, exist_ok=True)
    options = f"lowerdir={rootfs},upperdir={instance.upper},workdir={instance.work}"
    run(["mount", "-t", "overlay", "overlay", "-o", options, str(instance.merged)])


def _inside(instance: Instance, path: str) -> Path:
    """Path inside the host's root directory (path is absolute in the host)."""
    return instance.merged / path.lstrip("/")


def _symlink(link: Path, target: str) -> None:
    """Make link a symlink to target (replacing whatever is there)."""
    if link.is_symlink() and os.readlink(link) == target:
        return
    link.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def _in_upper(instance: Instance, path: str) -> bool:
    """True if the instance itself wrote path (it is not inherited from the rootfs)."""
    return (instance.upper / path.lstrip("/")).exists()


def prepare_instance(
    instance: Instance,
    *,
    hostname: str,
    address: str,
    prefix_len: int,
    gateway: str | None,
    mac: str,
    authorized_keys: str,
    hosts_file: str,
    rootfs_key: str,
) -> None:
    """Configure the (not running) host: name, static address and MAC on host0, root's SSH key,
    sshd settings, its own ssh host keys and machine-id; then write the PREPARED stamp."""
    if not MAC_RE.match(mac):
        raise LabError(f"bad MAC {mac!r} for {instance.name}: want lower-case aa:bb:cc:dd:ee:ff")
    if _overlay_mounted(instance) is None:
        raise LabError(f"{instance.merged} is not mounted: call create_instance first")
    if running(instance):
        raise LabError(f"{instance.name} is running: power it off before preparing it")
    instance.prepared_stamp.unlink(missing_ok=True)

    write_if_changed(_inside(instance, "/etc/hostname"), hostname + "\n")
    write_if_changed(_inside(instance, "/etc/hosts"), hosts_file)

    network = [
        "# Written by tests/lab/systemd_host.py",
        "[Match]",
        "Name=host0",
        "",
        "[Link]",
        f"MACAddress={mac}",
        "",
        "[Network]",
        f"Address={address}/{prefix_len}",
        *([f"Gateway={gateway}"] if gateway else []),
        "DHCP=no",
        "LinkLocalAddressing=no",
        "IPv6AcceptRA=no",
        "",
    ]
    net_dir = _inside(instance, "/etc/systemd/network")
    net_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    write_if_changed(net_dir / "10-host0.network", "\n".join(network))
    for unit, target in ENABLED_UNITS:
        if not _inside(instance, f"/{UNIT_DIR}/{unit}").is_file():
            raise LabError(f"{unit} missing from the root file system: rebuild it")
        link = _inside(instance, f"/etc/systemd/system/{target}.wants/{unit}")
        _symlink(link, f"/{UNIT_DIR}/{unit}")
    for unit in MASKED_UNITS:
        _symlink(_inside(instance, f"/etc/systemd/system/{unit}"), "/dev/null")

    ssh_dir = _inside(instance, "/root/.ssh")
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    ssh_dir.chmod(0o700)
    set_authorized_keys(instance, authorized_keys)
    sshd_conf = _inside(instance, "/etc/ssh/sshd_config.d/streamlab.conf")
    sshd_conf.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    write_if_changed(
        sshd_conf,
        "# Written by tests/lab/systemd_host.py\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n",
    )
    # Host keys of this instance only (the rootfs has none): generates the missing ones.
    run(["ssh-keygen", "-A", "-f", str(instance.merged)])
    if not _in_upper(instance, "/etc/machine-id") or not _machine_id(instance):
        write_if_changed(_inside(instance, "/etc/machine-id"), secrets.token_hex(16) + "\n", 0o444)
    # D-Bus reads its own copy first; Debian's dbus package wrote one into the rootfs.
    _symlink(_inside(instance, "/var/lib/dbus/machine-id"), "/etc/machine-id")

    instance.prepared_stamp.write_text(rootfs_key + "\n")


def _machine_id(instance: Instance) -> str:
    """The instance's machine-id ('' if none)."""
    try:
        return _inside(instance, "/etc/machine-id").read_text().strip()
    except OSError:
        return ""


def prepared_from(instance: Instance) -> str | None:
    """The rootfs key the instance was prepared from, None if it was not (completely)."""
    try:
        return instance.prepared_stamp.read_text().strip() or None
    except OSError:
        return None


def host_public_key(instance: Instance) -> str:
    """The instance's ed25519 ssh host public key ("ssh-ed25519 AAAA... comment")."""
    path = _inside(instance, "/etc/ssh/ssh_host_ed25519_key.pub")
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise LabError(f"cannot read {path}: {exc}; prepare the instance first") from exc


def set_authorized_keys(instance: Instance, text: str) -> None:
    """Replace root's authorized_keys in the instance (works while it runs)."""
    ssh_dir = _inside(instance, "/root/.ssh")
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_if_changed(ssh_dir / "authorized_keys", text, 0o600)


# --------------------------------------------------------------------------- processes


# Exit status of nspawn processes this process started and reaped (pid -> status).
_EXIT_STATUS: dict[int, int] = {}


def _alive(pid: int) -> bool:
    """True if pid exists and is not a zombie; reaps it first if it is this process's exited
    child (its status kept in _EXIT_STATUS)."""
    with contextlib.suppress(ChildProcessError, OSError):
        reaped, status = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            _EXIT_STATUS[pid] = os.waitstatus_to_exitcode(status)
    return processes.alive(pid)


def _nspawn_pid(instance: Instance) -> int | None:
    """PID of the instance's running systemd-nspawn (checked against its command line)."""
    try:
        pid = int(instance.pid_file.read_text().strip())
        if not _alive(pid):  # (reaps it if it is this process's child)
            return None
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    # systemd-run (machines booted with systemd, see boot) execs nspawn in the same process
    if not cmdline or not cmdline[0].endswith((NSPAWN.encode(), b"systemd-run")):
        return None
    return pid if str(instance.merged).encode() in cmdline else None


def leader_pid(instance: Instance) -> int | None:
    """The host's PID 1 as this machine sees it (nspawn's child that is PID 1 of its own PID
    namespace), None if the instance is not running."""
    nspawn = _nspawn_pid(instance)
    if nspawn is None:
        return None
    for child in processes.children(nspawn):
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and line.split()[-1] == "1" and len(line.split()) > 2:
                return child
    return None


def running(instance: Instance) -> bool:
    """True if the instance's systemd-nspawn runs."""
    return _nspawn_pid(instance) is not None


def nsenter_cmd(instance: Instance, *cmd: str) -> list[str]:
    """Command line running cmd inside the host (all its namespaces, its root)."""
    leader = leader_pid(instance)
    if leader is None:
        raise LabError(f"{instance.name} is not running: boot it first")
    return ["nsenter", "-t", str(leader), "-a", *cmd]


def boot(instance: Instance, *, bridge: str, log_file: Path) -> int:
    """Start the host detached (it outlives this process) and return nspawn's PID; does not
    wait for it to boot (see wait_booted)."""
    if running(instance):
        raise LabError(f"{instance.name} is already running (nspawn pid in {instance.pid_file})")
    if _overlay_mounted(instance) is None:
        raise LabError(f"{instance.merged} is not mounted: call create_instance first")
    if prepared_from(instance) is None:
        raise LabError(f"{instance.name} is not prepared: call prepare_instance first")
    if bridge not in _links():
        raise LabError(f"bridge {bridge} does not exist: create it before booting {instance.name}")
    _delete_stale_veth(instance)
    _remove_cgroups(instance)
    try:
        hostname = _inside(instance, "/etc/hostname").read_text().strip() or instance.name
    except OSError:
        hostname = instance.name
    cmd = [
        NSPAWN,
        "-D", str(instance.merged),
        "-M", instance.name,
        "-b",
        "--register=no",
        "--keep-unit",
        f"--network-bridge={bridge}",
        f"--hostname={hostname}",
        "--console=read-only",
        "--link-journal=no",
        "--resolv-conf=off",
        "--timezone=off",
    ]  # fmt: skip
    cgroups: list[Path] = []
    if SYSTEMD_BOOTED.is_dir():
        scope = ["systemd-run", "--scope", "--quiet", "--collect", "-p", "Delegate=yes"]
        # A name per boot: after a reboot the old scope may not be collected yet.
        unit = f"{CGROUP_PARENT}-{instance.name}-{time.time_ns()}"
        cmd = [*scope, f"--unit={unit}", *cmd]
    else:
        cgroups = _instance_cgroups(instance)
        for cgroup in cgroups:
            cgroup.mkdir(mode=0o755, parents=True, exist_ok=True)

    def enter_cgroups() -> None:  # runs in the child, before exec
        for cgroup in cgroups:
            (cgroup / "cgroup.procs").write_text("0\n")

    log_file = log_file.absolute()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    instance.console_log_path.write_text(f"{log_file}\n")
    with log_file.open("ab") as out:
        out.write(f"{BOOT_HEADER}{time.strftime('%F %T')} {shlex.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=NSPAWN_ENV,
            cwd="/",
            preexec_fn=enter_cgroups if cgroups else None,
        )
    instance.pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def _instance_cgroups(instance: Instance) -> list[Path]:
    """The instance's own cgroup in each hierarchy nspawn uses (cgroup2, name=systemd)."""
    roots = []
    for point, fstype, options in _mountinfo():
        if not point.startswith("/sys/fs/cgroup"):
            continue
        if fstype == "cgroup2" or (fstype == "cgroup" and "name=systemd" in options.split(",")):
            roots.append(Path(point))
    if not roots:
        raise LabError("no cgroup2 or name=systemd cgroup hierarchy under /sys/fs/cgroup")
    return [root / CGROUP_PARENT / instance.name for root in roots]


def _remove_cgroups(instance: Instance, timeout: float = 3.0) -> None:
    """Remove the (empty) cgroups nspawn and the host's systemd left in the instance's cgroup;
    LabError if processes still live in them."""
    if SYSTEMD_BOOTED.is_dir():
        return  # the transient scope goes with its last process
    deadline = time.monotonic() + timeout
    for cgroup in _instance_cgroups(instance):
        while cgroup.is_dir():
            for directory, _, _ in os.walk(cgroup, topdown=False):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            if not cgroup.is_dir():
                break
            if time.monotonic() >= deadline:
                procs = (cgroup / "cgroup.procs").read_text().split()
                raise LabError(
                    f"cannot remove cgroup {cgroup} of {instance.name} (processes "
                    f"{' '.join(procs) or 'exiting'}); kill them and retry"
                )
            time.sleep(0.1)
        with contextlib.suppress(OSError):
            cgroup.parent.rmdir()  # only if no other instance uses it


def _links() -> set[str]:
    """Names of the links in this network namespace."""
    return {p.name for p in Path("/sys/class/net").iterdir()}


def _delete_stale_veth(instance: Instance) -> None:
    """Delete a vb-<name> veth left behind (nspawn refuses to start if it exists)."""
    if instance.veth in _links():
        log(f"deleting stale veth {instance.veth}")
        run(["ip", "link", "del", instance.veth], check=False)


def wait_booted(instance: Instance, timeout: float, *, log_file: Path | None = None) -> None:
    """Wait until `systemctl is-system-running` inside says running; LabError if it says degraded
    (with the failed units, unless all are HARMLESS_FAILED_UNITS) or maintenance, if nspawn exits
    or on timeout (with the tail of the console log, by default the one boot() wrote)."""
    if log_file is None:
        with contextlib.suppress(OSError):
            log_file = Path(instance.console_log_path.read_text().strip())
    deadline = time.monotonic() + timeout
    state = "not started"
    try:
        started = int(instance.pid_file.read_text().strip())
    except (OSError, ValueError):
        started = 0
    while True:
        if _nspawn_pid(instance) is None:
            status = _EXIT_STATUS.get(started)
            how = "" if status is None else f" (status {status})"
            raise LabError(
                f"{instance.name}: systemd-nspawn exited while booting{how}{_log_tail(log_file)}"
            )
        leader = leader_pid(instance)
        if leader is not None and _comm(leader) == "systemd":
            command = ["nsenter", "-t", str(leader), "-a", "systemctl", "is-system-running"]
            try:
                proc = run(command, check=False, timeout=10)
                state = proc.stdout.strip() or proc.stderr.strip()
            except LabError:  # timed out: systemd is busy booting
                state = "no answer from systemctl"
            if state == "running":
                return
            if state == "maintenance":
                raise LabError(
                    f"{instance.name} booted into emergency/rescue mode{_log_tail(log_file)}"
                )
            if state == "degraded":
                failed = failed_units(instance)
                if set(failed) <= HARMLESS_FAILED_UNITS:
                    return
                listing = run(
                    nsenter_cmd(instance, "systemctl", "--failed", "--no-pager"), check=False
                ).stdout
                journal = shlex.join(nsenter_cmd(instance, "journalctl", "-b", "-p", "warning"))
                raise LabError(
                    f"{instance.name} booted degraded: failed units {', '.join(failed)}\n"
                    f"{listing.rstrip()}\nmask or fix them in prepare_instance; see: {journal}"
                )
        if time.monotonic() >= deadline:
            raise LabError(
                f"{instance.name} did not finish booting within {timeout:.0f}s (last state: "
                f"{state}){_log_tail(log_file)}"
            )
        time.sleep(0.2)


def _comm(pid: int) -> str:
    """Command name of pid ('' if gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _log_tail(log_file: Path | None) -> str:
    """'; <log_file>:' and the last lines of its last boot, or '' without a log."""
    if log_file is None:
        return ""
    lines = _tail(log_file, 40).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(BOOT_HEADER)]
    return f"; {log_file}:\n" + "\n".join(lines[starts[-1] if starts else 0 :])


def failed_units(instance: Instance) -> list[str]:
    """Names of the host's failed units."""
    out = run(
        nsenter_cmd(instance, "systemctl", "--failed", "--plain", "--no-legend", "--no-pager"),
        check=False,
    ).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to timeout for pid to exit; True if it did."""
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _wait_veth_gone(instance: Instance, timeout: float = 5.0) -> None:
    """Wait for the host-side veth to vanish (netns teardown is asynchronous), else delete it."""
    deadline = time.monotonic() + timeout
    while instance.veth in _links() and time.monotonic() < deadline:
        time.sleep(0.1)
    _delete_stale_veth(instance)


def poweroff(instance: Instance, timeout: float) -> None:
    """Shut the host down cleanly (`systemctl poweroff` inside); kill it after timeout."""
    nspawn = _nspawn_pid(instance)
    if nspawn is None:
        _after_exit(instance)  # it may have died on its own
        return
    _request_shutdown(instance, "poweroff")
    if not _wait_exit(nspawn, timeout):
        log(f"{instance.name} did not power off within {timeout:.0f}s; killing it")
        kill_instance(instance)
        return
    _after_exit(instance)


def _after_exit(instance: Instance) -> None:
    """Clean up what an exited nspawn leaves behind: pid file, veth, cgroups, and under
    /run/systemd/nspawn its propagation directory (nspawn refuses to delete it when /run is no
    tmpfs) and, if it was killed, its image lock file."""
    instance.pid_file.unlink(missing_ok=True)
    _wait_veth_gone(instance)
    _remove_cgroups(instance)
    with contextlib.suppress(OSError):
        (NSPAWN_RUN_DIR / "propagate" / instance.name).rmdir()  # only if empty
    if _overlay_mounted(instance) is not None:
        st = instance.merged.stat()
        (NSPAWN_RUN_DIR / "locks" / f"inode-{st.st_dev}:{st.st_ino}").unlink(missing_ok=True)


def _request_shutdown(instance: Instance, verb: str) -> None:
    """Ask the host's systemd to poweroff/reboot, by systemctl or, failing that, by signal."""
    leader = leader_pid(instance)
    if leader is None:
        nspawn = _nspawn_pid(instance)
        if nspawn is not None:  # not booted yet: nspawn's SIGTERM asks its init to power off
            with contextlib.suppress(ProcessLookupError):
                os.kill(nspawn, signal.SIGTERM)
        return
    try:
        proc = run(nsenter_cmd(instance, "systemctl", verb, "--no-block"), check=False, timeout=15)
        asked = proc.returncode == 0
    except LabError:
        asked = False
    if not asked:
        sig = signal.SIGRTMIN + (4 if verb == "poweroff" else 5)
        with contextlib.suppress(ProcessLookupError):
            os.kill(leader, sig)


def kill_instance(instance: Instance) -> None:
    """SIGKILL the host (its PID 1, which takes its whole PID namespace along) and nspawn."""
    nspawn = _nspawn_pid(instance)
    if nspawn is not None:
        leader = leader_pid(instance)
        if leader is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(leader, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(nspawn, signal.SIGKILL)  # nspawn leads its own process group
        if not _wait_exit(nspawn, TERM_GRACE):
            raise LabError(f"systemd-nspawn {nspawn} of {instance.name} survived SIGKILL")
    _after_exit(instance)


def reboot(
    instance: Instance,
    *,
    bridge: str,
    log_file: Path,
    shutdown_timeout: float,
    boot_timeout: float,
) -> bool:
    """Reboot the host (`systemctl reboot` inside) and wait until it runs again. nspawn exits
    with status 133 on a reboot; the host is started again like on boot(). Returns False if
    the host did not shut down within shutdown_timeout and was killed instead."""
    nspawn = _nspawn_pid(instance)
    if nspawn is None:
        raise LabError(f"{instance.name} is not running: boot it instead of rebooting it")
    _request_shutdown(instance, "reboot")
    clean = _wait_exit(nspawn, shutdown_timeout)
    if not clean:
        log(f"{instance.name} did not shut down within {shutdown_timeout:.0f}s; killing it")
        kill_instance(instance)
    elif _EXIT_STATUS.get(nspawn, NSPAWN_REBOOT_STATUS) != NSPAWN_REBOOT_STATUS:
        log(f"{instance.name} stopped (nspawn status {_EXIT_STATUS[nspawn]}) instead of rebooting")
    _after_exit(instance)
    boot(instance, bridge=bridge, log_file=log_file)
    wait_booted(instance, boot_timeout, log_file=log_file)
    return clean


def remove_instance(instance: Instance) -> None:
    """Kill the host if it runs, unmount everything under its directory and delete it (the
    cached root file system is only ever a read-only lower layer and stays)."""
    if running(instance):
        kill_instance(instance)
    _delete_stale_veth(instance)
    _remove_cgroups(instance)
    _remove_tree(instance.root_dir)
