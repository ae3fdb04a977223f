"""Small AWS fleets and readers for the claim, write and hot-loop tests (issue 4)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from harness.objects import (
    MERGE_PATCH,
    apply,
    bootimages_configmap,
    cluster_version,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
)
from kubernetes_asyncio.client.rest import ApiException

from bootimage_controller.constants import (
    CLAIM_HOLDER_NAME,
    CLAIM_HOLDER_NAMESPACE,
    MACHINECONFIGURATION_NAME,
    MAPI_NAMESPACE,
)

from .daemon_helpers import REPO, user_data_secret

AWS_FIXTURE = "aws-x86_64-us-east-1a-4.16.yaml"
AWS_416 = "ami-05483066c3caaccf5"  # the fixture's AMI (4.16 GA)
AWS_422 = "ami-06a6b025350ff1e23"  # the 4.22 multistream ConfigMap's us-east-1 AMI
RELEASE_422 = "9.8.20260403-0"
MULTISTREAM_422 = "coreos-bootimages-4.22-multistream.yaml"
MS_PATH = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets"
HOLDER_PATH = f"/api/v1/namespaces/{CLAIM_HOLDER_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}"
MC_PATH = f"/apis/operator.openshift.io/v1/machineconfigurations/{MACHINECONFIGURATION_NAME}"
CO_PATH = "/apis/config.openshift.io/v1/clusteroperators/machine-config-bootimages"


async def base_cluster(api: Any, *, managed: list[dict[str, Any]] | None = None) -> None:
    """An AWS cluster at 4.22 (stable) with the 4.22 golden data and the installer's stub secret."""
    await apply(api, infrastructure("AWS"))
    await apply(api, cluster_version())
    await apply(api, machine_configuration(managed))
    await apply(api, bootimages_configmap(MULTISTREAM_422))
    await apply(api, user_data_secret())


async def aws_machinesets(api: Any, names: Iterable[str], **kw: Any) -> dict[str, dict[str, Any]]:
    """us-east-1 x86_64 MachineSets booting the 4.16 AMI (each a patch under 4.22)."""
    return {name: await apply(api, machineset_from_fixture(AWS_FIXTURE, name, **kw)) for name in names}


def ami(obj: Mapping[str, Any]) -> str:
    return str(obj["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"])


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def our_refs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for r in obj["metadata"].get("ownerReferences") or []
        if (r.get("apiVersion"), r.get("kind"), r.get("name")) == ("v1", "ConfigMap", CLAIM_HOLDER_NAME)
    ]


def rv(obj: Mapping[str, Any]) -> int:
    """resourceVersion as a number: every object of one etcd shares one revision counter, so on
    the test cluster it orders writes across objects."""
    return int(obj["metadata"]["resourceVersion"])


async def get_ms(api: Any, name: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = await kube_request(api, "GET", f"{MS_PATH}/{name}")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


async def machinesets(api: Any) -> dict[str, dict[str, Any]]:
    doc = await kube_request(api, "GET", MS_PATH)
    return {item["metadata"]["name"]: item for item in doc["items"]}


async def get_holder(api: Any) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = await kube_request(api, "GET", HOLDER_PATH)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return obj


async def merge_patch_ms(api: Any, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = await kube_request(api, "PATCH", f"{MS_PATH}/{name}", dict(patch), content_type=MERGE_PATCH)
    return obj


def set_ami_patch(image: str) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"providerSpec": {"value": {"ami": {"id": image}}}}}}}


async def conditions(api: Any, path: str = MC_PATH) -> dict[str, dict[str, Any]]:
    try:
        obj = await kube_request(api, "GET", path)
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def events_for(api: Any, name: str) -> list[dict[str, Any]]:
    doc = await kube_request(
        api,
        "GET",
        f"/api/v1/namespaces/{MAPI_NAMESPACE}/events",
        query=[("fieldSelector", f"involvedObject.name={name}")],
    )
    return list(doc["items"])


async def run_cli(*argv: str) -> tuple[int, str]:
    """`bootimage-controller ARGV` in a subprocess (the console script's module entry point)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bootimage_controller",
        *argv,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")
