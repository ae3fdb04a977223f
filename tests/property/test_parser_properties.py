"""Every parser, on arbitrary input, returns a value or raises one of the project's own errors
(`BootImageControllerError`), and answers within the deadline (no loops, no pathological regexes)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bootimage_controller.core.claims import HotLoopRecord
from bootimage_controller.core.enrollment import Enrollment, LabelSelector
from bootimage_controller.core.golden import GoldenBootImages
from bootimage_controller.core.model import MachineResource
from bootimage_controller.core.skew.aleph import parse_aleph
from bootimage_controller.core.skew.versions import OcpVersion, RhelVersion, parse_rhcos_version
from bootimage_controller.errors import (
    AlephError,
    GoldenDataError,
    InputError,
    SelectorError,
    VersionError,
)
from bootimage_controller.plan.inputs import parse_documents

from .strategies import configmap_422, json_values, keys, machineset_objects, mutated, scalars, stream_422

quick = settings(max_examples=150, deadline=500, suppress_health_check=[HealthCheck.too_slow])
heavy = settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Version-shaped text: numbers joined by the separators real ids use, sometimes almost right.
version_parts = st.lists(st.integers(0, 10**13).map(str) | st.sampled_from(["", "x", "٣", "0" * 12]), min_size=1, max_size=5)
versionish = st.builds(lambda parts, seps: "".join(p + s for p, s in zip(parts, seps, strict=False)), version_parts, st.lists(st.sampled_from([".", "-", "+", "", " "]), min_size=5, max_size=5))


# ---- golden data ---------------------------------------------------------------------------------------


@heavy
@given(mutated(stream_422()))
def test_a_mutated_stream_parses_or_raises_golden_data_error(doc: Any) -> None:
    cm = configmap_422()
    cm["data"]["stream"] = json.dumps(doc)
    try:
        golden = GoldenBootImages.from_configmap(cm)
    except GoldenDataError as exc:
        assert exc.obj.startswith("ConfigMap coreos-bootimages")
        return
    assert golden.default.name


@quick
@given(json_values)
def test_any_configmap_data_parses_or_raises_golden_data_error(data: Any) -> None:
    for obj in ({"data": data}, {"data": {"stream": data}}, {"data": {"stream": json.dumps(data), "streams": data}}):
        with contextlib.suppress(GoldenDataError):
            GoldenBootImages.from_configmap(obj)


@quick
@given(st.text(max_size=200) | json_values.map(json.dumps))
def test_any_bare_stream_text_parses_or_raises_golden_data_error(text: str) -> None:
    try:
        GoldenBootImages.from_stream_json(text, source="stream.json")
    except GoldenDataError as exc:
        assert exc.obj.startswith("stream.json")


# ---- versions and aleph ------------------------------------------------------------------------------------


@quick
@given(versionish | st.text(max_size=40))
def test_versions_parse_or_raise_version_error(text: str) -> None:
    for parse in (parse_rhcos_version, OcpVersion.parse, RhelVersion.parse):
        with contextlib.suppress(VersionError):
            parse(text)


@quick
@given(scalars.filter(lambda v: not isinstance(v, str)) | st.lists(scalars, max_size=2) | st.dictionaries(keys, scalars, max_size=2))
def test_versions_of_the_wrong_type_raise_version_error(value: Any) -> None:
    for parse in (parse_rhcos_version, OcpVersion.parse, RhelVersion.parse):
        try:
            parse(value)
        except VersionError:
            continue
        raise AssertionError(f"{parse.__qualname__} accepted {value!r}")


@quick
@given(st.dictionaries(st.sampled_from(["version", "build", "ref", "target-image", "kernel"]), json_values | versionish, max_size=4))
def test_aleph_documents_parse_or_raise_aleph_error(doc: dict[str, Any]) -> None:
    try:
        info = parse_aleph(json.dumps(doc), "aleph.json")
    except AlephError as exc:
        assert exc.obj == "aleph.json"
        return
    assert info.build_id in (str(doc.get("version") or "").strip(), str(doc.get("build") or "").strip())


# ---- selectors, enrollment, objects -------------------------------------------------------------------------


@quick
@given(json_values, st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3))
def test_selectors_parse_or_raise_selector_error_and_parsed_ones_match_safely(value: Any, labels: dict[str, str]) -> None:
    try:
        selector = LabelSelector.parse(value, "selector")
    except SelectorError as exc:
        assert exc.field is not None and exc.field.startswith("selector")
        return
    assert selector.matches(labels) in (True, False)


@quick
@given(json_values, st.sampled_from(["AWS", "GCP", "BareMetal", None]))
def test_machine_configurations_parse_or_raise_selector_error(spec: Any, platform: str | None) -> None:
    for mc in ({"spec": spec}, {"spec": {"managedBootImages": spec}}, {"spec": {"managedBootImages": {"machineManagers": spec}}}):
        with contextlib.suppress(SelectorError):
            Enrollment.from_machine_configuration(mc, platform)


@quick
@given(machineset_objects | json_values)
def test_machine_objects_parse_or_raise_input_error(obj: Any) -> None:
    with contextlib.suppress(InputError):
        MachineResource.from_object(obj)


@quick
@given(st.text(max_size=300) | json_values.map(json.dumps))
def test_plan_input_documents_parse_or_raise_input_error(text: str) -> None:
    for suffix in (".yaml", ".json", ""):
        try:
            parse_documents(text, "input", suffix)
        except InputError as exc:
            assert exc.obj == "input"


# ---- the hot-loop annotation -------------------------------------------------------------------------------


@quick
@given(st.text(max_size=100) | json_values.map(json.dumps) | st.builds(lambda v: json.dumps({"target": "x", "count": v}), json_values))
@example('{"target": "x", "count": 1e999}')  # once leaked OverflowError
def test_hot_loop_annotation_never_raises(value: str) -> None:
    record = HotLoopRecord.from_annotation(value)
    assert record is None or isinstance(record.count, int)

