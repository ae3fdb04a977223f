"""The parsers on bad input raise only the project's own error types, naming the object (or file),
the field and the value, and never echo megabytes back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bootimage_controller.constants import ANNOTATION_HOT_LOOP, HOT_LOOP_LIMIT
from bootimage_controller.core.claims import HotLoopRecord, hot_loop_check
from bootimage_controller.core.context import ClusterFacts
from bootimage_controller.core.enrollment import Enrollment, LabelSelector
from bootimage_controller.core.golden import GoldenBootImages
from bootimage_controller.core.model import BootImageDecision, MachineResource
from bootimage_controller.core.planner import plan_machine
from bootimage_controller.core.skew.aleph import parse_aleph
from bootimage_controller.core.skew.versions import OcpVersion, RhelVersion, parse_rhcos_version
from bootimage_controller.data import bundled_index
from bootimage_controller.errors import AlephError, GoldenDataError, InputError, SelectorError, VersionError

from .corpus import (
    ALEPH_CASES,
    AWS,
    BAD_BUILD_IDS,
    BAD_OCP_VERSIONS,
    BAD_RHEL_VERSIONS,
    CONFIGMAP_CASES,
    CONFIGMAP_OBJECT,
    GOOD_OCP_VERSIONS,
    HOT_LOOP_GARBAGE,
    MC_OBJECT,
    MEGABYTE,
    SELECTOR,
    SELECTOR_CASES,
    SelectorCase,
    WholeRunCase,
    configmap,
    default_stream,
    machineset,
    set_default_stream,
)

MAX_MESSAGE = 2000


# ---- golden data ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CONFIGMAP_CASES, ids=lambda c: c.id)
def test_configmap_errors_name_the_configmap_and_the_field(case: WholeRunCase) -> None:
    cm = configmap()
    case.edit(cm)
    with pytest.raises(GoldenDataError) as info:
        GoldenBootImages.from_configmap(cm)
    message = str(info.value)
    assert CONFIGMAP_OBJECT in message
    for needle in case.mentions:
        assert needle in message
    assert len(message) < MAX_MESSAGE


def _with_huge_stream(extra: str) -> dict[str, Any]:
    cm = configmap()
    doc = default_stream(cm)
    doc["padding"] = extra
    set_default_stream(cm, doc)
    return cm


def test_a_50_megabyte_stream_parses_to_the_same_golden_images() -> None:
    huge = GoldenBootImages.from_configmap(_with_huge_stream("x" * (50 * MEGABYTE)))
    plain = GoldenBootImages.from_configmap(configmap())
    assert huge.default.architectures == plain.default.architectures
    assert huge.default.name == plain.default.name


@pytest.mark.parametrize("cut", [1000, 25 * MEGABYTE, 50 * MEGABYTE])
def test_a_50_megabyte_stream_cut_short_is_a_short_error(cut: int) -> None:
    cm = _with_huge_stream("x" * (50 * MEGABYTE))
    cm["data"]["stream"] = cm["data"]["stream"][:cut]
    with pytest.raises(GoldenDataError) as info:
        GoldenBootImages.from_configmap(cm)
    assert info.value.field == "data.stream"
    assert "invalid JSON at line 1" in str(info.value)
    assert len(str(info.value)) < MAX_MESSAGE


@pytest.mark.parametrize(
    "text",
    ["", "null", "[]", '{"architectures": []}', '{"architectures": {"x86_64": "ami-1"}}', "{" * 100_000, "\x00\x01"],
    ids=["empty", "null", "list", "architectures-list", "arch-a-string", "deep", "binary"],
)
def test_bare_stream_json_errors_are_golden_data_errors(text: str) -> None:
    with pytest.raises(GoldenDataError) as info:
        GoldenBootImages.from_stream_json(text, source="stream.json")
    assert info.value.obj.startswith("stream.json")
    assert len(str(info.value)) < MAX_MESSAGE


# ---- versions -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", BAD_BUILD_IDS)
def test_bad_build_ids_are_version_errors_naming_the_value(text: str) -> None:
    with pytest.raises(VersionError) as info:
        parse_rhcos_version(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", [None, 418.94, ("9", "6")])
def test_a_build_id_of_the_wrong_type_is_a_version_error(value: Any) -> None:
    with pytest.raises(VersionError, match="expected a string"):
        parse_rhcos_version(value)


@pytest.mark.parametrize("value", [["9.6.20250402-0"], {"version": "9.6.20250402-0"}], ids=["list", "map"])
def test_rhcos_version_of_an_unhashable_type(value: Any) -> None:
    with pytest.raises(VersionError):
        parse_rhcos_version(value)


def test_a_huge_build_id_is_a_short_error() -> None:
    text = "418.94." + "2" * MEGABYTE + "-0"
    with pytest.raises(VersionError) as info:
        parse_rhcos_version(text)
    assert len(str(info.value)) < MAX_MESSAGE


@pytest.mark.parametrize("text", BAD_OCP_VERSIONS)
def test_bad_ocp_versions_are_version_errors(text: str) -> None:
    with pytest.raises(VersionError) as info:
        OcpVersion.parse(text, "spec.bootImageSkewEnforcement.manual.ocpVersion")
    assert info.value.obj == "spec.bootImageSkewEnforcement.manual.ocpVersion"
    assert len(str(info.value)) < MAX_MESSAGE


@pytest.mark.parametrize(("text", "expected"), GOOD_OCP_VERSIONS)
def test_short_and_pre_release_ocp_versions_parse(text: str, expected: tuple[int, int, int]) -> None:
    v = OcpVersion.parse(text)
    assert (v.major, v.minor, v.patch) == expected


@pytest.mark.parametrize("text", BAD_RHEL_VERSIONS)
def test_bad_rhel_versions_are_version_errors(text: str) -> None:
    with pytest.raises(VersionError):
        RhelVersion.parse(text, "--rhel-skew-limit")


# ---- aleph ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("case", "text", "field"), ALEPH_CASES, ids=[c[0] for c in ALEPH_CASES])
def test_garbage_aleph_names_the_file_and_field(case: str, text: str, field: str | None) -> None:
    source = f"/sysroot/.coreos-aleph-version.json ({case})"
    with pytest.raises(AlephError) as info:
        parse_aleph(text, source)
    assert info.value.obj == source
    assert info.value.field == field
    assert len(str(info.value)) < MAX_MESSAGE


# ---- selectors and enrollment ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c for c in SELECTOR_CASES if c.managers is None], ids=lambda c: c.id)
def test_label_selector_errors_name_the_field(case: SelectorCase) -> None:
    with pytest.raises(SelectorError) as info:
        LabelSelector.parse(case.selector, SELECTOR)
    assert info.value.obj == MC_OBJECT
    assert info.value.field == case.field


@pytest.mark.parametrize("case", SELECTOR_CASES, ids=lambda c: c.id)
def test_enrollment_errors_name_the_field(case: SelectorCase) -> None:
    with pytest.raises(SelectorError) as info:
        Enrollment.from_machine_configuration(case.machine_configuration(), "AWS")
    assert (info.value.obj, info.value.field) == (MC_OBJECT, case.field)


@pytest.mark.parametrize("value", [None, {}, {"matchLabels": None}, {"matchExpressions": None}, {"matchLabels": {}, "matchExpressions": []}])
def test_empty_selectors_match_everything(value: Any) -> None:
    assert LabelSelector.parse(value, SELECTOR).matches({"any": "thing"})


# ---- objects ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "MachineSet", 3, [], {"kind": "Pod"}, {"kind": "MachineSet"}, {"kind": "MachineSet", "metadata": {"name": 5}}])
def test_machine_resource_errors_are_input_errors(value: Any) -> None:
    with pytest.raises(InputError):
        MachineResource.from_object(value, source="ms.yaml")


# ---- the hot-loop annotation (read before every write of the daemon) ------------------------------------


@pytest.fixture(scope="module")
def patch_decision() -> BootImageDecision:
    golden = GoldenBootImages.from_configmap(configmap())
    decision = plan_machine(machineset(AWS, "looping"), golden, ClusterFacts(published=bundled_index(), platform="AWS"), Enrollment.from_machine_configuration(None, "AWS"))
    assert decision.target is not None
    return decision


@pytest.mark.parametrize("value", HOT_LOOP_GARBAGE, ids=lambda v: v[:30] or "empty")
def test_garbage_hot_loop_annotation_counts_as_no_record(value: str, patch_decision: BootImageDecision) -> None:
    record = hot_loop_check({ANNOTATION_HOT_LOOP: value}, patch_decision)
    assert record is not None and record.count == 1


def test_a_real_record_at_the_limit_still_refuses(patch_decision: BootImageDecision) -> None:
    at_limit = HotLoopRecord(json.dumps(patch_decision.target, sort_keys=True, separators=(",", ":")), HOT_LOOP_LIMIT)
    assert hot_loop_check({ANNOTATION_HOT_LOOP: at_limit.to_annotation()}, patch_decision) is None


@pytest.mark.parametrize("value", ['{"target": "x", "count": 1e999}', "[" * 100_000], ids=["count-infinite", "nested-too-deeply"])
def test_hot_loop_annotation_that_breaks_int_or_json_counts_as_no_record(value: str, patch_decision: BootImageDecision) -> None:
    record = hot_loop_check({ANNOTATION_HOT_LOOP: value}, patch_decision)
    assert record is not None and record.count == 1
