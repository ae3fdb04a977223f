"""A new AWSMachineTemplate is named as the Machine Config Operator names it: checked against a Go
program built from the Go module proxy with CAPA's own types (hack/capi-template-name, built and
cached by hack/build-capi-template-name.sh; hack/test.sh builds it before the suite).

Without the program (no Go, no module proxy) these tests skip and say how to build it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bootimage_controller.constants import Action, Reason
from bootimage_controller.core.capi.resources import new_template_name, same_template_spec

from .objects import capi_object, template
from .test_capi_planner import aws, decide

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "hack" / "build-capi-template-name.sh"


@pytest.fixture(scope="module")
def go_program() -> Path:
    path = Path(subprocess.run(["bash", str(BUILD), "--path"], check=True, capture_output=True, text=True).stdout.strip())
    if not path.is_file():
        pytest.skip(f"{path} is not built: run `bash {BUILD.relative_to(ROOT)}` (needs Go and the Go module proxy)")
    return path


def go_name(program: Path, base: str, spec: dict[str, Any]) -> str:
    template = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachineTemplate",
                "metadata": {"name": "old", "namespace": "openshift-cluster-api"}, "spec": spec}
    done = subprocess.run([str(program), "name", base], input=json.dumps(template), capture_output=True, text=True,
                          check=True)
    return done.stdout.strip()


SPECS: dict[str, dict[str, Any]] = {
    "the installer's": {"template": {"spec": {
        "ami": {"id": "ami-0a1b2c3d4e5f60718"}, "instanceType": "m6i.xlarge", "iamInstanceProfile": "w-profile",
        "subnet": {"filters": [{"name": "tag:Name", "values": ["w-subnet-private-us-east-1a"]}]},
        "additionalSecurityGroups": [{"filters": [{"name": "tag:Name", "values": ["w-node", "w-lb"]}]}],
        "rootVolume": {"size": 120, "type": "gp3", "encrypted": True},
        "ignition": {"version": "3.4", "storageType": "UnencryptedUserData"},
        "uncompressedUserData": True,
    }}},
    "nested maps and HTML-escaped characters": {"template": {
        "metadata": {"labels": {"team": "a&b", "z": "1", "a": "2"}, "annotations": {"note": "<not html>"}},
        "spec": {"ami": {"id": "ami-0<&>1"}, "instanceType": "m6i.xlarge",
                 "additionalTags": {"owner": "ops <ops@example.com>", "cost&center": "42", "Alpha": "\u2028x"},
                 "securityGroupOverrides": {"node": "sg-1", "bastion": "sg-2"},
                 "ignition": {"version": "3.4", "proxy": {"httpsProxy": "http://p:3128/?a=1&b=2", "noProxy": [".svc"]},
                              "tls": {"certificateAuthorities": ["data:,<pem>"]}}}}},
    "fields CAPA does not know, and empty ones": {"template": {"spec": {
        "ami": {"id": "ami-1"}, "instanceType": "m6i.large", "notACapaField": {"x": [1, 2]}, "imageLookupOrg": "",
        "publicIP": False, "nonRootVolumes": [], "additionalTags": {}, "cpuOptions": {}, "placementGroupPartition": 0,
        "instanceMetadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2},
    }}},
    "omitzero and pointers to zero values": {"template": {"spec": {
        "ami": {"id": "ami-2"}, "cpuOptions": {"confidentialCompute": "AMDEncryptedVirtualizationNestedPaging"},
        "spotMarketOptions": {}, "sshKeyName": "", "privateDnsName": {"hostnameType": "resource-name"},
        "cloudInit": {"insecureSkipSecretsManager": True, "secretCount": 0},
    }}},
    "no template metadata, no instance type": {"template": {"spec": {"ami": {"id": "ami-3"}}}},
}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_a_new_aws_template_gets_the_name_the_mco_gives_it(go_program: Path, case: str) -> None:
    spec = SPECS[case]
    assert new_template_name("workers-us-east-1a", "AWSMachineTemplate", spec) == go_name(
        go_program, "workers-us-east-1a", spec)


def test_the_planner_names_the_new_template_as_the_mco_would(go_program: Path) -> None:
    """End to end through plan_capi: the copy the planner writes, named as the MCO names it."""
    d = decide(capi_object("MachineSet", "workers", "AWSMachineTemplate", "aws-tmpl"), aws())
    assert d.capi is not None
    assert d.capi.new_name == go_name(go_program, "workers", d.capi.new_template["spec"])


def test_the_mcos_copy_of_a_template_is_recognised_as_the_same_template() -> None:
    """The MCO creates its copy from the typed object: the unknown field is gone, empty defaults are
    there. Same name, same template: a retry finds it instead of refusing it."""
    ours = SPECS["fields CAPA does not know, and empty ones"]
    theirs = {"template": {"metadata": {}, "spec": {
        "ami": {"id": "ami-1"}, "instanceType": "m6i.large", "cloudInit": {}, "publicIP": False,
        "instanceMetadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}}}}
    assert same_template_spec("AWSMachineTemplate", ours, theirs)
    other = {"template": {"spec": {"ami": {"id": "ami-9"}, "instanceType": "m6i.large"}}}
    assert not same_template_spec("AWSMachineTemplate", ours, other)


def test_an_aws_template_capas_types_cannot_hold_is_an_error_naming_its_field() -> None:
    """Nothing is written from a template that could not be fully read (the MCO cannot read it either)."""
    bad = template("AWSMachineTemplate", "t", {"ami": {"id": "ami-1"}, "rootVolume": {"size": "120Gi"}})
    d = decide(capi_object("MachineSet", "workers", "AWSMachineTemplate", "t"), bad)
    assert (d.action, d.reason, d.field) == (Action.ERROR, Reason.INVALID_OBJECT, "spec.template.spec.rootVolume.size")
    assert "want int, have str" in d.message and d.capi is None


def test_the_bundled_shape_is_the_go_types(go_program: Path) -> None:
    """aws_template_shape.py is what hack/gen_capi_shape.py makes from the Go types today."""
    done = subprocess.run([sys.executable, str(ROOT / "hack" / "gen_capi_shape.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
