"""Shared pytest fixtures. Each helper keeps its fixtures in its own marked section."""

from __future__ import annotations

# ==== section: test control plane (tests/harness; owner: control-plane harness) ====================
# kube_cluster   session: one real loopback kube-apiserver + etcd + kube-controller-manager (GC on)
# kube_api       function, async: a kubernetes_asyncio ApiClient as admin, on a cluster reset first
# fresh_cluster  function: factory for throwaway clusters with extra kube-apiserver args
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from harness.cluster import NAMESPACES, ClusterFactory, TestCluster, start_test_cluster
from harness.objects import api_client_for, reset_cluster
from kubernetes_asyncio import client as k8s_client


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """One control plane for the whole session (default watch cache, CRDs established)."""
    cluster = start_test_cluster(tmp_path_factory.mktemp("kube-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def kube_api(kube_cluster: TestCluster) -> AsyncIterator[k8s_client.ApiClient]:
    """Admin ApiClient on the session cluster, after deleting what earlier tests left behind."""
    async with await api_client_for(kube_cluster.kubeconfig) as api:
        await reset_cluster(api)
        yield api


@pytest.fixture
def fresh_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFactory]:
    """`fresh_cluster(extra_apiserver_args=("--watch-cache=false",), with_controller_manager=False)`
    starts a separate cluster, stopped after the test."""
    started: list[TestCluster] = []

    def start(
        *, extra_apiserver_args: Sequence[str] = (), with_controller_manager: bool = True,
        namespaces: Sequence[str] = NAMESPACES, crd_dirs: Sequence[Path] = (),
    ) -> TestCluster:
        cluster = start_test_cluster(
            tmp_path_factory.mktemp("fresh-cluster"),
            extra_apiserver_args=extra_apiserver_args,
            with_controller_manager=with_controller_manager,
            namespaces=namespaces,
            crd_dirs=crd_dirs,
        )
        started.append(cluster)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop()


# ==== end of section: test control plane ============================================================


# ==== section: no traceback in any daemon log (issue 24) ===========================================
# A daemon run in a test logs to the captured output (structlog, console or JSON); a traceback there
# means something ended in an exception instead of a condition, a log line and an exit code. The
# test fails even if its own assertions held. Daemon processes that log to files are checked by
# `assert_no_traceback` where the test reads them.
TRACEBACK = "Traceback (most recent call last)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "teardown" or not report.passed:
        return
    # Daemons run in the integration and reliability tests; unit tests log injected faults freely.
    if not ({"integration", "reliability"} & set(item.keywords)) or "traceback_expected" in item.keywords:
        return
    captured = "".join(text for _when, _key, text in item._report_sections)
    if TRACEBACK in captured:
        report.outcome = "failed"
        report.longrepr = f"a traceback was logged during the test (issue 24: none may be):\n{_around(captured)}"


def _around(text: str) -> str:
    at = text.index(TRACEBACK)
    return text[max(0, at - 1500): at + 3000]


def assert_no_traceback(log_text: str, where: str = "daemon log") -> None:
    assert TRACEBACK not in log_text, f"{where} has a traceback:\n{_around(log_text)}"
# ==== end of section: no traceback in any daemon log ================================================


# ==== section: the soak (tests/soak) =================================================================
# Minutes of waiting on a settled fleet: deselected unless `--soak` is given; hack/test.sh runs it
# beside the rest of the suite, in a pytest process (and a control plane) of its own.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", help="run the soak tests (tests/soak) too")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--soak"):
        soak = [item for item in items if item.get_closest_marker("soak") is not None]
        if soak:
            config.hook.pytest_deselected(items=soak)
            items[:] = [item for item in items if item.get_closest_marker("soak") is None]
    items.sort(key=_schedule_rank)  # stable: each file stays whole and in its place among its rank


# ==== section: the workers' order ====================================================================
# hack/test.sh runs `-n 4 --dist loadfile --no-loadscope-reorder`: the workers take files in the order
# collected, so the files marked `heavy` (a minute each on 2 cores) go first, then the rest that run
# the control plane, and the many quick in-process tests fill the workers' ends. xdist's own order
# (files with the most tests first) left the one-test, minute-long files to start last, and one
# worker ran them alone for the last minute of the suite.


def _schedule_rank(item: pytest.Item) -> int:
    if item.get_closest_marker("heavy") is not None:
        return 0
    return 1 if item.get_closest_marker("integration") is not None else 2
