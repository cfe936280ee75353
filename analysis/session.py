"""The SparkSession of an analysis: local[*] by default, or a standalone cluster's master."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "1g"
# Spark's own INFO/WARN lines would bury the table summarize prints; errors still show.
LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _log_configuration() -> Path:
    path = Path(tempfile.gettempdir()) / "streamlab-analysis-log4j2.properties"
    if not path.exists() or path.read_text() != LOG4J2:
        path.write_text(LOG4J2)
    return path


def defaults() -> dict[str, str]:
    """Settings every analysis session starts from; --conf overrides any of them."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Adaptive execution merges small shuffle partitions; 16 suits 2 to 16 cores.
        "spark.sql.shuffle.partitions": "16",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_log_configuration()}",
    }


def build(
    master: str = DEFAULT_MASTER,
    conf: Mapping[str, str] | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
) -> SparkSession:
    """A new session (the JVM starts here, with the driver's heap fixed at driver_memory)."""
    builder = SparkSession.builder.master(master).appName("streamlab-analysis")
    settings = defaults() | {"spark.driver.memory": driver_memory} | dict(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def executor_hosts(spark: SparkSession) -> list[str]:
    """Hosts the session's executors (and driver) run on, as Spark knows them."""
    try:
        infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
        return sorted({str(info.host()) for info in infos})
    except Exception:  # a private interface: the figure is informative only
        return []
