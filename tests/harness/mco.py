"""The Machine Config Operator's boot image coverage as the reference tells it (written out by hand,
never computed by the code under test): which fixture stands for each platform, and from which
release the MCO updates a plain MachineSet of it without the admin asking."""

from __future__ import annotations

from typing import Final

FIXTURE_BY_PLATFORM: Final = {
    "AWS": "aws-x86_64-us-east-1a-4.16.yaml",
    "GCP": "gcp-x86_64-us-central1-a-4.16.yaml",
    "Azure": "azure-x86_64-marketplace-noplan-4.20.yaml",
    "VSphere": "vsphere-x86_64-4.16.yaml",
}
# Reference section 15 and issue 22: AWS and GCP by default from 4.19, Azure and vSphere from 4.22.
MCO_DEFAULT_FROM: Final = {"AWS": 19, "GCP": 19, "Azure": 22, "VSphere": 22}
