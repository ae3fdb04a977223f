"""Enrollment parsing: MachineConfiguration spec.managedBootImages (SPEC section 2 rule 1)."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.core.enrollment import Enrollment, LabelSelector, SelectionMode
from bootimage_controller.core.model import MachineResource
from bootimage_controller.errors import SelectorError

from .support import machineset

AWS_USE1 = "aws-x86_64-us-east-1a-4.16.yaml"
FIELD = "spec.managedBootImages.machineManagers[0]"


def _mc(managers: Any) -> dict[str, Any]:
    return {"spec": {"managedBootImages": {"machineManagers": managers}}}


def _ms(selection: Any, resource: str = "machinesets", group: str = "machine.openshift.io") -> dict[str, Any]:
    return {"resource": resource, "apiGroup": group, "selection": selection}


def _resource(labels: dict[str, str]) -> MachineResource:
    obj = machineset(AWS_USE1)
    obj["metadata"]["labels"] = labels
    return MachineResource.from_object(obj)


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
        # matchLabels and matchExpressions are ANDed
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
        ({}, {"anything": "x"}, True),  # an empty selector matches everything
    ],
)
def test_partial_selector(selector: dict[str, Any], labels: dict[str, str], matches: bool) -> None:
    e = Enrollment.from_machine_configuration(
        _mc([_ms({"mode": "Partial", "partial": {"machineResourceSelector": selector}})]), "AWS"
    )
    assert e.machinesets.mode is SelectionMode.PARTIAL
    assert e.covers(_resource(labels))[0] is matches


def test_entry_for_another_api_group_is_ignored() -> None:
    e = Enrollment.from_machine_configuration(_mc([_ms({"mode": "None"}, group="cluster.x-k8s.io")]), "AWS")
    assert e.machinesets.mode is SelectionMode.ALL  # platform default


@pytest.mark.parametrize(
    ("managers", "field"),
    [
        ("All", "spec.managedBootImages.machineManagers"),
        (["All"], FIELD),
        ([_ms(None)], f"{FIELD}.selection"),
        ([_ms({"mode": "Some"})], f"{FIELD}.selection.mode"),
        ([_ms({"mode": "Partial"})], f"{FIELD}.selection.partial"),
        (
            [_ms({"mode": "Partial", "partial": {"machineResourceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}})],
            f"{FIELD}.selection.partial.machineResourceSelector.matchExpressions[0].values",
        ),
        (
            [_ms({"mode": "Partial", "partial": {"machineResourceSelector": {"matchLabels": {"a": 1}}}})],
            f"{FIELD}.selection.partial.machineResourceSelector.matchLabels",
        ),
    ],
)
def test_bad_configuration_names_the_field(managers: Any, field: str) -> None:
    with pytest.raises(SelectorError) as err:
        Enrollment.from_machine_configuration(_mc(managers), "AWS")
    assert err.value.field == field
    assert "MachineConfiguration cluster" in str(err.value)


def test_selector_operator_validation() -> None:
    with pytest.raises(SelectorError):
        LabelSelector.parse({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "sel")
    with pytest.raises(SelectorError):
        LabelSelector.parse({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "sel")
