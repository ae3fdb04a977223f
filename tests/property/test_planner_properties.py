"""`plan_machine` never raises: any JSON-like object, with any golden data that parses, gets a
decision, and an `error` decision always says what is wrong."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootimage_controller.constants import Action
from bootimage_controller.core.cloud.facts import CloudFacts, CloudImage, ImageKey, MarketplaceCandidates
from bootimage_controller.core.context import ClusterFacts
from bootimage_controller.core.enrollment import Enrollment
from bootimage_controller.core.golden import GoldenBootImages
from bootimage_controller.core.model import BootImageDecision
from bootimage_controller.core.planner import plan_machine
from bootimage_controller.data import bundled_index
from bootimage_controller.errors import GoldenDataError

from .strategies import (
    configmap_422,
    fixture_machinesets,
    json_values,
    machineset_objects,
    mutated,
    stream_422,
)

settle = settings(max_examples=100, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
heavy = settings(max_examples=50, deadline=3000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

GOLDEN = GoldenBootImages.from_configmap(configmap_422())
PLATFORMS = st.sampled_from(["AWS", "GCP", "Azure", "VSphere", "BareMetal", None])
ARCHES = st.sampled_from(["x86_64", "aarch64", "ppc64le", "s390x", "riscv64", ""])


def _check(decision: BootImageDecision) -> None:
    assert isinstance(decision.action, Action)
    assert decision.reason and decision.message
    if decision.action is Action.PATCH:
        # A patch says what it changes; on vSphere it may instead rebuild the template in place.
        refresh = decision.template.refresh if decision.template is not None else None
        assert decision.changes or refresh is not None, "a patch must say what it changes"
        assert decision.current != decision.target


@st.composite
def cluster_facts(draw: st.DrawFn) -> ClusterFacts:
    return ClusterFacts(published=bundled_index(),
        platform=draw(PLATFORMS),
        control_plane_arch=draw(ARCHES),
        multi_arch=draw(st.booleans()),
    )


# Everything enrolled, the ControlPlaneMachineSet included, so the rules behind enrollment run.
ALL_MANAGED = {
    "spec": {
        "managedBootImages": {
            "machineManagers": [
                {"resource": r, "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}
                for r in ("machinesets", "controlplanemachinesets")
            ]
        }
    }
}


@settle
@given(machineset_objects | json_values, cluster_facts(), st.booleans())
def test_any_object_gets_a_decision(obj: Any, facts: ClusterFacts, everything: bool) -> None:
    enrollment = Enrollment.from_machine_configuration(ALL_MANAGED if everything else None, facts.platform)
    _check(plan_machine(obj, GOLDEN, facts, enrollment))


@heavy
@given(mutated(stream_422(), max_changes=4), cluster_facts())
def test_every_fixture_gets_a_decision_from_any_golden_data_that_parses(doc: Any, facts: ClusterFacts) -> None:
    cm = configmap_422()
    cm["data"]["stream"] = json.dumps(doc)
    try:
        golden = GoldenBootImages.from_configmap(cm)
    except GoldenDataError:
        return
    enrollment = Enrollment.from_machine_configuration(None, facts.platform)
    for obj in fixture_machinesets():
        _check(plan_machine(obj, golden, facts, enrollment))


PRODUCT = "1b8a1f8e-5c0e-4a8e-9a3e-0c6c6b7e8f90"  # an AWS Marketplace product id (name suffix)
image_keys = st.builds(
    ImageKey,
    st.sampled_from(["AWS", "GCP", "Azure", "VSphere"]),
    st.sampled_from(["us-east-1", "us-central1-a", "eastus", "", "vcenter.example.com"]),
    st.sampled_from(["ami-05483066c3caaccf5", "ami-06a6b025350ff1e23", "projects/rhcos-cloud/global/images/x", ""]),
)
releases = st.none() | st.sampled_from(["9.6.20250402-0", "418.94.202410090804-0", "10.2.20260423-0", "garbage", ""])


@st.composite
def cloud_images(draw: st.DrawFn, key: ImageKey) -> CloudImage:
    return CloudImage(
        key=key,
        exists=draw(st.booleans()),
        available=draw(st.booleans()),
        owner=draw(st.sampled_from([None, "531415883065", "679593333241", "123456789012"])),
        name=draw(st.none() | st.sampled_from([f"rhcos-9.6.20250402-0-x86_64-{PRODUCT}", "rhcos", ""]) | st.text(max_size=20)),
        description=draw(st.none() | st.text(max_size=20)),
        release=draw(releases),
        creation_date=draw(st.none() | st.sampled_from(["2025-04-02T00:00:00.000Z", "yesterday"])),
    )


@st.composite
def cloud_answers(draw: st.DrawFn) -> CloudFacts:
    images = {key: draw(cloud_images(key)) for key in draw(st.lists(image_keys, max_size=4))}
    errors = {key: "throttled" for key in draw(st.lists(image_keys, max_size=2))}
    marketplace = {}
    if draw(st.booleans()):
        candidates = tuple(
            draw(cloud_images(ImageKey("AWS", "us-east-1", f"ami-{i:017d}"))) for i in range(draw(st.integers(0, 3)))
        )
        marketplace[("us-east-1", PRODUCT)] = MarketplaceCandidates("us-east-1", PRODUCT, candidates)
    return CloudFacts(images=images, errors=errors, marketplace=marketplace)


@settle
@given(machineset_objects, cloud_answers())
def test_cloud_answers_of_any_shape_never_break_a_decision(obj: Any, cloud: CloudFacts) -> None:
    facts = ClusterFacts(published=bundled_index(), platform="AWS", cloud=cloud, cloud_platforms=frozenset({"AWS", "GCP", "Azure", "VSphere"}))
    _check(plan_machine(obj, GOLDEN, facts, Enrollment.from_machine_configuration(None, "AWS")))


# ---- issue 24: whatever the golden data says, a patch only ever targets a well-formed id -------------

AMI = re.compile(r"ami-[0-9a-f]{8,17}")
GCP_PATH = re.compile(r"projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/global/images/[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
AZURE_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


# The stream fields a boot image target or its release is read from, by a short name.
STREAM_FIELDS: dict[str, tuple[str, ...]] = {
    f"{arch}-{name}": ("architectures", arch, *path)
    for arch in ("x86_64", "aarch64")
    for name, path in {
        "aws-image": ("images", "aws", "regions", "us-east-1", "image"),
        "aws-image-east-2": ("images", "aws", "regions", "us-east-2", "image"),
        "aws-release": ("images", "aws", "regions", "us-east-1", "release"),
        "aws-regions": ("images", "aws", "regions"),
        "gcp-name": ("images", "gcp", "name"),
        "gcp-project": ("images", "gcp", "project"),
        "gcp": ("images", "gcp"),
        "azure-version": ("rhel-coreos-extensions", "marketplace", "azure", "no-purchase-plan", "hyperVGen2", "version"),
        "azure-sku": ("rhel-coreos-extensions", "marketplace", "azure", "no-purchase-plan", "hyperVGen2", "sku"),
        "vmware-release": ("artifacts", "vmware", "release"),
        "vmware-sha256": ("artifacts", "vmware", "formats", "ova", "disk", "sha256"),
        "artifact-release": ("artifacts", "aws", "release"),
    }.items()
}


def _target_is_well_formed(decision: BootImageDecision) -> None:
    """A patch's new value is an id its platform can boot: never empty, blank, a number or a path."""
    for change in decision.changes:
        new = change.new
        if decision.platform == "AWS":
            assert isinstance(new, dict) and isinstance(new.get("id"), str) and AMI.fullmatch(new["id"]), new
        elif decision.platform == "GCP":
            assert isinstance(new, str) and GCP_PATH.fullmatch(new), new
        elif decision.platform == "Azure":
            assert isinstance(new, dict), new
            assert all(isinstance(new.get(k), str) and AZURE_PART.fullmatch(new[k])
                       for k in ("publisher", "offer", "sku", "version")), new
        elif decision.platform == "VSphere":
            assert isinstance(new, str) and new.strip() == new and new, new


@settings(max_examples=150, deadline=3000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated(stream_422(), max_changes=3), st.sampled_from(sorted(STREAM_FIELDS)), json_values, cluster_facts())
def test_no_decision_targets_anything_but_a_well_formed_id(doc: Any, path: str, value: Any, facts: ClusterFacts) -> None:
    """Arbitrary JSON in every field the rules read, on top of random damage elsewhere: no exception
    escapes the parse or the planner, and every patch targets a well-formed id for its platform."""
    _put(doc, STREAM_FIELDS[path], value)
    cm = configmap_422()
    cm["data"]["stream"] = json.dumps(doc)
    cm["data"]["streams"] = json.dumps({"rhel-9": doc})
    try:
        golden = GoldenBootImages.from_configmap(cm)
    except GoldenDataError:
        return  # the whole default stream unusable: the run is bad input, nothing is planned
    enrollment = Enrollment.from_machine_configuration(ALL_MANAGED, facts.platform)
    for ms in fixture_machinesets():
        decision = plan_machine(ms, golden, facts, enrollment)
        _check(decision)
        if decision.action is Action.PATCH:
            _target_is_well_formed(decision)


def _put(doc: Any, path: tuple[str, ...], value: Any) -> None:
    """Set `path` in `doc`, creating objects on the way (a mutation may have removed them)."""
    cur = doc
    for part in path[:-1]:
        if not isinstance(cur, dict):
            return
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    if isinstance(cur, dict):
        cur[path[-1]] = value
