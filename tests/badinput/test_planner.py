"""The planner on bad input: one `error` (or the right skip) for the broken MachineSet, naming it and
the field; the MachineSets around it are planned exactly as they would be without it."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import Action, Reason
from bootimage_controller.core.context import ClusterFacts
from bootimage_controller.core.enrollment import Enrollment
from bootimage_controller.core.golden import GoldenBootImages
from bootimage_controller.core.model import BootImageDecision
from bootimage_controller.core.planner import plan_all, plan_machine
from bootimage_controller.data import bundled_index

from .corpus import (
    AWS,
    GCP,
    GOLDEN_CASES,
    MACHINESET_CASES,
    GoldenCase,
    MachineSetCase,
    configmap,
    machineset,
)

FACTS = ClusterFacts(published=bundled_index(), platform="AWS")
ENROLLED = Enrollment.from_machine_configuration(None, "AWS")


@pytest.fixture(scope="module")
def golden() -> GoldenBootImages:
    return GoldenBootImages.from_configmap(configmap())


def _plan(objects: list[Any], golden: GoldenBootImages) -> list[BootImageDecision]:
    return plan_all(objects, golden, FACTS, ENROLLED)


@pytest.mark.parametrize("case", MACHINESET_CASES, ids=lambda c: c.id)
def test_broken_machineset_gets_its_decision_and_the_others_go_on(case: MachineSetCase, golden: GoldenBootImages) -> None:
    name = f"bad-{case.id}"
    neighbours = [machineset(AWS, "before"), machineset(GCP, "after")]
    alone = _plan(neighbours, golden)
    before, bad, after = _plan([neighbours[0], case.build(name), neighbours[1]], golden)

    assert (str(bad.action), bad.reason, bad.field) == (case.action, case.reason, case.field), bad.message
    if case.names_object:
        assert name in bad.message and bad.name == name
    for needle in case.mentions:
        assert needle in bad.message, bad.message
    assert len(bad.message) < 2000, "a message must not carry the bad value back when it is huge"
    # The broken one changes nothing for the others: same decisions as when planned without it.
    assert [before, after] == alone
    assert all(d.action is Action.PATCH for d in alone)


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda c: c.id)
def test_partly_broken_golden_data_hits_only_the_machinesets_that_use_it(case: GoldenCase) -> None:
    cm = configmap()
    case.edit(cm)
    golden = GoldenBootImages.from_configmap(cm)  # still usable as a whole
    objects = []
    for i, expect in enumerate(case.machinesets):
        obj = machineset(expect.fixture, f"{case.id}-{i}")
        obj["metadata"].setdefault("labels", {}).update(expect.labels)
        objects.append(obj)
    for decision, expect in zip(_plan(objects, golden), case.machinesets, strict=True):
        assert (str(decision.action), decision.reason) == (expect.action, expect.reason), decision.message
        for needle in expect.mentions:
            assert needle in decision.message, decision.message


@pytest.mark.parametrize("value", [None, "MachineSet", 42, [], ["a"], {}, {"kind": "MachineSet"}, {"kind": 7, "metadata": []}])
def test_values_that_are_not_machinesets_are_error_decisions(value: Any, golden: GoldenBootImages) -> None:
    decision = plan_machine(value, golden, FACTS, ENROLLED)
    assert (decision.action, decision.reason) == (Action.ERROR, Reason.INVALID_OBJECT)
    assert decision.field in ("kind", "metadata", "metadata.name", None)
    assert decision.message


def test_a_whole_fleet_of_broken_machinesets_never_stops_the_healthy_ones(golden: GoldenBootImages) -> None:
    broken = [case.build(f"bad-{case.id}") for case in MACHINESET_CASES]
    healthy = [machineset(AWS, f"healthy-{i}") for i in range(3)]
    decisions = _plan([*broken, *healthy], golden)
    assert len(decisions) == len(broken) + len(healthy)
    assert [d.action for d in decisions[len(broken):]] == [Action.PATCH] * 3
