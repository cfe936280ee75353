"""Reading a run directory (docs/results.md): which files, and their lines, validated.

produced.jsonl and received.jsonl are read by Spark (text lines, parsed with from_json against
an explicit schema), never into Python lists; run.json, faults.jsonl and engine/ are small and
read here. Any bad input raises InputError naming the file and, for a line, its number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

RUN_JSON = "run.json"
PRODUCED = "produced.jsonl"
RECEIVED = "received.jsonl"
FAULTS = "faults.jsonl"
PART_SUFFIX = ".part"
SNIPPET = 80
CORRUPT = "_corrupt_record"
PROBLEM = "_problem"


class InputError(Exception):
    """Bad input: a missing file, or a line or field that breaks docs/results.md."""

    def __init__(self, path: Path, problem: str, line: int | None = None) -> None:
        self.path = path
        self.problem = problem
        self.line = line
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class LinesFile:
    """A .jsonl file as read: its final name, or `<name>.part` when its writer died."""

    name: str
    path: Path
    partial: bool

    def cut_last_line(self) -> bool:
        """A .part file whose last line has no newline: its writer died in the middle of it."""
        if not self.partial:
            return False
        with self.path.open("rb") as handle:
            handle.seek(0, 2)
            if handle.tell() == 0:
                return False
            handle.seek(-1, 2)
            return handle.read(1) != b"\n"


@dataclass(frozen=True)
class RecordSchema:
    """The fields of a .jsonl file the analysis uses, and which of them a line must have."""

    fields: dict[str, T.DataType]
    required: tuple[str, ...]
    # received.jsonl keeps a record whose value is not a result as msg_id null (malformed).
    msg_id_may_be_null: bool = False
    expected: str = ""


PRODUCED_SCHEMA = RecordSchema(
    fields={
        "msg_id": T.LongType(),
        "intended_ms": T.LongType(),
        "sent_ms": T.LongType(),
        "acked": T.BooleanType(),
        # The input-topic partition Kafka acknowledged the message in; older runs lack it.
        "partition": T.LongType(),
    },
    required=("intended_ms", "acked"),
    expected="msg_id, intended_ms, sent_ms: integers; acked: true or false; partition: integer",
)
RECEIVED_SCHEMA = RecordSchema(
    fields={
        "msg_id": T.LongType(),
        "recv_ms": T.LongType(),
        "partition": T.LongType(),
        "offset": T.LongType(),
        "processed_ms": T.LongType(),
        "broker_ms": T.LongType(),
    },
    required=("recv_ms",),
    msg_id_may_be_null=True,
    expected="msg_id: integer or null; recv_ms: integer; processed_ms, broker_ms: integer or null",
)


def locate(run_dir: Path, name: str) -> LinesFile:
    """The file to read for name: name itself, else name.part (its writer died), else an error."""
    final = run_dir / name
    if final.is_file():
        return LinesFile(name, final, partial=False)
    part = run_dir / (name + PART_SUFFIX)
    if part.is_file():
        return LinesFile(name, part, partial=True)
    raise InputError(final, f"missing (nor is there a {name}{PART_SUFFIX}); see docs/results.md")


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise InputError(path, "missing; see docs/results.md") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(path, f"not JSON ({error})") from error


def read_run(run_dir: Path) -> dict[str, Any]:
    """run.json; only run_id and engine (strings) are required."""
    path = run_dir / RUN_JSON
    run = read_json_file(path)
    if not isinstance(run, dict):
        raise InputError(path, "not a JSON object")
    for key in ("run_id", "engine"):
        if not isinstance(run.get(key), str) or not run[key]:
            raise InputError(path, f"no {key} (a non-empty string)")
    parameters = run.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise InputError(path, "parameters is not an object")
    return run


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_faults(run_dir: Path) -> list[dict[str, Any]] | None:
    """faults.jsonl as a list (in file order), or None when the file is absent."""
    path = run_dir / FAULTS
    if not path.is_file():
        return None
    faults: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                fault = json.loads(line)
            except ValueError as error:
                raise InputError(path, f"not JSON ({error}): {line[:SNIPPET]!r}", number) from error
            if not isinstance(fault, dict):
                raise InputError(path, f"not a JSON object: {line[:SNIPPET]!r}", number)
            if not _is_int(fault.get("start_ms")):
                raise InputError(path, "no start_ms (integer)", number)
            if fault.get("end_ms") is not None and not _is_int(fault["end_ms"]):
                raise InputError(path, "end_ms is neither an integer nor null", number)
            faults.append(fault)
    return faults


def read_optional_json(path: Path) -> Any | None:
    """A JSON file that may be absent (engine evidence); None when absent or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def read_optional_jsonl(path: Path) -> list[dict[str, Any]] | None:
    """A small .jsonl file that may be absent (engine timeline); objects only, others skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


# ---------------------------------------------------------------- Spark side


def lines(spark: SparkSession, source: LinesFile) -> DataFrame:
    """The file's lines with where each is: (value, _block, _row).

    _block is the byte offset of the split the line was read in, _row its position among that
    split's lines (monotonically_increasing_id within one partition), so a line's number is the
    count of lines in earlier splits plus those before it in its own. A cut last line of a .part
    file is left out.
    """
    frame = (
        spark.read.option("lineSep", "\n")
        .text(str(source.path.resolve()))
        .select(
            "value",
            F.col("_metadata.file_block_start").alias("_block"),
            F.monotonically_increasing_id().alias("_row"),
        )
    )
    if source.cut_last_line():
        last = frame.agg(F.max(F.struct("_block", "_row")).alias("last")).first()["last"]
        if last is not None:
            frame = frame.filter(
                (F.col("_block") != last["_block"]) | (F.col("_row") != last["_row"])
            )
    return frame


def _problem(schema: RecordSchema) -> Column:
    """Why a parsed line breaks the contract, or null. Only rare branches parse the line again."""
    keys = F.json_object_keys("value")
    not_object = keys.isNull()
    wrong = F.lit(f"a field has the wrong type ({schema.expected})")
    has_msg_id = F.coalesce(F.array_contains(keys, "msg_id"), F.lit(False))
    problem = F.when(
        F.col(CORRUPT).isNotNull(),
        F.when(not_object, F.lit("not a JSON object")).otherwise(wrong),
    ).when(
        F.col("msg_id").isNull() & ~has_msg_id,
        F.when(not_object, F.lit("not a JSON object")).otherwise(F.lit("a record without msg_id")),
    )
    if not schema.msg_id_may_be_null:
        problem = problem.when(F.col("msg_id").isNull(), F.lit("msg_id is null"))
    for name in schema.required:
        problem = problem.when(F.col(name).isNull(), F.lit(f"no {name} ({schema.expected})"))
    return problem


def parse(frame: DataFrame, schema: RecordSchema) -> DataFrame:
    """Parse each line (PERMISSIVE) into the schema's fields plus _problem (null when fine)."""
    struct = T.StructType(
        [T.StructField(name, kind) for name, kind in schema.fields.items()]
        + [T.StructField(CORRUPT, T.StringType())]
    )
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    parsed = frame.withColumn("_json", F.from_json("value", struct, options))
    parsed = parsed.select(
        *frame.columns, *[F.col(f"_json.{name}").alias(name) for name in struct.names]
    )
    return parsed.withColumn(PROBLEM, _problem(schema))


@dataclass
class Loaded:
    """A validated .jsonl file: its parsed fields (persisted) and its line count."""

    source: LinesFile
    frame: DataFrame
    lines: int
    null_msg_ids: int

    def release(self) -> None:
        self.frame.unpersist()


def load(spark: SparkSession, source: LinesFile, schema: RecordSchema) -> Loaded:
    """Parse and validate a file; keep only the schema's fields, persisted for the metrics."""
    text = lines(spark, source)
    parsed = parse(text, schema)
    frame = parsed.select(*schema.fields, PROBLEM).persist(StorageLevel.MEMORY_AND_DISK)
    counts = frame.agg(
        F.count(F.lit(1)).alias("lines"),
        F.count(PROBLEM).alias("bad"),
        F.count_if(F.col("msg_id").isNull()).alias("null_ids"),
    ).first()
    if counts["bad"]:
        frame.unpersist()
        raise first_problem(source, text, parsed)
    return Loaded(source, frame.drop(PROBLEM), counts["lines"], counts["null_ids"])


def first_problem(source: LinesFile, text: DataFrame, parsed: DataFrame) -> InputError:
    """The error for the first bad line of the file, with its line number (1-based)."""
    bad = (
        parsed.filter(F.col(PROBLEM).isNotNull())
        .orderBy("_block", "_row")
        .select("_block", "_row", PROBLEM, "value")
        .first()
    )
    block, row = F.col("_block"), F.col("_row")
    before = (block < bad["_block"]) | ((block == bad["_block"]) & (row <= bad["_row"]))
    number = text.agg(F.count_if(before).alias("n")).first()["n"]
    return InputError(source.path, f"{bad[PROBLEM]}: {bad['value'][:SNIPPET]!r}", number)
