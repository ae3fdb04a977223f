"""`plan --cloud-verify` (SPEC rule 9) against moto's EC2: never patch to an image EC2 lacks.

moto runs in-process (`mock_aws`): the AMIs the tests need are created in it, and the golden data
is pointed at them with `--bootimages`, so every expectation comes from what EC2 holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from .conftest import STREAMS, Run, by_name, cluster_dir, machineset, write_yaml

REGION = "us-east-1"
STREAM = STREAMS / "installer-release-4.22-coreos-rhel-9.json"


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for var in ("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret-key")
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


def new_ami(ec2: Any, name: str) -> str:
    """An available AMI owned by moto's account (not Red Hat)."""
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    ami: str = ec2.create_image(InstanceId=instance, Name=name)["ImageId"]
    assert ec2.describe_images(ImageIds=[ami])["Images"][0]["State"] == "available"
    return ami


def stream_with(tmp_path: Path, region: str, ami: str) -> Path:
    doc = json.loads(STREAM.read_text())
    doc["architectures"]["x86_64"]["images"]["aws"]["regions"][region]["image"] = ami
    path = tmp_path / "stream.json"
    path.write_text(json.dumps(doc))
    return path


def ms_in(name: str, region: str) -> dict[str, Any]:
    """The 4.16 fixture MachineSet moved to another region, on that region's 4.16 AMI."""
    ms = machineset(name)
    spec = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
    published = json.loads((STREAMS / "installer-4.16-416.94.202405291527-0-rhcos.json").read_text())
    spec["ami"] = {"id": published["architectures"]["x86_64"]["images"]["aws"]["regions"][region]["image"]}
    spec["placement"] = {"availabilityZone": f"{region}a", "region": region}
    return ms


def test_patch_only_to_images_ec2_has(run: Run, tmp_path: Path, ec2: Any) -> None:
    target = new_ami(ec2, "rhcos-9.8.20260403-0-x86_64")
    stream = stream_with(tmp_path, REGION, target)
    d = cluster_dir(tmp_path, [ms_in("east-1", "us-east-1"), ms_in("east-2", "us-east-2")])
    offline = by_name(run("plan", d, "--bootimages", stream, "-o", "json").json())
    assert offline["east-1"]["action"] == "patch" and offline["east-2"]["action"] == "patch"

    result = run("plan", d, "--bootimages", stream, "--cloud-verify", "-o", "json")
    assert result.code == 0, result.err
    rows = by_name(result.json())
    assert (rows["east-1"]["action"], rows["east-1"]["target"]) == ("patch", {"id": target})
    # The golden us-east-2 AMI does not exist in this EC2: not patched.
    assert (rows["east-2"]["action"], rows["east-2"]["reason"]) == ("skip", "TargetImageNotFound")
    assert rows["east-2"]["target"] == offline["east-2"]["target"]


def test_custom_ami_is_told_apart_by_its_owner(run: Run, tmp_path: Path, ec2: Any) -> None:
    custom = new_ami(ec2, "hardened-rhcos")
    ms = machineset("custom")
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": custom}
    d = cluster_dir(tmp_path, [ms])
    assert by_name(run("plan", d, "-o", "json").json())["custom"]["reason"] == "UnknownBootImage"
    row = by_name(run("plan", d, "--cloud-verify", "-o", "json").json())["custom"]
    assert (row["action"], row["reason"]) == ("skip", "CustomBootImage")


def test_credentials_secret_among_the_inputs(run: Run, tmp_path: Path, ec2: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    d = cluster_dir(tmp_path, [ms_in("east-1", "us-east-1")])
    without = run("plan", d, "--cloud-verify")
    assert "no usable credentials for AWS" in without.err
    assert without.code == 6, "planned with the offline rules: not a verified plan (issue 47)"
    assert by_name(run("plan", d, "--cloud-verify", "-o", "json").json())["east-1"]["action"] == "patch"

    import base64

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    write_yaml(d / "secret.yaml", {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "aws-cloud-credentials", "namespace": "openshift-machine-api"},
        "data": {"aws_access_key_id": b64("AKIAFROMSECRET"), "aws_secret_access_key": b64("secret-from-secret")},
    })
    result = run("plan", d, "--cloud-verify")
    assert result.code == 0
    assert "secret-from-secret" not in result.out + result.err
    assert "Secret openshift-machine-api/aws-cloud-credentials" in " ".join(result.out.split())
    # The 4.22 AMI is not in this EC2: with the Secret's credentials the patch is refused.
    assert "TargetImageNotFound" in result.out


def test_marketplace_amis_get_a_second_round(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EC2 names a current AMI as a Marketplace AMI: its product's listing is asked for, then used."""
    from bootimage_controller.cloud import verifier as verifier_mod
    from bootimage_controller.constants import Platform
    from bootimage_controller.core.cloud.facts import CloudFacts, CloudImage, ImageKey, MarketplaceCandidates

    product = "59ead7de-2540-4653-a8b0-fa7926d5c845"
    current, successor = "ami-0aaa000000000940a", "ami-0aaa000000000980a"
    release = json.loads(STREAM.read_text())["architectures"]["x86_64"]["artifacts"]["aws"]["release"]
    calls: list[tuple[list[ImageKey], list[tuple[str, str]]]] = []

    def image(ami: str, rel: str) -> CloudImage:
        return CloudImage(ImageKey("AWS", REGION, ami), exists=True, available=True, owner="679593333241",
                          name=f"rhcos-{rel}-x86_64-{product}", description=f"RHEL CoreOS {rel[:3]} {rel} x86_64",
                          release=rel, creation_date="2026-04-06T09:00:00.000Z")

    class FakeVerifier:
        platforms = frozenset({Platform.AWS})
        sdk_missing: frozenset[Platform] = frozenset()

        async def verify(self, keys: Any, marketplace: Any = ()) -> CloudFacts:
            calls.append((list(keys), list(marketplace)))
            images = {ImageKey("AWS", REGION, current): image(current, "9.4.20241001-0")}
            listing = {(REGION, product): MarketplaceCandidates(REGION, product, (image(successor, release),))}
            return CloudFacts(images=images, marketplace=listing if marketplace else {})

        def close(self) -> None:
            pass

    monkeypatch.setattr(verifier_mod.CloudVerifier, "from_secrets", classmethod(lambda cls, *a, **k: FakeVerifier()))
    ms = machineset("marketplace")
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": current}
    d = cluster_dir(tmp_path, [ms])
    row = by_name(run("plan", d, "--bootimages", STREAM, "--cloud-verify", "-o", "json").json())["marketplace"]
    assert [m for _, m in calls] == [[], [(REGION, product)]]
    assert ImageKey("AWS", REGION, current) in calls[0][0]
    assert (row["action"], row["target"]) == ("patch", {"id": successor})
