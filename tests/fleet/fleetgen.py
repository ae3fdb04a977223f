"""Must-gather trees for the fleet tests and benchmark, generated from the fixtures: varied in
platform, architecture, stream, golden data (release), install release and skew setting.

`fleet_spec(i)` is deterministic, so tree `i` is the same in every run; `write_tree` lays the objects
out as `oc adm must-gather` does (cluster-scoped-resources/<group>/<plural>/<name>.yaml, namespaces/
<ns>/<group>/<plural>/<name>.yaml).
"""

from __future__ import annotations

import copy
import functools
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from harness.objects import (
    bootimages_configmap,
    cluster_version,
    infrastructure,
    machine_configuration,
    machine_manager,
    machineset_from_fixture,
    skew_manual,
    skew_none,
)

from bootimage_controller.commands.rollback import boot_image_field
from bootimage_controller.constants import ANNOTATION_BOOT_IMAGE_VERIFIED
from bootimage_controller.core.model import get_path, image_label, parse_dotted
from bootimage_controller.core.verification import BootVerdict, Verdict

# (fixture, platform, region, extra labels): the pools a generated cluster can have.
POOLS: tuple[tuple[str, str, str | None], ...] = (
    ("aws-x86_64-us-east-1a-4.16.yaml", "AWS", "us-east-1"),
    ("aws-aarch64-us-east-2a-4.16.yaml", "AWS", "us-east-2"),
    ("aws-x86_64-rhel-10-stream.yaml", "AWS", "us-east-1"),
    ("aws-x86_64-me-south-1a-4.21.yaml", "AWS", "me-south-1"),
    ("gcp-x86_64-us-central1-a-4.16.yaml", "GCP", "us-central1"),
    ("azure-x86_64-marketplace-noplan-4.20.yaml", "Azure", None),
    ("vsphere-x86_64-4.16.yaml", "VSphere", None),
)
GOLDEN = (("coreos-bootimages-4.18.yaml", "4.18.3"), ("coreos-bootimages-4.22-multistream.yaml", "4.22.0"))
INSTALLS = ("4.12.0", "4.16.0")
SKEWS: tuple[dict[str, Any] | None, ...] = (None, skew_none(), skew_manual(ocp_version="4.14.0"),
                                            skew_manual(rhcos_version="9.6.20251212-1"))


@dataclass(frozen=True)
class TreeSpec:
    name: str
    pools: tuple[int, ...]  # indexes into POOLS, all of one platform
    golden: int
    install: int
    skew: int
    enrolled: bool


def fleet_spec(i: int) -> TreeSpec:
    platforms = sorted({p[1] for p in POOLS})
    platform = platforms[i % len(platforms)]
    mine = [n for n, p in enumerate(POOLS) if p[1] == platform]
    count = 1 + (i // len(platforms)) % len(mine)
    pools = tuple(itertools.islice(itertools.cycle(mine[i % len(mine):] + mine[: i % len(mine)]), count))
    return TreeSpec(f"cluster-{i:04d}", pools, golden=(i // 3) % 2, install=(i // 2) % 2, skew=i % len(SKEWS),
                    enrolled=i % 5 != 0)


@functools.cache
def _golden_text(golden_file: str) -> str:
    return _dump(bootimages_configmap(golden_file))


@functools.cache
def _machineset(fixture: str) -> dict[str, Any]:
    return machineset_from_fixture(fixture)


def _dump(obj: dict[str, Any]) -> str:
    return yaml.dump(obj, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def tree_objects(spec: TreeSpec) -> list[dict[str, Any]]:
    """The objects of the tree, the golden ConfigMap aside (`write_tree` adds it as text)."""
    _golden_file, release = GOLDEN[spec.golden]
    platform, region = POOLS[spec.pools[0]][1], POOLS[spec.pools[0]][2]
    managed = [machine_manager()] if spec.enrolled else None
    objs: list[dict[str, Any]] = [
        infrastructure(platform, region=region),
        cluster_version(history=((release, "Completed"), (INSTALLS[spec.install], "Completed"))),
        machine_configuration(managed, SKEWS[spec.skew]),
    ]
    for n, pool in enumerate(spec.pools):
        objs.append(_with_verdict(_renamed(_machineset(POOLS[pool][0]), f"{spec.name}-worker-{n}"),
                                  VERDICTS[(spec.install + 2 * n + spec.skew) % len(VERDICTS)]))
    return objs


# What the daemon recorded on a generated pool (SPEC section 3b): nothing, or a verdict on its image.
VERDICTS = (None, "verified", None, "failed")


def _with_verdict(obj: dict[str, Any], verdict: str | None) -> dict[str, Any]:
    if verdict is None or obj["spec"]["template"]["spec"]["providerSpec"]["value"].get("kind") == \
            "VSphereMachineProviderSpec":  # not judged on vSphere
        return obj
    image = image_label(get_path(obj, parse_dotted(boot_image_field(obj))))
    record = BootVerdict(Verdict(verdict), image, f"{obj['metadata']['name']}-a", "node-a" if verdict == "verified"
                         else None, "2026-11-20T10:00:00Z", f"generated {verdict} verdict")
    obj["metadata"].setdefault("annotations", {})[ANNOTATION_BOOT_IMAGE_VERIFIED] = record.to_annotation()
    return obj


def _renamed(obj: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    return out


def _path(root: Path, obj: dict[str, Any]) -> Path:
    api_version, kind = obj["apiVersion"], obj["kind"]
    group = api_version.split("/")[0] if "/" in api_version else "core"
    plural = kind.lower() + "s"
    meta = obj["metadata"]
    if meta.get("namespace"):
        return root / "namespaces" / meta["namespace"] / group / plural / f"{meta['name']}.yaml"
    return root / "cluster-scoped-resources" / group / plural / f"{meta['name']}.yaml"


def write_tree(root: Path, objects: list[dict[str, Any]], golden_file: str | None = None) -> Path:
    for obj in objects:
        path = _path(root, obj)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_dump(obj))
    if golden_file is not None:
        path = root / "namespaces" / "openshift-machine-config-operator" / "core" / "configmaps" / "coreos-bootimages.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_golden_text(golden_file))
    (root / "timestamp").write_text("2026-11-25 12:00:00 +0000 UTC\n")
    return root


def write_fleet(folder: Path, count: int) -> list[Path]:
    return [write_tree(folder / spec.name, tree_objects(spec), GOLDEN[spec.golden][0])
            for spec in map(fleet_spec, range(count))]
