"""Bad input stops summarize with the file and line, and leaves nothing written."""

from __future__ import annotations

import json

import pytest
from analysis_runs import BASE_MS, RunDir

from analysis import summarize
from analysis.io import InputError

B = BASE_MS


def small_run(tmp_path) -> RunDir:
    run = RunDir(tmp_path)
    for i in range(1, 6):
        run.produce(i, B + 100 * i).receive(i, B + 100 * i + 5)
    return run


INPUTS = {"run.json", "faults.jsonl", "produced.jsonl", "received.jsonl", "received.summary.json"}


def assert_nothing_written(path):
    assert {p.name for p in path.iterdir()} <= INPUTS


@pytest.mark.parametrize(
    "name,line_number,text,problem",
    [
        ("received.jsonl", 3, "not json at all", "not a JSON object"),
        ("received.jsonl", 6, "", "not a JSON object"),
        ("received.jsonl", 2, '{"recv_ms":5,"partition":0,"offset":1}', "a record without msg_id"),
        ("received.jsonl", 4, '{"msg_id":"7","recv_ms":5}', "a field has the wrong type"),
        ("received.jsonl", 1, '{"msg_id":7}', "no recv_ms"),
        ("produced.jsonl", 2, '{"intended_ms":5,"sent_ms":5,"acked":true}', "without msg_id"),
        ("produced.jsonl", 5, '{"msg_id":null,"intended_ms":5,"acked":true}', "msg_id is null"),
        ("produced.jsonl", 1, '{"msg_id":1,"intended_ms":5,"acked":"yes"}', "wrong type"),
        ("produced.jsonl", 3, "[1, 2, 3]", "not a JSON object"),
    ],
)
def test_a_bad_line_names_its_file_and_number(spark, tmp_path, name, line_number, text, problem):
    run = small_run(tmp_path)
    lines = run.received_lines if name.startswith("received") else run.produced_lines
    lines.insert(line_number - 1, text + "\n")
    path = run.write()
    with pytest.raises(InputError) as caught:
        summarize.summarize(spark, path)
    error = caught.value
    assert (error.path, error.line) == (path / name, line_number)
    assert problem in str(error) and str(error).startswith(f"{path / name}:{line_number}: ")
    assert_nothing_written(path)


def test_line_numbers_are_right_across_many_splits(spark, tmp_path):
    run = RunDir(tmp_path)
    for i in range(1, 40_001):
        run.produce(i, B + i).receive(i, B + i + 3)
    run.received_lines[31_415] = '{"msg_id":31416,"recv_ms":"late"}\n'
    path = run.write()
    spark.conf.set("spark.sql.files.maxPartitionBytes", "128k")  # about 25 splits
    try:
        with pytest.raises(InputError) as caught:
            summarize.summarize(spark, path)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert caught.value.line == 31_416
    assert "received.jsonl:31416: a field has the wrong type" in str(caught.value)


def test_a_cut_last_line_of_a_final_file_is_an_error(spark, tmp_path):
    run = small_run(tmp_path)
    run.received_lines.append('{"msg_id":6,"recv_')
    path = run.write()
    with pytest.raises(InputError, match=r"received.jsonl:6: not a JSON object"):
        summarize.summarize(spark, path)
    assert_nothing_written(path)


@pytest.mark.parametrize("missing", ["run.json", "produced.jsonl", "received.jsonl"])
def test_a_missing_file_is_named(tmp_path, missing):
    path = small_run(tmp_path).write()
    (path / missing).unlink()
    with pytest.raises(InputError, match=f"{missing}: missing"):
        summarize.prepare(path)


@pytest.mark.parametrize(
    "run_json,problem",
    [
        ("[]", "not a JSON object"),
        ('{"engine": "flink"}', "no run_id"),
        ('{"run_id": "x"}', "no engine"),
        ('{"run_id": "x", "engine": "flink", "parameters": {"warmup_s": -1}}', "warmup_s=-1"),
        ("{", "not JSON"),
    ],
)
def test_a_bad_run_json_is_named(tmp_path, run_json, problem):
    path = small_run(tmp_path).write()
    (path / "run.json").write_text(run_json)
    with pytest.raises(InputError, match="run.json") as caught:
        summarize.prepare(path)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    "text,problem",
    [
        ('{"fault":"kill","start_ms":1}\nnope\n', "faults.jsonl:2: not JSON"),
        ('{"fault":"kill"}\n', "faults.jsonl:1: no start_ms"),
        ('{"fault":"kill","start_ms":1,"end_ms":"later"}\n', "faults.jsonl:1: end_ms"),
    ],
)
def test_a_bad_faults_line_is_named(tmp_path, text, problem):
    path = small_run(tmp_path).write()
    (path / "faults.jsonl").write_text(text)
    with pytest.raises(InputError, match=problem):
        summarize.prepare(path)


def test_a_malformed_engine_record_is_counted_not_refused(spark, tmp_path):
    run = small_run(tmp_path)
    run.receive(None, B + 900)
    s = summarize.summarize(spark, run.write(), draw=False)
    assert (s["malformed_records"], s["received_records"], s["duplicate_records"]) == (1, 6, 0)
    assert json.loads((run.path / "summary.json").read_text())["malformed_records"] == 1
