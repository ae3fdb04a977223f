"""The API client's request hook: verb/resource classification, rate limit, metrics, config."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from harness.fake_http import serving
from kubernetes_asyncio.client import Configuration, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException
from tls_certs import write_serving_cert

from bootimage_controller.kube.client import (
    TLS_READ_BUFFER,
    ClientConfigError,
    InstrumentedApiClient,
    classify_request,
    current_namespace,
    load_configuration,
    make_api_client,
    object_path,
    proxy_for,
    smaller_tls_read_buffers,
    write_and_discard,
)
from bootimage_controller.kube.retry import TokenBucket
from bootimage_controller.observability import REGISTRY

H = "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    ("method", "url", "query", "expected"),
    [
        ("GET", f"{H}/api/v1/namespaces/ns/configmaps/cm", None, ("get", "configmaps")),
        ("GET", f"{H}/api/v1/namespaces/ns/configmaps", [("labelSelector", "a=b")], ("list", "configmaps")),
        ("GET", f"{H}/api/v1/namespaces/ns/configmaps", [("watch", True)], ("watch", "configmaps")),
        ("GET", f"{H}/api/v1/nodes", [("watch", "true")], ("watch", "nodes")),
        ("GET", f"{H}/api/v1/nodes", [("watch", False)], ("list", "nodes")),
        ("GET", f"{H}/api/v1/namespaces", None, ("list", "namespaces")),
        ("GET", f"{H}/api/v1/namespaces/ns", None, ("get", "namespaces")),
        ("POST", f"{H}/api/v1/namespaces/ns/events", None, ("create", "events")),
        (
            "GET",
            f"{H}/apis/machine.openshift.io/v1beta1/namespaces/m/machinesets",
            None,
            ("list", "machinesets"),
        ),
        (
            "PATCH",
            f"{H}/apis/machine.openshift.io/v1beta1/namespaces/m/machinesets/w1",
            None,
            ("patch", "machinesets"),
        ),
        (
            "PATCH",
            f"{H}/apis/operator.openshift.io/v1/machineconfigurations/cluster/status",
            None,
            ("patch", "machineconfigurations/status"),
        ),
        ("PUT", f"{H}/apis/coordination.k8s.io/v1/namespaces/x/leases/l", None, ("update", "leases")),
        ("DELETE", f"{H}/api/v1/namespaces/ns/configmaps/cm", None, ("delete", "configmaps")),
        ("DELETE", f"{H}/api/v1/namespaces/ns/configmaps", None, ("deletecollection", "configmaps")),
        ("GET", f"{H}/version", None, ("get", "")),
        ("GET", f"{H}/apis/config.openshift.io/v1", None, ("get", "")),
        # a server URL behind a proxy path prefix
        ("GET", "https://rancher/k8s/clusters/c-1/api/v1/nodes/n1", None, ("get", "nodes")),
    ],
)
def test_classify_request(method: str, url: str, query: Any, expected: tuple[str, str]) -> None:
    assert classify_request(method, url, query) == expected


def count(verb: str, resource: str, code: str) -> float:
    value = REGISTRY.get_sample_value(
        "bootimage_controller_api_requests_total", {"verb": verb, "resource": resource, "code": code}
    )
    return value or 0.0


class CountingBucket(TokenBucket):
    def __init__(self) -> None:
        super().__init__(qps=1000, burst=1000)
        self.acquired = 0

    async def acquire(self, sleep: Any = None) -> None:
        self.acquired += 1


@pytest.fixture
async def fake_apiserver() -> AsyncIterator[str]:
    async def configmap(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "missing":
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}}
        return web.json_response(body)

    async def machinesets(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "MachineSetList",
                "metadata": {"resourceVersion": "5"},
                "items": [],
            }
        )

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/configmaps/{name}", configmap)
    app.router.add_get("/apis/machine.openshift.io/v1beta1/namespaces/m/machinesets", machinesets)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_every_request_is_rate_limited_and_counted(fake_apiserver: str) -> None:
    bucket = CountingBucket()
    api = InstrumentedApiClient(Configuration(host=fake_apiserver), bucket)
    try:
        ok_before = count("get", "configmaps", "200")
        missing_before = count("get", "configmaps", "404")
        list_before = count("list", "machinesets", "200")
        cm = await CoreV1Api(api).read_namespaced_config_map("cm", "ns")
        assert cm.metadata.name == "cm"
        with pytest.raises(ApiException) as info:
            await CoreV1Api(api).read_namespaced_config_map("missing", "ns")
        assert info.value.status == 404
        await CustomObjectsApi(api).list_namespaced_custom_object(
            "machine.openshift.io", "v1beta1", "m", "machinesets"
        )
        assert bucket.acquired == 3
        assert count("get", "configmaps", "200") == ok_before + 1
        assert count("get", "configmaps", "404") == missing_before + 1
        assert count("list", "machinesets", "200") == list_before + 1
    finally:
        await api.close()


async def test_unreachable_server_counts_as_error() -> None:
    api = InstrumentedApiClient(Configuration(host="http://127.0.0.1:9"))  # discard port: refused
    before = count("get", "configmaps", "error")
    try:
        with pytest.raises(Exception):  # noqa: B017 - aiohttp's connection error type varies
            await CoreV1Api(api).read_namespaced_config_map("cm", "ns")
    finally:
        await api.close()
    assert count("get", "configmaps", "error") == before + 1


def write_kubeconfig(path: Path, server: str) -> None:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "t",
                "clusters": [{"name": "t", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
            }
        )
    )


async def test_make_api_client_from_kubeconfig(tmp_path: Path, fake_apiserver: str) -> None:
    kc = tmp_path / "kubeconfig"
    write_kubeconfig(kc, fake_apiserver)
    api = await make_api_client(str(kc), qps=5, burst=10)
    try:
        assert isinstance(api, InstrumentedApiClient)
        assert api.limiter is not None and (api.limiter.qps, api.limiter.burst) == (5, 10)
        assert api.configuration.host == fake_apiserver
        assert str(api.user_agent).startswith("bootimage-controller/")
        cm = await CoreV1Api(api).read_namespaced_config_map("cm", "ns")
        assert cm.metadata.name == "cm"
    finally:
        await api.close()


async def test_qps_zero_disables_the_limiter(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    write_kubeconfig(kc, "https://127.0.0.1:1")
    api = await make_api_client(str(kc), qps=0)
    assert api.limiter is None
    await api.close()


async def test_without_kubeconfig_or_cluster_the_error_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    with pytest.raises(ClientConfigError, match="--kubeconfig"):
        await load_configuration(None)


async def test_a_kubeconfig_variable_naming_no_file_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    # The same words as `plan --from-cluster` and `fleet` (kube/kubeconfig.missing_kubeconfig).
    with pytest.raises(ClientConfigError, match=r"^\$KUBECONFIG names .*nope, and no such file exists$"):
        await load_configuration(None)


async def test_a_malformed_kubeconfig_is_one_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: [\n")
    with pytest.raises(ClientConfigError, match=r"--kubeconfig .*bad: not a usable kubeconfig: .*line 4"):
        await load_configuration(str(bad))


async def test_kubeconfig_env_is_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kc = tmp_path / "kc"
    write_kubeconfig(kc, "https://192.0.2.1:6443")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kc))
    cfg = await load_configuration(None)
    assert cfg.host == "https://192.0.2.1:6443"


def test_current_namespace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert current_namespace() == "from-env"
    monkeypatch.delenv("POD_NAMESPACE")
    sa = tmp_path / "namespace"
    sa.write_text("from-sa\n")
    monkeypatch.setattr("bootimage_controller.kube.client.SERVICE_ACCOUNT_NAMESPACE", sa)
    assert current_namespace() == "from-sa"
    monkeypatch.setattr("bootimage_controller.kube.client.SERVICE_ACCOUNT_NAMESPACE", tmp_path / "absent")
    assert current_namespace("fallback") == "fallback"


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("no_proxy", "url", "expected"),
    [
        ("", "https://api.example:6443", "http://proxy:3128"),
        ("", "http://api.example:6443", "http://plain-proxy:3128"),
        ("api.example", "https://api.example:6443", None),
        (".example", "https://api.example:6443", None),
        ("example", "https://api.example:6443", None),  # a domain covers its subdomains
        ("other.example", "https://api.example:6443", "http://proxy:3128"),
        ("*", "https://api.example:6443", None),
        # OpenShift's cluster-wide proxy lists the service network as a CIDR; the in-cluster API
        # address (KUBERNETES_SERVICE_HOST) is in it.
        ("10.128.0.0/14,172.30.0.0/16,.svc", "https://172.30.0.1:443", None),
        ("10.128.0.0/14", "https://172.30.0.1:443", "http://proxy:3128"),
        ("fd02::/112", "https://[fd02::1]:443", None),
        ("not-a-cidr/99, 172.30.0.0/16", "https://172.30.0.1:443", None),
    ],
)
def test_proxy_for_follows_the_proxy_environment(
    no_proxy_env: pytest.MonkeyPatch, no_proxy: str, url: str, expected: str | None
) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy:3128")
    no_proxy_env.setenv("HTTP_PROXY", "http://plain-proxy:3128")
    no_proxy_env.setenv("NO_PROXY", no_proxy)
    assert proxy_for(url) == expected


def test_no_proxy_variables_no_proxy(no_proxy_env: pytest.MonkeyPatch) -> None:
    assert proxy_for("https://api.example:6443") is None


async def test_requests_go_through_the_environment_proxy(no_proxy_env: pytest.MonkeyPatch, fake_apiserver: str) -> None:
    """The proxy is read once from the environment, yet requests still use it: the fake API server
    stands in for the proxy (aiohttp sends it the absolute URL of a host that does not resolve)."""
    no_proxy_env.setenv("HTTP_PROXY", fake_apiserver)
    api = InstrumentedApiClient(Configuration(host="http://kube-api.invalid:6443"))
    try:
        cm = await CoreV1Api(api).read_namespaced_config_map("cm", "ns")
        assert cm.metadata.name == "cm"
    finally:
        await api.close()
    no_proxy_env.setenv("NO_PROXY", "kube-api.invalid")
    direct = InstrumentedApiClient(Configuration(host="http://kube-api.invalid:6443"))
    try:
        with pytest.raises(aiohttp.ClientConnectionError):  # straight to a host that does not resolve
            await CoreV1Api(direct).read_namespaced_config_map("cm", "ns")
    finally:
        await direct.close()


async def test_a_netrc_entry_for_the_api_host_does_not_break_token_auth(
    tmp_path: Path, no_proxy_env: pytest.MonkeyPatch, fake_apiserver: str
) -> None:
    """With the environment trusted per request (kubernetes_asyncio's default) aiohttp would add the
    `~/.netrc` login as basic auth beside the bearer token and refuse the request."""
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login admin password hunter2\n")
    (tmp_path / ".netrc").chmod(0o600)
    no_proxy_env.setenv("HOME", str(tmp_path))
    no_proxy_env.setenv("NETRC", str(tmp_path / ".netrc"))
    kc = tmp_path / "kubeconfig"
    write_kubeconfig(kc, fake_apiserver)
    api = await make_api_client(str(kc))
    try:
        cm = await CoreV1Api(api).read_namespaced_config_map("cm", "ns")
        assert cm.metadata.name == "cm"
    finally:
        await api.close()


async def test_tls_connections_read_64_kib_at_a_time_and_large_bodies_arrive_whole(tmp_path: Path) -> None:
    """asyncio's 256 KiB TLS read buffer, zeroed per connection, was 6.6 MiB across the daemon's
    watches at 5,000 MachineSets (issue 36): the client lowers it, and a body far larger than the
    buffer still arrives byte for byte."""
    smaller_tls_read_buffers()
    assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    write_serving_cert(cert, key)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    body = bytes(range(256)) * (5 * TLS_READ_BUFFER // 256 + 7)

    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_context)
    port = server.sockets[0].getsockname()[1]
    try:
        client_context = ssl.create_default_context(cafile=str(cert))
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context, server_hostname="localhost")
        assert await reader.read() == body
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_object_path_quotes_each_part_as_the_generated_client_does() -> None:
    assert object_path("machine.openshift.io", "v1beta1", "openshift-machine-api", "machinesets", "w-1a") == (
        "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets/w-1a"
    )
    assert object_path("", "v1", "ns", "configmaps", "a/b c") == "/api/v1/namespaces/ns/configmaps/a%2Fb%20c"


async def test_write_and_discard_sends_what_the_generated_patch_sends() -> None:
    """The lean write path of the boot image patches: the same method, path, headers (the bearer
    token, the user agent, the content type) and JSON body as `patch_namespaced_custom_object`, and
    the same `ApiException` for a refusal."""
    seen: list[tuple[str, str, Any, Any]] = []
    answer = {"status": 200}

    async def record(request: web.Request) -> web.Response:
        seen.append((request.method, request.path_qs, request.headers.copy(), await request.json()))
        if answer["status"] != 200:
            return web.json_response({"kind": "Status", "reason": "Conflict", "message": "the object has been modified"},
                                     status=answer["status"])
        return web.json_response({"kind": "MachineSet", "metadata": {"name": "w"}})

    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
           {"op": "replace", "path": "/spec/x", "value": {"id": "ami-1"}}]
    async with serving(record) as url:
        cfg = Configuration(host=url, api_key={"BearerToken": "sekret"}, api_key_prefix={"BearerToken": "Bearer"})
        api = InstrumentedApiClient(cfg)
        try:
            await CustomObjectsApi(api).patch_namespaced_custom_object(
                "machine.openshift.io", "v1beta1", "ns", "machinesets", "w", ops,
                _content_type="application/json-patch+json", _preload_content=False)
            path = object_path("machine.openshift.io", "v1beta1", "ns", "machinesets", "w")
            await write_and_discard(api, "PATCH", path, ops, "application/json-patch+json")
            answer["status"] = 409
            with pytest.raises(ApiException) as refused:
                await write_and_discard(api, "PATCH", path, ops, "application/json-patch+json")
        finally:
            await api.close()
    assert refused.value.status == 409 and "the object has been modified" in str(refused.value.reason)
    generated, lean, _ = seen
    assert lean[:2] == generated[:2] == ("PATCH", "/apis/machine.openshift.io/v1beta1/namespaces/ns/machinesets/w")
    assert lean[3] == generated[3] == ops
    for header in ("Authorization", "Content-Type", "Accept", "User-Agent"):
        assert lean[2][header] == generated[2][header], header
    assert lean[2]["Authorization"] == "Bearer sekret"


async def test_a_context_the_kubeconfig_lacks_is_said_with_the_ones_it_has(tmp_path: Path) -> None:
    """The file is fine; the name is not (issue 47): not "not a usable kubeconfig"."""
    kc = tmp_path / "kc"
    write_kubeconfig(kc, "https://192.0.2.1:6443")
    names = [c["name"] for c in yaml.safe_load(kc.read_text())["contexts"]]
    with pytest.raises(ClientConfigError) as err:
        await load_configuration(str(kc), "prod-east")
    assert str(err.value) == f"--kubeconfig {kc}: no context 'prod-east' (--context); it has: {', '.join(names)}"
    assert (await load_configuration(str(kc), names[0])).host == "https://192.0.2.1:6443"
