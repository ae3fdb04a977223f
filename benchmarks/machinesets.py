"""The MachineSets and golden data every benchmark plans against.

Built from the real fixtures in tests/fixtures (AWS, GCP, Azure; vSphere is left out: its decision is
always a skip without vCenter) against the 4.22 multistream ConfigMap, so the numbers measure the
decisions a real fleet asks for: patches, no-ops and the common skips.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import yaml  # noqa: E402

from bootimage_controller.core.context import ClusterFacts  # noqa: E402
from bootimage_controller.core.enrollment import Enrollment  # noqa: E402
from bootimage_controller.core.golden import GoldenBootImages  # noqa: E402
from bootimage_controller.core.model import BootImageDecision, get_path  # noqa: E402
from bootimage_controller.core.planner import plan_machine  # noqa: E402
from bootimage_controller.data import bundled_index  # noqa: E402

FIXTURES: Final = REPO / "tests" / "fixtures"
MACHINESET_FIXTURES: Final = FIXTURES / "machinesets"
CONFIGMAP_422: Final = FIXTURES / "configmaps" / "coreos-bootimages-4.22-multistream.yaml"
PLATFORM_PREFIXES: Final = ("aws-", "gcp-", "azure-")
# The fixtures whose boot image the 4.22 data moves: the daemon benchmark's "stale" fleet.
STALE_FIXTURES: Final = (
    "aws-x86_64-us-east-1a-4.16.yaml",
    "aws-aarch64-us-east-2a-4.16.yaml",
    "gcp-x86_64-us-central1-a-4.16.yaml",
    "azure-x86_64-legacy-gallery-gen2-4.16.yaml",
)


@dataclass(frozen=True)
class PlanInputs:
    golden: GoldenBootImages
    facts: ClusterFacts
    enrollment: Enrollment


def configmap_422() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(CONFIGMAP_422.read_text())
    return doc


def plan_inputs(platform: str = "AWS") -> PlanInputs:
    """Golden data of 4.22 and an IPI cluster's defaults (everything enrolled, x86_64 control plane)."""
    return PlanInputs(
        golden=GoldenBootImages.from_configmap(configmap_422()),
        facts=ClusterFacts(published=bundled_index(), platform=platform),
        enrollment=Enrollment.from_machine_configuration(None, platform),
    )


def fixture_objects(names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The AWS/GCP/Azure MachineSet fixtures (or the named ones), in a stable order."""
    if names is not None:
        paths = [MACHINESET_FIXTURES / n for n in names]
    else:
        paths = sorted(p for p in MACHINESET_FIXTURES.glob("*.yaml") if p.name.startswith(PLATFORM_PREFIXES))
    return [yaml.safe_load(p.read_text()) for p in paths]


def realistic_mix(count: int) -> list[dict[str, Any]]:
    """`count` distinct MachineSets cycling through the AWS/GCP/Azure fixtures (unique names)."""
    base = fixture_objects()
    out = []
    for i in range(count):
        obj = copy.deepcopy(base[i % len(base)])
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{i:05d}"
        out.append(obj)
    return out


def reached_target(obj: dict[str, Any], decision: BootImageDecision) -> bool:
    """True when every field the decision would change holds its new value in `obj`."""
    return all(get_path(obj, change.path) == change.new for change in decision.changes)


def plan(obj: dict[str, Any], inputs: PlanInputs) -> BootImageDecision:
    return plan_machine(obj, inputs.golden, inputs.facts, inputs.enrollment)
