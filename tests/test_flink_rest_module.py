"""streamlab_flink_rest: several documents of a REST API in one module run, in the form
streamlab_files keeps them; a path that does not answer with JSON fails it by name. (Over HTTPS
with the kit's CA, on the test hosts: every Flink experiment in test_lab_experiment.py.)"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import free_port, run_module

ANSWERS = {
    "/jobs/abc": {"jid": "abc", "vertices": [{"parallelism": 2}]},
    "/jobmanager/config": [{"key": "security.ssl.internal.enabled", "value": "true"}],
    "/not-json": "plain text",
}


class JobManager(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        answer = ANSWERS.get(self.path)
        if answer is None:
            self.send_error(404, "Not Found")
            return
        body = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def jobmanager() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), JobManager)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_every_document_in_one_run_and_as_files_to_keep(jobmanager, tmp_path):
    documents = {"flink-job": "/jobs/abc", "flink-jobmanager-config": "/jobmanager/config"}
    rc, result = run_module(
        "streamlab_flink_rest",
        {"url": jobmanager, "documents": documents, "keep_dir": str(tmp_path / "engine")},
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert result["documents"] == {
        "flink-job": ANSWERS["/jobs/abc"],
        "flink-jobmanager-config": ANSWERS["/jobmanager/config"],
    }
    kept = {entry["dest"]: json.loads(entry["content"]) for entry in result["files"]}
    assert kept == {
        f"{tmp_path}/engine/flink-job.json": ANSWERS["/jobs/abc"],
        f"{tmp_path}/engine/flink-jobmanager-config.json": ANSWERS["/jobmanager/config"],
    }
    assert not (tmp_path / "engine").exists()  # it only reads


def test_a_path_without_json_fails_by_name_and_keeps_what_answered(jobmanager):
    documents = {"job": "/jobs/abc", "gone": "/jobs/gone", "text": "/not-json"}
    rc, result = run_module("streamlab_flink_rest", {"url": jobmanager, "documents": documents})
    assert rc != 0
    message = result["msg"]
    assert "did not answer 2 of 3 requests with JSON" in message, message
    assert f"{jobmanager.rstrip('/')}/jobs/gone: HTTP Error 404" in message, message
    assert f"{jobmanager.rstrip('/')}/not-json:" in message, message
    assert result["documents"] == {"job": ANSWERS["/jobs/abc"]}
    assert "files" not in result


def test_a_jobmanager_that_does_not_listen_is_named():
    url = f"http://127.0.0.1:{free_port()}"
    rc, result = run_module(
        "streamlab_flink_rest", {"url": url, "documents": {"overview": "/overview"}}
    )
    assert rc != 0 and f"{url}/overview:" in result["msg"], result
    assert "Connection refused" in result["msg"], result
