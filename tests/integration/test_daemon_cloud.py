"""The daemon verifies boot images in EC2 (moto's server over real HTTP) before it patches (rule 9)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from cloud.amis import CUSTOM_AMI, catalogue
from cloud.moto_server import point_boto3_at, running_moto
from harness.cluster import TestCluster
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    infrastructure,
    machine_configuration,
)
from harness.objects import machineset_from_fixture as ms_fixture

from bootimage_controller.constants import AWS_CREDENTIALS_SECRET, EVENT_SKIPPED, MAPI_NAMESPACE

from .daemon_helpers import daemon_task, list_machinesets, user_data_secret, wait_for

pytestmark = pytest.mark.integration

AWS_416 = "ami-05483066c3caaccf5"
AWS_422_US_EAST_1 = "ami-06a6b025350ff1e23"
AWS_422_US_EAST_2 = "ami-0839b9b12d88de612"


@pytest.fixture
def moto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with running_moto(catalogue(), tmp_path) as url:
        point_boto3_at(url, tmp_path, monkeypatch)
        yield url


def credentials_secret(key_id: str, secret: str) -> dict[str, Any]:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": AWS_CREDENTIALS_SECRET, "namespace": MAPI_NAMESPACE},
        "data": {"aws_access_key_id": b64(key_id), "aws_secret_access_key": b64(secret)},
    }


async def aws_cluster_with_credentials(kube_api: Any) -> None:
    """An AWS cluster on 4.22's golden data, EC2 credentials, and one stale MachineSet `east-1`."""
    await apply(kube_api, infrastructure("AWS"))
    await apply(kube_api, cluster_version())
    await apply(kube_api, machine_configuration())
    await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, user_data_secret())
    await apply(kube_api, credentials_secret("AKIDEXAMPLEKEY123456", "not-a-real-secret-value-0123456789"))
    await apply(kube_api, ms_fixture("aws-x86_64-us-east-1a-4.16.yaml", "east-1"))


def ami_of(fleet: dict[str, dict[str, Any]], name: str) -> Any:
    return fleet[name]["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]


async def test_daemon_patches_only_to_images_ec2_has_and_identifies_custom_amis(
    kube_cluster: TestCluster, kube_api: Any, moto: str
) -> None:
    # The 4.22 target in us-east-2 is deregistered: the daemon must not patch that MachineSet.
    ec2 = boto3.client("ec2", region_name="us-east-2", aws_access_key_id="k", aws_secret_access_key="s")
    ec2.deregister_image(ImageId=AWS_422_US_EAST_2)
    await aws_cluster_with_credentials(kube_api)
    east2 = ms_fixture("aws-x86_64-us-east-1a-4.16.yaml", "east-2")
    east2["spec"]["template"]["spec"]["providerSpec"]["value"]["placement"] = {
        "availabilityZone": "us-east-2a",
        "region": "us-east-2",
    }
    await apply(kube_api, east2)
    custom = ms_fixture("aws-x86_64-us-east-1a-4.16.yaml", "custom")
    custom["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": CUSTOM_AMI}
    await apply(kube_api, custom)
    before = await list_machinesets(kube_api)
    assert ami_of(before, "east-2") == {"id": AWS_416}

    async with daemon_task(kube_cluster.kubeconfig) as task:

        async def east1_patched() -> bool:
            return bool(ami_of(await list_machinesets(kube_api), "east-1") == {"id": AWS_422_US_EAST_1})

        await wait_for(east1_patched, 60, "the us-east-1 patch verified in EC2")
        await wait_for(lambda: _skipped_event(kube_api, "east-2", AWS_422_US_EAST_2), 30, "a skip event naming the AMI")
        assert not task.done()
    after = await list_machinesets(kube_api)
    # Never patch to an image the cloud does not have; a custom AMI (another owner per EC2) is left alone.
    assert after["east-2"]["metadata"]["resourceVersion"] == before["east-2"]["metadata"]["resourceVersion"]
    assert after["custom"]["metadata"]["resourceVersion"] == before["custom"]["metadata"]["resourceVersion"]


async def _skipped_event(api: Any, name: str, text: str) -> bool:
    from harness.objects import kube_request

    doc = await kube_request(api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
    return any(
        e["involvedObject"].get("name") == name
        and e.get("reason") == EVENT_SKIPPED
        and e.get("type") == "Warning"
        and text in e.get("message", "")
        for e in doc["items"]
    )


class Relay:
    """A TCP relay on loopback to moto that can be cut (every connection closed at once, as a
    proxy that is down) and mended: an outage of the cloud API that ends."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.up = False
        self.port = 0
        self.refused = 0
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.up:
            self.refused += 1
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def test_an_outage_that_ends_is_noticed_without_an_edit(
    kube_cluster: TestCluster, kube_api: Any, moto: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cloud is unreachable when the daemon plans (CloudUnavailable), then reachable again: the
    MachineSet is patched with no change to it (issue 24; the landed code never planned it again)."""
    relay = Relay(int(moto.rsplit(":", 1)[1]))
    await relay.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{relay.port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # fail fast: the outage is the daemon's to ride out
    try:
        await aws_cluster_with_credentials(kube_api)
        before = await list_machinesets(kube_api)
        async with daemon_task(kube_cluster.kubeconfig) as task:

            async def refused() -> bool:
                return relay.refused > 0

            await wait_for(refused, 60, "the daemon to try the cloud while it is down")
            await asyncio.sleep(2)
            now = await list_machinesets(kube_api)
            assert now["east-1"]["metadata"]["resourceVersion"] == before["east-1"]["metadata"]["resourceVersion"]
            relay.up = True  # the outage ends; nobody touches the MachineSet

            async def patched() -> bool:
                return bool(ami_of(await list_machinesets(kube_api), "east-1") == {"id": AWS_422_US_EAST_1})

            await wait_for(patched, 45, "the MachineSet patched once the cloud answers again")
            assert not task.done()
    finally:
        await relay.stop()


async def test_a_deprecated_current_ami_is_said_and_a_deprecated_target_never_written(
    kube_cluster: TestCluster, kube_api: Any, moto: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EC2 over HTTP (moto, with DeprecationTime added by a responder in front of it, as EC2 sends
    it): the 4.16 AMI both MachineSets boot is deprecated, and so is the us-east-2 target. us-east-1
    is patched (its target is fine) after a BootImageDeprecated Warning; us-east-2 is never written:
    skip TargetImageDeprecated, the Warning, the metric (issue 34, item 4)."""
    from cloud.deprecating import deprecating_ec2
    from harness.objects import kube_request

    from bootimage_controller import observability as obs
    from bootimage_controller.constants import METRIC_DEPRECATED

    past = "2025-06-01T00:00:00.000Z"
    with deprecating_ec2(moto, {AWS_416: past, AWS_422_US_EAST_2: past}) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", url)
        await aws_cluster_with_credentials(kube_api)
        east2 = ms_fixture("aws-x86_64-us-east-1a-4.16.yaml", "east-2")
        east2["spec"]["template"]["spec"]["providerSpec"]["value"]["placement"] = {
            "availabilityZone": "us-east-2a", "region": "us-east-2"}
        await apply(kube_api, east2)
        before = await list_machinesets(kube_api)

        async def events(name: str, reason: str) -> list[dict[str, Any]]:
            doc = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
            return [e for e in doc["items"] if e["involvedObject"].get("name") == name and e.get("reason") == reason]

        async with daemon_task(kube_cluster.kubeconfig):
            async def east1_patched() -> bool:
                return bool(ami_of(await list_machinesets(kube_api), "east-1") == {"id": AWS_422_US_EAST_1})

            await wait_for(east1_patched, 60, "the us-east-1 patch")

            async def east2_said() -> bool:
                return bool(await events("east-2", "BootImageDeprecated")) and bool(
                    await events("east-2", EVENT_SKIPPED))

            await wait_for(east2_said, 30, "the us-east-2 deprecation Warnings")
            for name in ("east-1", "east-2"):
                said = await events(name, "BootImageDeprecated")
                assert len(said) == 1 and AWS_416 in said[0]["message"] and said[0]["type"] == "Warning"
            skipped = await events("east-2", EVENT_SKIPPED)
            assert "TargetImageDeprecated" in skipped[0]["message"] or AWS_422_US_EAST_2 in skipped[0]["message"]
            assert obs.REGISTRY.get_sample_value(
                METRIC_DEPRECATED, {"namespace": MAPI_NAMESPACE, "name": "east-2", "kind": "MachineSet"}) == 1
        after = await list_machinesets(kube_api)
    assert after["east-2"]["metadata"]["resourceVersion"] == before["east-2"]["metadata"]["resourceVersion"]
