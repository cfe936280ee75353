#!/usr/bin/env python3
"""Pin artifacts: resolve files for a component version and write their checksums.

Writes roles/<role>/vars/main/artifacts.yml (or updates it, keeping other versions):
  _<role>_artifacts: {<artifact>: {<version>: {<source>: {home, bundle, files: [...]}}}}

Maven sets are resolved with `mvn dependency:copy-dependencies` (runtime scope) and hashed
locally; PyPI files take the sha256 the index publishes; Apache tarballs take the .sha512 the
mirror publishes, or a digest given with --apache-digest where the mirror is out of reach.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
MAVEN = "https://repo.maven.apache.org/maven2"
PYPI_SIMPLE = "https://pypi.org/simple"
APACHE = "https://archive.apache.org/dist"

# artifact -> role that pins it, default version, and how each source is laid out.
COMPONENTS: dict[str, dict] = {
    "supervisor": {
        "role": "common",
        "pypi": {"package": "supervisor", "file": "supervisor-{v}-py2.py3-none-any.whl"},
    },
    # The driver host's Python packages (producer, collector): pure wheels, no other dependency.
    "kafka-python": {
        "role": "driver",
        "pypi": {"package": "kafka-python", "file": "kafka_python-{v}-py3-none-any.whl"},
    },
    "tqdm": {"role": "driver", "pypi": {"package": "tqdm", "file": "tqdm-{v}-py3-none-any.whl"}},
    # kafka-python's CRC32C in C; without it the pure-Python checksum of every record batch
    # takes about a third of the producer's CPU. One wheel per CPython (3.9: EL9 and macOS
    # system Python ... 3.14) and platform of the kit's hosts, bundled; pip takes the host's.
    "crc32c": {
        "role": "driver",
        "pypi": {
            "package": "crc32c",
            "select": r"crc32c-{v}-cp3(9|1[0-4])-cp3\d+-"
            r"(manylinux\S*_(x86_64|aarch64)|macosx_\S*_universal2)\.whl",
        },
    },
    # The analysis host's plotting stack: matplotlib and what it imports (pyspark comes with
    # the spark role's distribution). Binary packages bundle one wheel per CPython 3.11-3.14
    # (numpy 2.4 needs 3.11) on Linux x86_64 and aarch64; pip takes the host's.
    **{
        name: {
            "role": "analysis",
            "pypi": {
                "package": name,
                "select": rf"{name}-{{v}}-cp31[1-4]-cp31[1-4]-manylinux\S*_(x86_64|aarch64)\.whl",
            },
        }
        for name in ("matplotlib", "numpy", "contourpy", "kiwisolver", "pillow")
    },
    **{
        name: {"role": "analysis", "pypi": {"package": name, "file": wheel}}
        for name, wheel in (
            ("fonttools", "fonttools-{v}-py3-none-any.whl"),
            ("cycler", "cycler-{v}-py3-none-any.whl"),
            ("pyparsing", "pyparsing-{v}-py3-none-any.whl"),
            ("packaging", "packaging-{v}-py3-none-any.whl"),
            ("python-dateutil", "python_dateutil-{v}-py3-none-any.whl"),
            ("tzdata", "tzdata-{v}-py2.py3-none-any.whl"),
        )
    },
    "zookeeper": {
        "role": "zookeeper",
        "maven": {
            # logback-classic is optional and metrics-core/snappy-java are "provided" in the
            # zookeeper POM, but the server needs them at run time (versions from its parent POM).
            "roots": [
                "org.apache.zookeeper:zookeeper:{v}",
                "ch.qos.logback:logback-classic:1.3.15",
                "io.dropwizard.metrics:metrics-core:4.1.12.1",
                "org.xerial.snappy:snappy-java:1.1.10.5",
            ],
            # TLS between quorum members is not used by the lab; these are 9 MB per platform.
            "exclude": ["io.netty:netty-tcnative-boringssl-static"],
            "dest": "lib",
        },
        "apache": {
            "path": "zookeeper/zookeeper-{v}/apache-zookeeper-{v}-bin.tar.gz",
            "home": "apache-zookeeper-{v}-bin",
        },
    },
    "flink": {
        "role": "flink",
        # Apache publishes the whole distribution on PyPI: jars in apache-flink-libraries, the
        # launch scripts and default configuration in apache-flink (shell scripts, the same in
        # every platform wheel; the manylinux one is pinned).
        "pypi": {
            "wheels": [
                {
                    "package": "apache-flink-libraries",
                    "file": "apache_flink_libraries-{v}-py2.py3-none-any.whl",
                    "extract": ["pyflink/lib/", "pyflink/opt/", "pyflink/plugins/", "pyflink/bin/"],
                    "strip": "pyflink/",
                    # Flink 2.1.x publishes this package as an sdist only; it carries the same
                    # directories under deps/.
                    "sdist": {
                        "file": "apache_flink_libraries-{v}.tar.gz",
                        "extract": [
                            "apache_flink_libraries-{v}/deps/lib/",
                            "apache_flink_libraries-{v}/deps/opt/",
                            "apache_flink_libraries-{v}/deps/plugins/",
                            "apache_flink_libraries-{v}/deps/bin/",
                        ],
                        "strip": "apache_flink_libraries-{v}/deps/",
                    },
                },
                {
                    "package": "apache-flink",
                    "file": "apache_flink-{v}-cp311-cp311-manylinux_2_5_x86_64.manylinux1_x86_64"
                    ".manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                    "extract": ["pyflink/bin/", "pyflink/conf/"],
                    "strip": "pyflink/",
                },
            ]
        },
        "apache": {"path": "flink/flink-{v}/flink-{v}-bin-scala_2.12.tgz", "home": "flink-{v}"},
    },
    "spark": {
        "role": "spark",
        # The pyspark sdist carries the whole runtime: deps/jars, deps/bin, deps/sbin.
        "pypi": {"package": "pyspark", "file": "pyspark-{v}.tar.gz", "home": "pyspark-{v}/deps"},
        "apache": {
            "path": "spark/spark-{v}/spark-{v}-bin-hadoop3.tgz",
            "home": "spark-{v}-bin-hadoop3",
        },
    },
    "kafka": {
        "role": "kafka",
        "maven": {
            "sets": [
                # kafka_2.13 carries kafka.Kafka and kafka.tools.StorageTool. Kafka 4.1 logs
                # through SLF4J 1.7, so the binding is log4j-slf4j-impl, as in the release tarball.
                {
                    "roots": [
                        "org.apache.kafka:kafka_2.13:{v}",
                        "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
                    ],
                    "dest": "libs",
                },
                # The commands users reach for (kafka-topics.sh and the like) from a directory of
                # their own, so the broker's classpath stays the one measured. Without Connect's
                # runtime (a web server), which none of the commands the kit installs needs.
                {
                    "roots": [
                        "org.apache.kafka:kafka-tools:{v}",
                        "org.apache.logging.log4j:log4j-slf4j-impl:2.24.3",
                    ],
                    "exclude": ["org.apache.kafka:connect-runtime"],
                    "dest": "tools-libs",
                },
            ]
        },
        "apache": {"path": "kafka/{v}/kafka_2.13-{v}.tgz", "home": "kafka_2.13-{v}"},
    },
    "storm": {
        "role": "storm",
        # The release tarball's layout: daemons run from lib/ (storm-server), workers from
        # lib-worker/ (storm-client only, so topology jars do not clash with daemon classes).
        # The UI (storm-webapp) is not on Maven Central: it comes with the apache source only.
        "maven": {
            "sets": [
                {
                    "roots": [
                        "org.apache.storm:storm-server:{v}",
                        "org.apache.logging.log4j:log4j-slf4j2-impl:2.25.2",
                    ],
                    "dest": "lib",
                },
                {
                    "roots": [
                        "org.apache.storm:storm-client:{v}",
                        "org.apache.logging.log4j:log4j-core:2.25.2",
                        "org.apache.logging.log4j:log4j-slf4j2-impl:2.25.2",
                    ],
                    "dest": "lib-worker",
                },
            ]
        },
        "apache": {
            "path": "storm/apache-storm-{v}/apache-storm-{v}.tar.gz",
            "home": "apache-storm-{v}",
        },
    },
}

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>streamlab.lock</groupId><artifactId>lock</artifactId><version>0</version>
  <packaging>pom</packaging>
  <dependencies>{deps}</dependencies>
</project>
"""


class IndentedDumper(yaml.SafeDumper):
    """Indent block sequences under their key, as yamllint expects."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def maven_set(spec: dict, version: str) -> list[dict]:
    """Resolve one set of Maven roots (runtime scope) into pinned files under spec['dest']."""
    exclusions = "".join(
        f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in (item.split(":") for item in spec.get("exclude", []))
    )
    deps = ""
    for root in spec["roots"]:
        group, artifact, ver = root.format(v=version).split(":")
        deps += (
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{ver}</version><exclusions>{exclusions}</exclusions></dependency>"
        )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(POM.format(deps=deps))
        subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-Dstyle.color=never",
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                "-Dmdep.useRepositoryLayout=true",
                f"-DoutputDirectory={work / 'out'}",
            ],
            cwd=work,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return [
            {
                "path": str(jar.relative_to(work / "out")),
                "sha256": sha256(jar),
                "dest": spec["dest"],
            }
            for jar in sorted((work / "out").rglob("*.jar"))
        ]


def lock_maven(spec: dict, version: str, name: str) -> dict:
    files = [entry for one in spec.get("sets", [spec]) for entry in maven_set(one, version)]
    return {"home": f"{name}-{version}", "bundle": True, "files": files}


def pypi_files(package: str, pattern: str) -> list[dict]:
    """Path under the PyPI files host and published sha256 of each file whose name matches."""
    with urllib.request.urlopen(f"{PYPI_SIMPLE}/{package}/", timeout=60) as response:
        index = response.read().decode()
    links = re.finditer(r'href="[^"]*/packages/([^"#]+/([^"#/]+))#sha256=([0-9a-f]+)"', index)
    found = [link for link in links if re.fullmatch(pattern, html.unescape(link.group(2)))]
    return [
        {"path": link.group(1), "sha256": link.group(3)}
        for link in sorted(found, key=lambda link: link.group(2))
    ]


def pypi_file(package: str, filename: str) -> dict:
    """Path under the PyPI files host and the sha256 the index publishes for one file."""
    found = pypi_files(package, re.escape(filename))
    if not found:
        sys.exit(f"{filename} is not in the PyPI index of {package}")
    return found[0]


def lock_pypi(spec: dict, version: str, name: str) -> dict:
    if "select" in spec:
        files = pypi_files(spec["package"], spec["select"].format(v=re.escape(version)))
        if not files:
            sys.exit(f"no file of {spec['package']} {version} matches {spec['select']}")
        return {"home": f"{name}-{version}", "bundle": True, "files": files}
    if "wheels" not in spec:
        return {
            "home": spec.get("home", "").format(v=version),
            "files": [pypi_file(spec["package"], spec["file"].format(v=version))],
        }
    files = []
    for wheel in spec["wheels"]:
        layout = wheel
        found = pypi_files(wheel["package"], re.escape(wheel["file"].format(v=version)))
        if not found and "sdist" in wheel:
            layout = wheel["sdist"]
            found = pypi_files(wheel["package"], re.escape(layout["file"].format(v=version)))
        if not found:
            sys.exit(
                f"{wheel['file'].format(v=version)} is not in the PyPI index of {wheel['package']}"
            )
        files.append(
            {
                **found[0],
                "extract": [prefix.format(v=version) for prefix in layout["extract"]],
                "strip": layout["strip"].format(v=version),
            }
        )
    return {"home": f"{name}-{version}", "bundle": True, "files": files}


def lock_apache(spec: dict, version: str, digest: str | None) -> dict:
    path = spec["path"].format(v=version)
    if digest is None:
        with urllib.request.urlopen(f"{APACHE}/{path}.sha512", timeout=60) as response:
            digest = "sha512:" + response.read().decode().split()[0].lower()
    algorithm, _, value = digest.partition(":")
    if algorithm not in ("sha256", "sha512") or not re.fullmatch(r"[0-9a-f]{64,128}", value):
        sys.exit(f"--apache-digest must look like sha256:<hex> or sha512:<hex>, not {digest!r}")
    return {"home": spec["home"].format(v=version), "files": [{"path": path, algorithm: value}]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("component", choices=sorted(COMPONENTS))
    parser.add_argument("version")
    parser.add_argument("--source", action="append", help="only these sources (repeatable)")
    parser.add_argument(
        "--apache-digest",
        help="sha256:<hex>|sha512:<hex> when the mirror is "
        "out of reach; say where it came from in --note",
    )
    parser.add_argument("--note", help="provenance comment stored with the pin")
    args = parser.parse_args()

    component = COMPONENTS[args.component]
    role = component["role"]
    target = ROOT / "roles" / role / "vars" / "main" / "artifacts.yml"
    data = yaml.safe_load(target.read_text()) if target.exists() else None
    key = f"_{role}_artifacts"
    pins = (data or {}).get(key, {})
    version_pins = pins.setdefault(args.component, {}).setdefault(args.version, {})
    for source in args.source or [s for s in ("maven", "pypi", "apache") if s in component]:
        spec = component[source]
        if source == "maven":
            version_pins[source] = lock_maven(spec, args.version, args.component)
        elif source == "pypi":
            version_pins[source] = lock_pypi(spec, args.version, args.component)
        else:
            version_pins[source] = lock_apache(spec, args.version, args.apache_digest)
        if args.note:
            version_pins[source]["note"] = args.note
        count = len(version_pins[source]["files"])
        print(f"{args.component} {args.version} {source}: {count} file(s) pinned")
    header = (
        "---\n# Generated by roles/artifact/files/lock_artifacts.py (make lock); do not edit.\n"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        header + yaml.dump({key: pins}, Dumper=IndentedDumper, sort_keys=True, width=160)
    )


if __name__ == "__main__":
    main()
