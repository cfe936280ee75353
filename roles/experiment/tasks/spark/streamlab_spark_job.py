"""The Spark engine's job: a Structured Streaming query from the input topic to the result topic,
at least once, on the kit's Spark cluster. The driver runs here, on the master host.

    python3 streamlab_spark_job.py --master spark://M:7077 --jar streamlab-spark-job-1.0.jar \\
        --dir DIR --executors N --executor-cores C --executor-memory-mb MB -- JOB OPTIONS

The job's options (after --) are those of every engine's job (docs/extending.md) plus the trigger
options; SparkJob.plan in the jar checks them as the other jobs do and returns the query's plan.
Each record goes through Enrich (the jar's SparkEnrich), the same code as the other engines', in
the JVM. In DIR: checkpoint/ (the query's offset and commit logs: the driver alone writes them,
so a local directory of the driver's host is enough), settings.json (the streamlab.* settings
and the Spark properties the application runs with), progress.jsonl (every StreamingQueryProgress),
status.jsonl (a line a second: the query and the application's executors) and done.json at the
end. The job stops when DIR/job.stop exists, or on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.types import ArrayType, StringType

# The application's properties that bound how soon a lost executor is noticed and how often a
# task is retried: Spark's defaults, written out (docs/engines.md).
DETECTION = {
    "spark.network.timeout": "120s",
    "spark.executor.heartbeatInterval": "10s",
    "spark.task.maxFailures": "4",
}
# The master's own (spark-defaults.conf of the cluster, Spark's default where it sets none).
MASTER_SIDE = {"spark.worker.timeout": "60"}
# Between a failed query and its new start, as Flink's fixed-delay restarts wait.
RESTART_DELAY_MS = 2000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# The listener's thread and the main loop append to the same file; a progress line can be
# longer than one buffered write, so whole lines are written under one lock.
_APPENDING = threading.Lock()


def append(path: Path, line: dict[str, Any]) -> None:
    text = json.dumps(line, separators=(",", ":")) + "\n"
    with _APPENDING, path.open("a", encoding="utf-8") as out:
        out.write(text)


def progress_fields(last: dict[str, Any] | None) -> dict[str, Any]:
    """What the status line carries of the newest progress report: its batch, how long the batch
    took end to end, its rates and where each source's reading ended (topic -> partition ->
    offset), so the timeline shows a slow batch or a stalled offset without the whole report."""
    if not last:
        return {
            "progress_batch_id": None,
            "batch_duration_ms": None,
            "input_rows_per_s": None,
            "processed_rows_per_s": None,
            "end_offsets": None,
        }
    ends: dict[str, Any] = {}
    for source in last.get("sources") or []:
        end = source.get("endOffset")
        if isinstance(end, str):  # Spark gives a source's offsets as JSON text
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if isinstance(end, dict):
            for topic, partitions in end.items():
                if isinstance(partitions, dict):
                    ends.setdefault(topic, {}).update(partitions)
    return {
        "progress_batch_id": last.get("batchId"),
        "batch_duration_ms": (last.get("durationMs") or {}).get("triggerExecution"),
        "input_rows_per_s": last.get("inputRowsPerSecond"),
        "processed_rows_per_s": last.get("processedRowsPerSecond"),
        "end_offsets": ends or None,
    }


class Progress(StreamingQueryListener):
    """Keeps every progress report of the query (micro-batch only: a continuous query reports
    none)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        # The newest report, for the status line: asking the query for lastProgress every
        # second converts its whole recent history in the driver.
        self.last: dict[str, Any] | None = None

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's name)
        append(self.out, {"t_ms": now_ms(), "event": "started", "id": str(event.id)})

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        progress = json.loads(event.progress.json)
        self.last = progress
        append(self.out, {"t_ms": now_ms(), "event": "progress", "progress": progress})

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        append(
            self.out,
            {"t_ms": now_ms(), "event": "terminated", "exception": event.exception},
        )


class Commits:
    """Commits each finished batch's (or continuous epoch's) end offsets to the run's consumer
    group, read from the query's checkpoint: offsets/N holds the offsets batch N reads up to,
    commits/N appears once its output was written. Spark keeps offsets nowhere else; the
    experiment's drain and lag samples read the group."""

    def __init__(self, checkpoint: Path, committer: Any, log: Path) -> None:
        self.checkpoint = checkpoint
        self.committer = committer
        self.log = log
        self.done = -1
        self.error: str | None = None
        # Input partitions the batch read: one source task each (minPartitions unset).
        self.partitions = 0

    def latest(self) -> int:
        names = [p.name for p in (self.checkpoint / "commits").glob("[0-9]*")]
        return max((int(name) for name in names if name.isdigit()), default=-1)

    def step(self) -> int:
        """Commits the newest committed batch's offsets, once; returns its id (-1: none yet)."""
        batch = self.latest()
        if batch <= self.done:
            return self.done
        try:
            lines = (self.checkpoint / "offsets" / str(batch)).read_text().splitlines()
            for offsets in lines[2:]:  # the version, the batch's metadata, then each source's
                if offsets.strip().startswith("{"):
                    self.committer.commit(offsets)
                    self.partitions = source_tasks(json.loads(offsets)) or self.partitions
            self.done, self.error = batch, None
            append(self.log, {"t_ms": now_ms(), "event": "committed", "batch": batch})
        except Exception as error:  # tried again a second later, with whatever is newest then
            self.error = f"{type(error).__name__}: {error}"
            append(
                self.log,
                {"t_ms": now_ms(), "event": "commit_error", "batch": batch, "error": self.error},
            )
        return self.done


def write_settings(work: Path, record: dict[str, Any]) -> None:
    staged = work / "settings.json.tmp"
    staged.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    staged.replace(work / "settings.json")


def source_tasks(offsets: dict[str, Any]) -> int | None:
    """The partitions a Kafka source's offsets name ({"topic": {"0": 42}})."""
    count = sum(len(parts) for parts in offsets.values() if isinstance(parts, dict))
    return count or None


def executors(spark: SparkSession) -> list[dict[str, Any]]:
    """The application's executors as its status tracker sees them (the driver left out)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    driver_host = spark.sparkContext.getConf().get("spark.driver.host", "")
    driver_port = spark.sparkContext._jsc.sc().env().blockManager().blockManagerId().port()
    out = []
    for info in infos:
        host, port = info.host(), info.port()
        if host == driver_host and port == driver_port:
            continue
        out.append({"host": host, "port": port, "running_tasks": info.numRunningTasks()})
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", required=True)
    parser.add_argument("--jar", required=True)
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--executors", required=True, type=int)
    parser.add_argument("--executor-cores", required=True, type=int)
    parser.add_argument("--executor-memory-mb", required=True, type=int)
    parser.add_argument("--conf", action="append", default=[], help="KEY=VALUE, a Spark property")
    parser.add_argument("job", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    work: Path = args.dir
    stop_file = work / "job.stop"
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())

    builder = (
        SparkSession.builder.master(args.master)
        .config("spark.jars", args.jar)
        .config("spark.executor.cores", str(args.executor_cores))
        .config("spark.cores.max", str(args.executors * args.executor_cores))
        .config("spark.executor.memory", f"{args.executor_memory_mb}m")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in DETECTION.items():
        builder = builder.config(key, value)
    for item in args.conf:
        key, _, value = item.partition("=")
        builder = builder.config(key, value)
    spark = None
    try:
        name_index = job.index("--name") + 1 if "--name" in job else -1
        app_name = job[name_index] if name_index > 0 else "streamlab-spark"
        spark = builder.appName(app_name).getOrCreate()
        jvm = spark.sparkContext._jvm
        gateway = spark.sparkContext._gateway
        java_args = gateway.new_array(jvm.java.lang.String, len(job))
        for index, value in enumerate(job):
            java_args[index] = value
        plan = json.loads(jvm.streamlab.SparkJob.plan(java_args))
        conf = spark.sparkContext.getConf()
        settings = dict(plan["settings"])
        settings["streamlab.engine_version"] = spark.version
        settings["streamlab.executors"] = args.executors
        settings["streamlab.executor_cores"] = args.executor_cores
        spark_properties = {
            key: conf.get(key, default) for key, default in {**DETECTION, **MASTER_SIDE}.items()
        }
        for key in (
            "spark.executor.cores",
            "spark.cores.max",
            "spark.executor.memory",
            "spark.app.id",
            "spark.sql.shuffle.partitions",
            "spark.authenticate",
            "spark.driver.host",
        ):
            spark_properties[key] = conf.get(key, None)
        spark.conf.set("spark.sql.shuffle.partitions", str(plan["shuffle_partitions"]))
        spark_properties["spark.sql.shuffle.partitions"] = spark.conf.get(
            "spark.sql.shuffle.partitions"
        )

        committer = jvm.streamlab.SparkOffsetCommitter(
            plan["bootstrap"], plan["kafka_config"], plan["group_id"]
        )
        progress = Progress(work / "progress.jsonl")
        spark.streams.addListener(progress)
        commits = Commits(Path(plan["checkpoint_dir"]), committer, work / "progress.jsonl")
        spark.udf.registerJavaFunction(
            "streamlab_enrich", "streamlab.SparkEnrich", ArrayType(StringType())
        )
        connection = {f"kafka.{key}": value for key, value in plan["connection"].items()}
        source = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", plan["bootstrap"])
            .option("subscribe", plan["input_topic"])
            .option("startingOffsets", "earliest")
            .option("kafka.group.id", plan["group_id"])
            .options(**connection)
        )
        if plan["max_offsets_per_trigger"] > 0:
            source = source.option("maxOffsetsPerTrigger", str(plan["max_offsets_per_trigger"]))
        records = source.load().select(
            F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value")
        )
        every = int(plan["test_drop_every"])
        if every > 0:
            # DeliberateLoss: drop each record whose integer msg_id is a multiple of N, once read.
            msg_id = F.expr("try_cast(get_json_object(value, '$.msg_id') AS BIGINT)")
            records = records.where(msg_id.isNull() | (msg_id % every != 0))
        enriched = records.select(F.expr("streamlab_enrich(key, value)").alias("e")).select(
            F.col("e")[0].alias("key"), F.col("e")[1].alias("value")
        )
        writer = (
            enriched.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", plan["bootstrap"])
            .option("topic", plan["output_topic"])
            .option("checkpointLocation", plan["checkpoint_dir"])
            .options(**connection)
            .options(**{f"kafka.{key}": value for key, value in plan["producer"].items()})
            .queryName(app_name)
        )
        interval = f"{plan['trigger_interval_ms']} milliseconds"
        if plan["trigger"] == "continuous":
            writer = writer.trigger(continuous=interval)
        else:
            writer = writer.trigger(processingTime=interval)
        query = writer.start()
        restarts = 0
        settings["streamlab.restart_strategy"] = (
            "the driver starts the query again from its checkpoint"
        )
        settings["streamlab.restart_delay_ms"] = RESTART_DELAY_MS
        record = {
            "settings": settings,
            "spark": spark_properties,
            "app_id": spark.sparkContext.applicationId,
            "query_id": str(query.id),
            "plan": {k: v for k, v in plan.items() if k not in ("connection", "settings")},
        }
        write_settings(work, record)
        status = work / "status.jsonl"
        while not stopping.is_set() and not stop_file.exists():
            active = query.isActive
            if not active:
                # A failed query (a task out of retries; a continuous query on any task failure)
                # is started again from its checkpoint, as a deployment's supervisor would.
                failure = query.exception()
                restarts += 1
                append(
                    work / "progress.jsonl",
                    {"t_ms": now_ms(), "event": "restart", "error": str(failure)[:1000]},
                )
                stopping.wait(RESTART_DELAY_MS / 1000)
                progress.last = None  # the failed query's rates are not the new one's
                query = writer.start()
                active = query.isActive
            last = progress.last
            committed = commits.step()
            if "streamlab.source_tasks" not in settings and commits.partitions:
                settings["streamlab.source_tasks"] = commits.partitions
                write_settings(work, record)
            append(
                status,
                {
                    "t_ms": now_ms(),
                    "query_active": active,
                    "batch_id": committed if committed >= 0 else None,
                    **progress_fields(last),
                    "executors": executors(spark),
                    "commit_error": commits.error,
                    "restarts": restarts,
                },
            )
            stopping.wait(1.0)
        failure = query.exception()
        query.stop()
        committer.close()
        (work / "done.json").write_text(
            json.dumps({"t_ms": now_ms(), "error": str(failure) if failure else None}) + "\n"
        )
        return 1 if failure else 0
    except Exception as error:  # the plan's refusal, or Spark's: said once, on stderr
        message = f"{type(error).__name__}: {error}"
        print(f"streamlab_spark_job: {message}", file=sys.stderr)
        (work / "done.json").write_text(
            json.dumps({"t_ms": now_ms(), "error": message[:2000]}) + "\n"
        )
        return 2
    finally:
        if spark is not None:
            spark.stop()


if __name__ == "__main__":
    os.umask(0o027)
    sys.exit(main(sys.argv[1:]))
