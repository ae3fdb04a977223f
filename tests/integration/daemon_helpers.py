"""Running the daemon against the test control plane: in-process tasks and real subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.cluster import ClusterFactory, TestCluster
from harness.objects import kube_request

from bootimage_controller.commands.cli import build_parser
from bootimage_controller.constants import (
    ANNOTATION_HOT_LOOP,
    ANNOTATION_PREVIOUS,
    ANNOTATION_RELEASE,
    ANNOTATION_STREAM,
    ANNOTATION_UPDATED_AT,
    BOOTIMAGES_CONFIGMAP,
    MCO_NAMESPACE,
)

REPO = Path(__file__).resolve().parents[2]
STREAMS = REPO / "data" / "stream-metadata"
OUR_ANNOTATIONS = {ANNOTATION_RELEASE, ANNOTATION_STREAM, ANNOTATION_UPDATED_AT, ANNOTATION_PREVIOUS, ANNOTATION_HOT_LOOP}
SERVER_FIELDS = {"resourceVersion", "generation", "managedFields", "uid", "creationTimestamp"}


def configmap_from_stream(stream_file: str, release_version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": BOOTIMAGES_CONFIGMAP, "namespace": MCO_NAMESPACE},
        "data": {"stream": (STREAMS / stream_file).read_text(), "releaseVersion": release_version},
    }


def user_data_secret(name: str = "worker-user-data", version: str = "2.2.0") -> dict[str, Any]:
    """The installer's worker stub Ignition (spec 2.2.0 on old clusters), as a Secret."""
    import base64

    stub = {
        "ignition": {
            "config": {"append": [{"source": "https://api-int.mycluster.example.com:22623/config/worker", "verification": {}}]},
            "security": {"tls": {"certificateAuthorities": [{"source": "data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTg==", "verification": {}}]}},
            "timeouts": {},
            "version": version,
        },
        "networkd": {},
        "passwd": {},
        "storage": {},
        "systemd": {},
    }
    encoded = base64.b64encode(json.dumps(stub).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "openshift-machine-api"},
        "type": "Opaque",
        "data": {"userData": encoded, "disableTemplating": base64.b64encode(b"true").decode()},
    }


def run_args(kubeconfig: Path, *extra: str) -> Any:
    return build_parser().parse_args(
        ["run", "--kubeconfig", str(kubeconfig), "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
         "--log-format", "json", *extra]
    )


@contextlib.asynccontextmanager
async def daemon_task(kubeconfig: Path, *extra: str, leader_elect: bool = False) -> AsyncIterator[asyncio.Task[int]]:
    """The daemon as a task in this event loop (SIGTERM handling is replaced by cancellation);
    without leader election unless asked (then pass timings, e.g. `*FAST_LEASE`)."""
    from bootimage_controller.daemon import run as daemon

    election = () if leader_elect else ("--no-leader-elect",)
    task = asyncio.create_task(daemon.run_async(run_args(kubeconfig, *election, *extra)))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


# Test daemons hand over in seconds, not OpenShift's minutes (137 s lease, 107 s renew deadline).
# Flags given later in `extra` win.
FAST_LEASE = ("--leader-elect-lease-duration", "15s", "--leader-elect-renew-deadline", "10s",
              "--leader-elect-retry-period", "2s")


def start_daemon_process(kubeconfig: Path, identity: str, log_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "POD_NAME": identity, "POD_NAMESPACE": MCO_NAMESPACE}
    argv = [sys.executable, "-m", "bootimage_controller", "run", "--kubeconfig", str(kubeconfig),
            "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-format", "json",
            *FAST_LEASE, *extra]
    return subprocess.Popen(argv, env=env, stdout=log_path.open("wb"), stderr=subprocess.STDOUT, cwd=REPO)


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def list_machinesets(api: Any) -> dict[str, dict[str, Any]]:
    doc = await kube_request(api, "GET", "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets")
    return {item["metadata"]["name"]: item for item in doc["items"]}


def strip_ours(obj: dict[str, Any], boot_field: tuple[str | int, ...] | None) -> dict[str, Any]:
    """The object minus server fields, our annotations, our owner reference and the boot image field."""
    out = json.loads(json.dumps(obj))
    meta = out["metadata"]
    for key in SERVER_FIELDS:
        meta.pop(key, None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in OUR_ANNOTATIONS}
    meta["annotations"] = annotations
    meta["ownerReferences"] = [r for r in meta.get("ownerReferences") or [] if r.get("kind") != "ConfigMap"]
    if not meta["ownerReferences"]:
        meta.pop("ownerReferences")
    out.pop("status", None)
    if boot_field:
        cur: Any = out
        for part in boot_field[:-1]:
            cur = cur[part]
        cur[boot_field[-1]] = "<boot image>"
    return out


# ---- the API server's audit log: the witness of what a daemon sent -----------------------------

AUDIT_POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def audited_cluster(fresh_cluster: ClusterFactory, tmp_path: Path) -> tuple[TestCluster, Path]:
    """A fresh control plane (no controller manager: nothing else writes) whose API server logs
    every request's metadata to the returned audit log."""
    policy = tmp_path / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    audit_log = tmp_path / "audit.log"
    cluster = fresh_cluster(extra_apiserver_args=(f"--audit-policy-file={policy}", f"--audit-log-path={audit_log}"),
                            with_controller_manager=False)
    return cluster, audit_log


def audit_writes(log: Path, user: str, since: float) -> list[dict[str, Any]]:
    """Write requests `user` sent after `since` (epoch seconds), as the API server received them."""
    return [e for e in audit_events(log, user, since) if e["verb"] in WRITE_VERBS]


def audit_events(log: Path, user: str, since: float, until: float = float("inf"),
                 stage: str = "RequestReceived") -> list[dict[str, Any]]:
    """The audit events of `user`'s requests received in [`since`, `until`) (epoch seconds), at
    `stage` (`RequestReceived`: every request as it arrived; `ResponseComplete`: with its answer)."""
    out = []
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("stage") != stage or event["user"]["username"] != user:
            continue
        received = datetime.strptime(event["requestReceivedTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        if since <= received.timestamp() < until:
            out.append(event)
    return out


async def run_cli(cluster: Any, *argv: str) -> tuple[int, str, str]:
    """A `bootimage-controller` command as an administrator runs it, in its own process, against
    `cluster` (a harness TestCluster): (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bootimage_controller", *argv, "--kubeconfig", str(cluster.kubeconfig),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def plan_from_cluster(cluster: Any, *extra: str) -> dict[str, Any]:
    """`plan --from-cluster -o json` (it must succeed)."""
    code, out, err = await run_cli(cluster, "plan", "--from-cluster", "-o", "json", *extra)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def next_writes(doc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """MachineSet name -> (writer, when) as plan's JSON says (`nextWrite`)."""
    return {m["name"]: (m["nextWrite"]["writer"], m["nextWrite"]["when"]) for m in doc["machineSets"]}
