"""The EC2 image catalogue moto serves (`MOTO_AMIS_PATH`), built from the real stream metadata.

- Every AMI of every architecture and region in `data/stream-metadata/*.json`, owned by Red Hat's
  account (531415883065), named as RHCOS AMIs are (`rhcos-418.94.202410090804-0-x86_64-hvm` for
  OCP-encoded builds, `rhcos-9.6.20250402-0-x86_64` for RHEL-aligned ones).
- AWS Marketplace AMIs (owner 679593333241) for two products, with the description format the
  Machine Config Operator parses (`RHEL CoreOS 9.6 9.6.20260210-0 x86_64`) and names ending in
  the product UUID. Their ids are synthetic: Marketplace AMIs are not in stream metadata.
- One custom AMI owned by a customer account.

moto loads the whole catalogue into every region it is asked about (one volume and snapshot per
AMI), so only the regions below are taken from the stream files, which keeps a region's start-up
well under a second. Region scoping is exercised by deregistering in one region.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RED_HAT_OWNER = "531415883065"
MARKETPLACE_OWNER = "679593333241"
CUSTOM_OWNER = "210987654321"
STREAM_DIR = Path(__file__).resolve().parents[2] / "data" / "stream-metadata"

OCP_X86_PRODUCT = "59ead7de-2540-4653-a8b0-fa7926d5c845"
OKE_X86_PRODUCT = "963b36c3-de6f-48ed-b802-2b38b2a2cdeb"
CUSTOM_AMI = "ami-0c0ffee0c0ffee001"
_EC2_ARCH = {"x86_64": "x86_64", "aarch64": "arm64"}
REGIONS = frozenset({"us-east-1", "us-east-2", "eu-west-1", "ap-southeast-2", "ca-central-1", "me-south-1"})


@dataclass(frozen=True)
class StreamAmi:
    source: str
    arch: str
    region: str
    ami_id: str
    release: str


@dataclass(frozen=True)
class MarketplaceAmi:
    ami_id: str
    product: str
    release: str
    created: str

    @property
    def token(self) -> str:
        return ".".join(self.release.split(".")[:2])


MARKETPLACE_AMIS = (
    MarketplaceAmi("ami-0aaa000000000940a", OCP_X86_PRODUCT, "9.4.20241001-0", "2024-10-03T11:00:00.000Z"),
    MarketplaceAmi("ami-0aaa000000000960a", OCP_X86_PRODUCT, "9.6.20250402-0", "2025-04-05T09:00:00.000Z"),
    MarketplaceAmi("ami-0aaa000000000960b", OCP_X86_PRODUCT, "9.6.20260210-0", "2026-02-12T09:00:00.000Z"),
    MarketplaceAmi("ami-0aaa000000000980a", OCP_X86_PRODUCT, "9.8.20260403-0", "2026-04-06T09:00:00.000Z"),
    MarketplaceAmi("ami-0aaa0000000010200", OCP_X86_PRODUCT, "10.2.20260405-0", "2026-04-08T09:00:00.000Z"),
    MarketplaceAmi("ami-0aaa000000041894a", OCP_X86_PRODUCT, "418.94.202501221327-0", "2025-01-24T09:00:00.000Z"),
    MarketplaceAmi("ami-0bbb000000000960a", OKE_X86_PRODUCT, "9.6.20260210-0", "2026-02-12T10:00:00.000Z"),
)


def stream_amis() -> list[StreamAmi]:
    out: dict[str, StreamAmi] = {}
    for path in sorted(STREAM_DIR.glob("*.json")):
        doc = json.loads(path.read_text())
        for arch, data in (doc.get("architectures") or {}).items():
            regions = ((data.get("images") or {}).get("aws") or {}).get("regions") or {}
            for region, entry in regions.items():
                if region not in REGIONS:
                    continue
                out.setdefault(entry["image"], StreamAmi(path.name, arch, region, entry["image"], entry["release"]))
    return list(out.values())


def rhcos_ami_name(release: str, arch: str) -> str:
    ocp_encoded = int(release.split(".")[0]) >= 40
    return f"rhcos-{release}-{arch}-hvm" if ocp_encoded else f"rhcos-{release}-{arch}"


def marketplace_ami_name(ami: MarketplaceAmi) -> str:
    date = ami.created[:10].replace("-", "")
    return f"RHEL-9.4-RHCOS-{ami.token}_HVM_GA-{date}-x86_64-0-{ami.product}"


def _creation_date(release: str) -> str:
    stamp = release.split(".")[2].split("-")[0]
    return f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[8:10] or '00'}:{stamp[10:12] or '00'}:00.000Z"


def _entry(ami_id: str, name: str, description: str, owner: str, arch: str, created: str) -> dict[str, Any]:
    return {
        "ami_id": ami_id,
        "name": name,
        "description": description,
        "owner_id": owner,
        "public": True,
        "state": "available",
        "architecture": arch,
        "virtualization_type": "hvm",
        "root_device_type": "ebs",
        "root_device_name": "/dev/xvda",
        "creation_date": created,
        "boot_mode": "uefi-preferred",
    }


def catalogue() -> list[dict[str, Any]]:
    entries = [
        _entry(a.ami_id, rhcos_ami_name(a.release, a.arch), f"OpenShift 4 {a.release}", RED_HAT_OWNER,
               _EC2_ARCH[a.arch], _creation_date(a.release))
        for a in stream_amis()
    ]
    entries += [
        _entry(m.ami_id, marketplace_ami_name(m), f"RHEL CoreOS {m.token} {m.release} x86_64", MARKETPLACE_OWNER,
               "x86_64", m.created)
        for m in MARKETPLACE_AMIS
    ]
    entries.append(
        _entry(CUSTOM_AMI, "acme-hardened-rhcos-2025-03", "ACME hardened image", CUSTOM_OWNER, "x86_64",
               "2025-03-01T00:00:00.000Z")
    )
    return entries


def write_catalogue(path: Path) -> Path:
    path.write_text(json.dumps(catalogue()))
    return path
