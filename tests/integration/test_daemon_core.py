"""The daemon core's promises on a real kube-apiserver (issue 13 acceptance).

Fencing (a replica that lost the Lease writes nothing, witnessed by the API server's audit log),
the live upgrade gate, `--once` as a whole pass with one exit-code contract, and supervision.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory, TestCluster
from harness.objects import (
    api_client_for,
    apply,
    bootimages_configmap,
    cluster_version,
    delete_object,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
)
from kubernetes_asyncio.client.exceptions import ApiException

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    CLAIM_HOLDER_NAME,
    LEASE_NAME,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
)
from bootimage_controller.daemon import run as daemon
from bootimage_controller.kube.leader import format_micro_time

from .daemon_helpers import (
    AUDIT_POLICY,
    FAST_LEASE,
    REPO,
    audit_writes,
    configmap_from_stream,
    daemon_task,
    list_machinesets,
    run_args,
    start_daemon_process,
    user_data_secret,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

GA_416 = "installer-4.16-416.94.202405291527-0-rhcos.json"
AWS_416 = {"id": "ami-05483066c3caaccf5"}
AWS_422 = {"id": "ami-06a6b025350ff1e23"}
NAMES = ("aws-a", "aws-b")
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{MCO_NAMESPACE}/leases/{LEASE_NAME}"
HOLDER_PATH = f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}"
MC_PATH = "/apis/operator.openshift.io/v1/machineconfigurations/cluster"


async def setup(api: Any, golden: dict[str, Any], *, fixture: str = "aws-x86_64-us-east-1a-4.16.yaml") -> None:
    await apply(api, infrastructure("AWS"))
    await apply(api, cluster_version())
    await apply(api, machine_configuration())
    await apply(api, golden)
    await apply(api, user_data_secret())
    for name in NAMES:
        await apply(api, machineset_from_fixture(fixture, name))


def ami(obj: dict[str, Any]) -> Any:
    return obj["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]


async def amis(api: Any) -> dict[str, Any]:
    fleet = await list_machinesets(api)
    return {name: ami(fleet[name]) for name in NAMES}


def run_once(kubeconfig: Path, *extra: str, identity: str = "once") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "POD_NAME": identity, "POD_NAMESPACE": MCO_NAMESPACE}
    argv = [sys.executable, "-m", "bootimage_controller", "run", "--once", "--kubeconfig", str(kubeconfig),
            "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-format", "json", *extra]
    return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=240, check=False)


def condition(mc: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in (mc.get("status") or {}).get("conditions") or [] if c["type"] == type_)


# ---- the live upgrade gate ------------------------------------------------------------------------


async def test_upgrade_gate_follows_the_clusterversion_as_it_is_now(kube_cluster: TestCluster, kube_api: Any) -> None:
    await setup(kube_api, configmap_from_stream(GA_416, "4.16.0"))
    async with daemon_task(kube_cluster.kubeconfig) as task:
        await wait_for(lambda: mc_reconciled(kube_api), 30, "the 4.16 pass")
        # An upgrade starts: history[0] goes Partial, status.desired is unchanged.
        partial = cluster_version()
        partial["status"]["history"][0]["state"] = "Partial"
        await apply(kube_api, partial)
        await asyncio.sleep(1.0)
        await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
        await asyncio.sleep(5.0)
        assert await amis(kube_api) == dict.fromkeys(NAMES, AWS_416), "nothing may be patched mid-upgrade"

        async def says_partial() -> bool:
            mc = await kube_request(kube_api, "GET", MC_PATH)
            return "Partial" in condition(mc, "BootImageUpdateProgressing").get("message", "")

        await wait_for(says_partial, 15, "the condition to say why nothing is written")

        # The ClusterVersion disappears: the upgrade state is unknown, still nothing is written.
        await delete_object(kube_api, cluster_version())
        await asyncio.sleep(4.0)
        assert await amis(kube_api) == dict.fromkeys(NAMES, AWS_416)
        mc = await kube_request(kube_api, "GET", MC_PATH)
        assert "ClusterVersion version not found" in condition(mc, "BootImageUpdateProgressing")["message"]

        # Completed again: the same daemon now patches (so the checks above could have failed).
        await apply(kube_api, cluster_version())

        async def patched() -> bool:
            return await amis(kube_api) == dict.fromkeys(NAMES, AWS_422)

        await wait_for(patched, 30, "the patches once the upgrade completed")
        assert not task.done()


async def mc_reconciled(api: Any) -> bool:
    try:
        mc = await kube_request(api, "GET", MC_PATH)
        return "Reconciled" in condition(mc, "BootImageUpdateProgressing").get("message", "")
    except (StopIteration, ApiException):
        return False


# ---- run --once: one full pass, one exit-code contract -------------------------------------------


async def test_once_with_the_lease_held_elsewhere_writes_nothing_and_names_the_holder(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await setup(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    now = format_micro_time(datetime.now(UTC))
    await kube_request(kube_api, "POST", LEASE_PATH.rsplit("/", 1)[0], {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": MCO_NAMESPACE},
        "spec": {"holderIdentity": "replica-elsewhere", "leaseDurationSeconds": 137,
                 "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
    })
    try:
        before = await list_machinesets(kube_api)
        result = await asyncio.to_thread(run_once, kube_cluster.kubeconfig)
        assert result.returncode == 1, result.stderr[-2000:]
        assert "replica-elsewhere" in result.stdout + result.stderr
        assert "Traceback" not in result.stdout + result.stderr
        after = await list_machinesets(kube_api)
        assert {n: o["metadata"]["resourceVersion"] for n, o in after.items()} == {
            n: o["metadata"]["resourceVersion"] for n, o in before.items()
        }
        with pytest.raises(ApiException) as missing:
            await kube_request(kube_api, "GET", HOLDER_PATH)
        assert missing.value.status == 404, "not even the claim holder is created"
        events = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
        assert events["items"] == []
        lease = await kube_request(kube_api, "GET", LEASE_PATH)
        assert lease["spec"]["holderIdentity"] == "replica-elsewhere"
    finally:
        await kube_request(kube_api, "DELETE", LEASE_PATH)


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


async def test_once_that_loses_its_lease_to_a_dead_api_server_says_why_in_one_error_line(
    fresh_cluster: ClusterFactory, tmp_path: Path
) -> None:
    """With short lease timings the Lease is lost before any request fails: the one `error:` line
    still names the Lease, the server and why (issue 24: the landed code logged only "lost the lease
    during the pass")."""
    cluster = fresh_cluster(with_controller_manager=False)
    apiserver = cluster.pids["kube-apiserver"]
    async with await api_client_for(cluster.kubeconfig) as api:
        await setup(api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
        for i in range(150):  # a pass long enough to be caught in the middle
            await apply(api, machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", f"bulk-{i:03d}"))
        env = {**os.environ, "POD_NAME": "once", "POD_NAMESPACE": MCO_NAMESPACE}
        argv = [sys.executable, "-m", "bootimage_controller", "run", "--once", "--kubeconfig", str(cluster.kubeconfig),
                "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-format", "json",
                "--qps", "20", "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
                "--leader-elect-retry-period", "0.5s"]
        proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            async def leading() -> bool:
                try:
                    return bool((await kube_request(api, "GET", LEASE_PATH))["spec"].get("holderIdentity"))
                except ApiException:
                    return False

            await wait_for(leading, 30, "the --once run to take the Lease")
            os.kill(apiserver, signal.SIGSTOP)  # mid-pass: every request hangs, the Lease cannot be renewed
            try:
                out, err = await asyncio.to_thread(proc.communicate, timeout=90)
            finally:
                os.kill(apiserver, signal.SIGCONT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    result = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr[-3000:]
    assert "Lease" in lines[0] and cluster.server.removeprefix("https://") in lines[0], lines[0]


async def test_once_with_leader_election_takes_and_releases_a_free_lease(kube_cluster: TestCluster, kube_api: Any) -> None:
    await setup(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    result = await asyncio.to_thread(run_once, kube_cluster.kubeconfig, identity="once-leader")
    assert result.returncode == 0, result.stderr[-3000:]
    assert await amis(kube_api) == dict.fromkeys(NAMES, AWS_422)
    lease = await kube_request(kube_api, "GET", LEASE_PATH)
    assert not lease["spec"].get("holderIdentity"), "released at the end of the pass"
    await kube_request(kube_api, "DELETE", LEASE_PATH)


async def test_once_with_a_refused_patch_exits_1_degraded_with_the_servers_message(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await setup(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    # Annotations just under the 256 KiB limit: adding our record makes the object invalid (422).
    fleet = await list_machinesets(kube_api)
    crowded = fleet["aws-a"]
    annotations = dict(crowded["metadata"].get("annotations") or {})
    used = sum(len(k) + len(v) for k, v in annotations.items())
    annotations["example.com/filler"] = "x" * (262144 - used - len("example.com/filler") - 64)
    crowded["metadata"]["annotations"] = annotations
    await apply(kube_api, crowded)

    result = await asyncio.to_thread(run_once, kube_cluster.kubeconfig, "--no-leader-elect")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    after = await amis(kube_api)
    assert after == {"aws-a": AWS_416, "aws-b": AWS_422}, "the other MachineSet is patched all the same"
    mc = await kube_request(kube_api, "GET", MC_PATH)
    degraded = condition(mc, "BootImageUpdateDegraded")
    assert degraded["status"] == "True"
    assert "aws-a" in degraded["message"] and "Too long" in degraded["message"], degraded["message"]
    assert "conflict" not in degraded["message"].lower()


def crowd(obj: dict[str, Any]) -> dict[str, Any]:
    """Annotations just under the 256 KiB limit: adding our record makes the object invalid (422)."""
    annotations = dict(obj["metadata"].get("annotations") or {})
    used = sum(len(k) + len(v) for k, v in annotations.items())
    annotations["example.com/filler"] = "x" * (262144 - used - len("example.com/filler") - 64)
    obj["metadata"]["annotations"] = annotations
    return obj


async def test_a_patch_refused_for_good_waits_for_a_change_and_goes_at_once_when_it_comes(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: a 422 Invalid is not retried on the backoff timer (the landed code sent 14 patches
    in 60 s and would go on for hours). The MachineSet is Degraded with the server's own words,
    waits for a change (or the 10-minute resync), and is patched at once when it shrinks; its
    healthy neighbour is patched all the same."""
    from bootimage_controller.reconcile.writer import MachineSetWriter

    await setup(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, crowd((await list_machinesets(kube_api))["aws-a"]))
    attempts: list[tuple[float, str]] = []
    real = MachineSetWriter.patch_boot_image

    async def counted(self: MachineSetWriter, obj: Any, *args: Any) -> None:
        attempts.append((time.monotonic(), obj["metadata"]["name"]))
        await real(self, obj, *args)

    monkeypatch.setattr(MachineSetWriter, "patch_boot_image", counted)

    async def degraded_by_the_server() -> bool:
        mc = await kube_request(kube_api, "GET", MC_PATH)
        found = [c for c in (mc.get("status") or {}).get("conditions") or [] if c["type"] == "BootImageUpdateDegraded"]
        return bool(found) and found[0]["status"] == "True" and "Too long" in found[0]["message"]

    async with daemon_task(kube_cluster.kubeconfig, "--resync-period", "10m") as task:
        await wait_for(degraded_by_the_server, 60, "Degraded with the API server's message")
        assert (await amis(kube_api))["aws-b"] == AWS_422, "the healthy MachineSet is patched"
        first = next(t for t, name in attempts if name == "aws-a")
        # The landed code retried on its backoff timer: 5 ms doubling, a dozen patches in this window.
        await asyncio.sleep(max(0.0, first + 30 - time.monotonic()))
        assert [name for _, name in attempts].count("aws-a") == 1, attempts
        assert not task.done()

        # The admin trims the annotations: the change is the retry.
        trimmed = (await list_machinesets(kube_api))["aws-a"]
        trimmed["metadata"]["annotations"].pop("example.com/filler")
        changed = time.monotonic()  # before the PUT: its watch event may beat the PUT's own answer here
        await kube_request(kube_api, "PUT", f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets/aws-a",
                           trimmed)

        async def patched() -> bool:
            return (await amis(kube_api))["aws-a"] == AWS_422

        await wait_for(patched, 20, "the trimmed MachineSet to be patched")
        assert [name for t, name in attempts if t >= changed] == ["aws-a"], attempts


async def test_once_releases_claims_of_a_holder_deleted_while_the_daemon_was_down(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await setup(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    first = await asyncio.to_thread(run_once, kube_cluster.kubeconfig, "--no-leader-elect")
    assert first.returncode == 0, first.stderr[-3000:]
    fleet = await list_machinesets(kube_api)
    assert all(fleet[n]["metadata"].get("ownerReferences") for n in NAMES), "claimed by the first pass"
    # The daemon is down; someone deletes the holder. Its finalizer keeps it (and the fleet) alive.
    await kube_request(kube_api, "DELETE", HOLDER_PATH)
    holder = await kube_request(kube_api, "GET", HOLDER_PATH)
    assert holder["metadata"].get("deletionTimestamp")

    second = await asyncio.to_thread(run_once, kube_cluster.kubeconfig, "--no-leader-elect")
    assert second.returncode == 0, second.stderr[-3000:]
    fleet = await list_machinesets(kube_api)
    assert set(NAMES) <= set(fleet), "no MachineSet lost"
    assert all(not fleet[n]["metadata"].get("ownerReferences") for n in NAMES)

    async def holder_gone() -> bool:
        try:
            await kube_request(kube_api, "GET", HOLDER_PATH)
        except ApiException as exc:
            return exc.status == 404
        return False

    await wait_for(holder_gone, 10, "the holder to go once its finalizer was dropped")
    await asyncio.sleep(3.0)  # the garbage collector had its chance
    assert set(NAMES) <= set(await list_machinesets(kube_api))


# ---- supervision --------------------------------------------------------------------------------


@pytest.mark.traceback_expected  # the dead worker is an injected bug: its traceback is what a report needs
async def test_a_dead_worker_ends_the_leader_and_releases_the_lease(kube_cluster: TestCluster, kube_api: Any) -> None:
    await setup(kube_api, configmap_from_stream(GA_416, "4.16.0"))
    async with daemon_task(kube_cluster.kubeconfig, *FAST_LEASE, leader_elect=True) as task:

        async def leading() -> bool:
            try:
                lease = await kube_request(kube_api, "GET", LEASE_PATH)
            except ApiException:
                return False
            return bool(lease["spec"].get("holderIdentity")) and await mc_reconciled(kube_api)

        await wait_for(leading, 30, "the daemon to lead and reconcile")
        assert obs.REGISTRY.get_sample_value("bootimage_controller_leader") == 1.0
        [worker] = [t for t in asyncio.all_tasks() if t.get_name() == "bootimage-worker-0"]
        worker.cancel()
        code = await asyncio.wait_for(task, 10)
        assert code == 1
        assert obs.REGISTRY.get_sample_value("bootimage_controller_leader") == 0.0
        lease = await kube_request(kube_api, "GET", LEASE_PATH)
        assert not lease["spec"].get("holderIdentity"), "released for a follower to take over at once"
    await kube_request(kube_api, "DELETE", LEASE_PATH)


# ---- fencing: a frozen leader thaws and writes nothing -----------------------------------------

@pytest.mark.reliability
async def test_a_thawed_ex_leader_sends_no_write_and_exits(fresh_cluster: ClusterFactory, tmp_path: Path) -> None:
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    audit_log = tmp_path / "audit.log"
    cluster = fresh_cluster(
        extra_apiserver_args=(f"--audit-policy-file={policy}", f"--audit-log-path={audit_log}")
    )
    async with await api_client_for(cluster.kubeconfig) as api:
        await setup(api, configmap_from_stream(GA_416, "4.16.0"))
        a = start_daemon_process(cluster.kubeconfig_for("replica-a"), "replica-a", tmp_path / "a.log")
        b: subprocess.Popen[bytes] | None = None
        try:
            async def holder() -> str:
                try:
                    return str((await kube_request(api, "GET", LEASE_PATH))["spec"].get("holderIdentity") or "")
                except ApiException:
                    return ""

            async def a_leads() -> bool:
                return await holder() == "replica-a" and await mc_reconciled(api)

            await wait_for(a_leads, 40, "replica-a to lead")
            b = start_daemon_process(cluster.kubeconfig_for("replica-b"), "replica-b", tmp_path / "b.log")
            await asyncio.sleep(3.0)  # b is a follower with warm caches
            a.send_signal(signal.SIGSTOP)
            frozen_at = time.time()
            # Work for whoever leads: new golden data. Only b may act on it.
            await apply(api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))

            async def b_patched() -> bool:
                return await holder() == "replica-b" and await amis(api) == dict.fromkeys(NAMES, AWS_422)

            await wait_for(b_patched, 45, "replica-b to take over and patch")
            a.send_signal(signal.SIGCONT)
            code = await asyncio.to_thread(a.wait, 30)
            assert code != 0, "an ex-leader exits non-zero so that the pod restarts clean"
            await asyncio.sleep(1.0)  # the audit log is written asynchronously
            late = audit_writes(audit_log, "replica-a", frozen_at)
            assert late == [], [(e["verb"], e["objectRef"]) for e in late]
            assert audit_writes(audit_log, "replica-b", frozen_at), "the witness sees the new leader's writes"
            assert "leadership lost" in (tmp_path / "a.log").read_text()
        finally:
            for proc in (a, b):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGCONT)
                    proc.kill()
                    proc.wait(10)


# ---- Lease timings ----------------------------------------------------------------------------


async def test_lease_timings_follow_the_control_plane_topology_unless_flags_say(kube_cluster: TestCluster, kube_api: Any) -> None:
    from bootimage_controller.kube.client import make_api_client
    from bootimage_controller.kube.leader import OPENSHIFT_TIMINGS, SINGLE_NODE_TIMINGS, LeaseTimings

    infra = infrastructure("AWS")
    api = await make_api_client(str(kube_cluster.kubeconfig))
    try:
        await apply(kube_api, infra)
        args = run_args(kube_cluster.kubeconfig)
        assert daemon.lease_timings(await daemon.read_infrastructure(api), args) == OPENSHIFT_TIMINGS
        infra["status"]["controlPlaneTopology"] = "SingleReplica"
        await apply(kube_api, infra)
        assert daemon.lease_timings(await daemon.read_infrastructure(api), args) == SINGLE_NODE_TIMINGS
        flagged = run_args(kube_cluster.kubeconfig, "--leader-elect-renew-deadline", "3m")
        assert daemon.lease_timings(await daemon.read_infrastructure(api), flagged) == LeaseTimings(270.0, 180.0, 60.0)
        assert daemon.lease_timings(None, args) == OPENSHIFT_TIMINGS, "unreadable: HA, as library-go does"
    finally:
        await api.close()
