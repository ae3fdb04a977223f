"""`plan --from-cluster`: the same plan from a live API as from the dump of it.

The API is a small stdlib HTTP server answering the reads `plan` makes with the example cluster's
objects, shaped as the real API server returns them (typed lists without item kinds).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from harness.objects import example_objects, plain_kubeconfig

from .conftest import EXAMPLE, Run

NS_MAPI = "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets"
# Named objects are read as the daemon's informers read them: a list with metadata.name=<name>.
CPMS = "/apis/machine.openshift.io/v1/namespaces/openshift-machine-api/controlplanemachinesets"
MC = "/apis/operator.openshift.io/v1/machineconfigurations"
INFRA = "/apis/config.openshift.io/v1/infrastructures"
CV = "/apis/config.openshift.io/v1/clusterversions"
MCO_CO = "/apis/config.openshift.io/v1/clusteroperators"
FG = "/apis/config.openshift.io/v1/featuregates"
CM = "/api/v1/namespaces/openshift-machine-config-operator/configmaps"
NODES = "/api/v1/nodes"
SECRETS = "/api/v1/namespaces/openshift-machine-api/secrets/"


class FakeApi:
    def __init__(self) -> None:
        self.objects = example_objects()
        self.status_for: dict[str, int] = {}  # path -> HTTP status to answer instead
        self.body_for: dict[str, Any] = {}  # path -> a 200 answer of this JSON instead
        self.requests: list[str] = []

    def one(self, kind: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name), None)

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        self.requests.append(path)
        if path in self.status_for:
            return self.status_for[path], {"kind": "Status", "code": self.status_for[path], "message": "injected"}
        if path in self.body_for:
            return 200, self.body_for[path]
        if path == NS_MAPI:
            items = [o for o in self.objects if o["kind"] == "MachineSet"]
            return 200, {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSetList", "items": items,
                         "metadata": {"resourceVersion": "1"}}
        if path == NODES:
            label = query.get("labelSelector", [""])[0]
            items = []
            for o in self.objects:
                if o["kind"] == "Node" and label in o["metadata"].get("labels", {}):
                    item = copy.deepcopy(o)
                    item.pop("kind")  # typed lists carry no item kinds
                    item.pop("apiVersion")
                    items.append(item)
            return 200, {"apiVersion": "v1", "kind": "NodeList", "items": items, "metadata": {"resourceVersion": "1"}}
        singles = {CPMS: ("ControlPlaneMachineSet", "cluster"), MC: ("MachineConfiguration", "cluster"),
                   INFRA: ("Infrastructure", "cluster"), CV: ("ClusterVersion", "version"),
                   CM: ("ConfigMap", "coreos-bootimages"), MCO_CO: ("ClusterOperator", "machine-config"),
                   FG: ("FeatureGate", "cluster")}
        if path not in singles:
            return 404, {"kind": "Status", "code": 404, "reason": "NotFound"}
        kind, name = singles[path]
        assert query.get("fieldSelector") == [f"metadata.name={name}"], (path, query)
        obj = self.one(kind, name)
        return 200, {"kind": f"{kind}List", "items": [obj] if obj else [], "metadata": {"resourceVersion": "1"}}


@pytest.fixture
def fake_api(tmp_path: Path) -> Iterator[tuple[FakeApi, Path]]:
    api = FakeApi()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            code, body = api.answer(url.path, parse_qs(url.query))
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that hung up early is not the test's business

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "fake", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))
    try:
        yield api, kubeconfig
    finally:
        server.shutdown()
        server.server_close()


def test_live_plan_equals_the_plan_of_the_dump(run: Run, fake_api: tuple[FakeApi, Path]) -> None:
    api, kubeconfig = fake_api
    live = run("plan", "--from-cluster", "--kubeconfig", kubeconfig, "-o", "json")
    assert live.code == 0, live.err
    assert live.json() == run("plan", EXAMPLE, "-o", "json").json()
    assert SECRETS not in "".join(api.requests), "no Secret is read without --cloud-verify"


def test_missing_objects_are_fine(run: Run, fake_api: tuple[FakeApi, Path]) -> None:
    api, kubeconfig = fake_api
    api.status_for[CPMS] = 404
    api.status_for[NODES] = 403  # a user who may not list Nodes
    result = run("plan", "--from-cluster", "--kubeconfig", kubeconfig, "-o", "json")
    assert result.code == 0, result.err
    names = {m["name"] for m in result.json()["machineSets"]}
    assert "cluster" not in names and len(names) == 6


def test_missing_configmap_in_the_cluster_is_bad_input(run: Run, fake_api: tuple[FakeApi, Path]) -> None:
    api, kubeconfig = fake_api
    api.status_for[CM] = 404
    result = run("plan", "--from-cluster", "--kubeconfig", kubeconfig)
    assert result.code == 1
    assert "coreos-bootimages" in result.err and "Traceback" not in result.err


def test_server_errors_are_reported_without_a_traceback(run: Run, fake_api: tuple[FakeApi, Path]) -> None:
    api, kubeconfig = fake_api
    api.status_for[NS_MAPI] = 500
    result = run("plan", "--from-cluster", "--kubeconfig", kubeconfig)
    assert result.code == 1
    # The kubeconfig, context and server first (SPEC section 4), then what failed.
    assert result.err.startswith(f"error: kubeconfig {kubeconfig}, context fake, server http://127.0.0.1:")
    assert ": reading MachineSets: HTTP 500" in result.err
    assert "Traceback" not in result.err


def test_an_answer_that_is_not_a_json_object_is_said_without_a_traceback(run: Run, fake_api: tuple[FakeApi, Path]) -> None:
    api, kubeconfig = fake_api
    api.body_for[NS_MAPI] = ["not", "a", "list", "object"]  # what a misconfigured proxy might return
    result = run("plan", "--from-cluster", "--kubeconfig", kubeconfig)
    assert result.code == 1
    assert ": reading MachineSets: the API server's answer is not a JSON object" in result.err
    assert "Traceback" not in result.err


def test_unreachable_cluster(run: Run, tmp_path: Path) -> None:
    kubeconfig = plain_kubeconfig(tmp_path, "http://127.0.0.1:9")
    result = run("plan", "--from-cluster", "--kubeconfig", kubeconfig)
    assert result.code == 1
    assert result.err.startswith(f"error: kubeconfig {kubeconfig}, context c, server http://127.0.0.1:9: reading ")
    assert "Traceback" not in result.err


def test_unusable_kubeconfig(run: Run, tmp_path: Path) -> None:
    result = run("plan", "--from-cluster", "--kubeconfig", tmp_path / "missing-kubeconfig")
    assert result.code == 1
    assert "Traceback" not in result.err
    assert result.err.startswith("error: --kubeconfig ")
    broken = tmp_path / "broken-kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\n")
    result = run("plan", "--from-cluster", "--kubeconfig", broken)
    assert result.code == 1
    assert "Traceback" not in result.err
    assert "broken-kubeconfig" in result.err


def test_a_hanging_server_is_given_up_after_timeout_naming_kubeconfig_context_and_server(
    run: Run, tmp_path: Path
) -> None:
    """A server that accepts and never answers: plan --from-cluster gives up after --timeout (30 s by
    default) and says which kubeconfig, context and server (issue 33, item 4)."""
    import socket
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    port = silent.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "prod",
        "clusters": [{"name": "east", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "me", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "prod", "context": {"cluster": "east", "user": "me"}},
                     {"name": "other", "context": {"cluster": "east", "user": "me"}}],
    }))
    try:
        started = time.monotonic()
        result = run("plan", "--from-cluster", "--kubeconfig", kubeconfig, "--context", "other", "--timeout", "2s")
        took = time.monotonic() - started
    finally:
        silent.close()
    assert result.code == 1 and took < 20, (result.code, took)
    assert f"kubeconfig {kubeconfig}, context other, server http://127.0.0.1:{port}" in result.err
    assert "no answer within 2 s (--timeout)" in result.err and "Traceback" not in result.err


def test_context_is_for_from_cluster_only(run: Run) -> None:
    result = run("plan", str(EXAMPLE), "--context", "prod")
    assert result.code == 2 and "--context are used only with --from-cluster" in result.err


def test_a_kubeconfig_variable_naming_a_missing_file_says_so(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `KUBECONFIG=missing fleet --all-contexts` once said "set KUBECONFIG" although it was set.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    for argv in (("plan", "--from-cluster"), ("fleet", "--all-contexts")):
        result = run(*argv)
        assert result.code == 1, argv
        assert f"$KUBECONFIG names {tmp_path / 'missing'}, and no such file exists" in result.err, argv
        assert "set KUBECONFIG" not in result.err


@pytest.mark.parametrize("command", [("rollback", "x"), ("release-claims",), ("hand-back", "x"), ("fleet",),
                                     ("plan", "--from-cluster")])
def test_against_a_dead_server_one_error_line_and_no_log_noise(run: Run, tmp_path: Path, command: tuple[str, ...]) -> None:
    """Issue 33: these printed 4 to 59 JSON lines before their one `error:` line."""
    kubeconfig = plain_kubeconfig(tmp_path, "http://127.0.0.1:9")
    result = run(*command, "--kubeconfig", kubeconfig)
    assert result.code == 1
    said = [line for line in result.err.splitlines() if line.strip() and not line.startswith("fleet: ")]
    if command[0] == "fleet":  # the row says it; stderr has only the progress line
        assert said == [] and "127.0.0.1:9" in result.out
    else:
        assert len(said) == 1 and said[0].startswith("error: ") and "127.0.0.1:9" in said[0], result.err


def test_a_server_answering_404_to_everything_is_not_an_empty_file(run: Run, tmp_path: Path) -> None:
    class NotKubernetes(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"not here\n")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotKubernetes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = plain_kubeconfig(tmp_path, f"http://127.0.0.1:{server.server_address[1]}")
    try:
        result = run("plan", "--from-cluster", "--kubeconfig", kubeconfig)
    finally:
        server.shutdown()
    assert result.code == 1
    assert "every read answered 404 Not Found" in result.err and "empty file" not in result.err, result.err
