"""streamlab.stack.spark_ui: where a query's state partitions ran, read from a Spark UI's REST API.

The real thing runs in tests/stack/test_cluster.py (two executors of a standalone cluster); here a small HTTP
server answers with what Spark's /api/v1 returns, so the reading itself is checked in the fast tier."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from streamlab.stack.spark_ui import get_json, state_partition_executors

QUERY = "5f0c2a9e-1111-2222-3333-444455556666"
OTHER = "0a0a0a0a-1111-2222-3333-444455556666"
APP = "/api/v1/applications/app-1"
# Two jobs of our query's batch 3 and one of another query: only stages that read a shuffle count.
PAGES = {
    f"{APP}/jobs?status=succeeded": [
        {"description": f"\nid = {QUERY}\nrunId = r\nbatch = 3", "stageIds": [7, 8]},
        {"description": f"\nid = {OTHER}\nrunId = r\nbatch = 0", "stageIds": [9]},
        {"description": None, "stageIds": [10]},
    ],
    f"{APP}/stages/7": [{"attemptId": 0, "status": "COMPLETE", "shuffleReadBytes": 0}],  # reads Kafka
    f"{APP}/stages/8": [{"attemptId": 0, "status": "COMPLETE", "shuffleReadBytes": 512},
                        {"attemptId": 1, "status": "FAILED", "shuffleReadBytes": 512}],
    f"{APP}/stages/9": [{"attemptId": 0, "status": "COMPLETE", "shuffleReadBytes": 99}],
    f"{APP}/stages/8/0/taskList?length=10000": [
        {"status": "SUCCESS", "partitionId": 0, "index": 0, "executorId": "0", "host": "10.0.0.1"},
        {"status": "SUCCESS", "partitionId": 1, "index": 1, "executorId": "1", "host": "10.0.0.2"},
        {"status": "FAILED", "partitionId": 1, "index": 2, "executorId": "0", "host": "10.0.0.1"},
    ],
}


class _Api(BaseHTTPRequestHandler):
    def do_GET(self):  # the name http.server calls
        if self.path not in PAGES:
            self.send_error(404)
            return
        body = json.dumps(PAGES[self.path]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def ui_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _session(ui: str | None):
    return SimpleNamespace(sparkContext=SimpleNamespace(uiWebUrl=ui, applicationId="app-1"))


def test_state_partitions_are_the_successful_tasks_of_the_querys_shuffle_stages(ui_url):
    table = state_partition_executors(_session(ui_url), QUERY)
    assert table.to_dict(orient="records") == [
        {"batch": 3, "stage": 8, "partition": 0, "executor": "0", "host": "10.0.0.1"},
        {"batch": 3, "stage": 8, "partition": 1, "executor": "1", "host": "10.0.0.2"},
    ]


def test_a_query_with_no_batches_gives_an_empty_table(ui_url):
    table = state_partition_executors(_session(ui_url), "no-such-query")
    assert table.empty and list(table.columns) == ["batch", "stage", "partition", "executor", "host"]


def test_without_the_ui_it_says_where_placement_is_read():
    with pytest.raises(RuntimeError, match="spark.ui.enabled=false"):
        state_partition_executors(_session(None), QUERY)


def test_get_json_reads_a_page(ui_url):
    assert get_json(f"{ui_url}{APP}/stages/7") == PAGES[f"{APP}/stages/7"]
