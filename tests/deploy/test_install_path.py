"""The install path as an admin walks it (issue 27, item 1): in a copy of the repository, install.md's
commands (the image build replaced by a registry reference) leave one image reference in every
object `oc apply -k` would create, in the uninstall Job and in the OLM bundle; and the docs URL set
in the kustomization reaches every alert's runbook link.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from .manifests import REPO, kustomize_build

REF = "registry.example.com/ops/bootimage-controller:1.2.3"
DIGEST_REF = "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/bootimage-controller@sha256:" + "a1" * 32


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """What an admin has after cloning: the manifests, the scripts and the bundle."""
    root = tmp_path / "bootimage-controller"
    for part in ("manifests", "bundle", "hack"):
        shutil.copytree(REPO / part, root / part)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, root / name)
    return root


def set_image(root: Path, ref: str) -> subprocess.CompletedProcess[str]:
    # `python3` is the test's interpreter (it has PyYAML), as on an admin's machine with the venv.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "hack/set-image.sh", ref], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def workload_images(objects: list[dict[str, Any]]) -> set[str]:
    out = set()
    for obj in objects:
        if obj["kind"] in ("Deployment", "DaemonSet", "Job"):
            spec = obj["spec"]["template"]["spec"]
            out |= {c["image"] for c in (*spec.get("containers", []), *spec.get("initContainers", []))}
    return out


def bundle_images(root: Path) -> set[str]:
    csv = yaml.safe_load((root / "bundle" / "manifests" / "bootimage-controller.clusterserviceversion.yaml").read_text())
    out = {csv["metadata"]["annotations"]["containerImage"]}
    for deployment in csv["spec"]["install"]["spec"]["deployments"]:
        out |= {c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    return out


@pytest.mark.parametrize("ref", [REF, DIGEST_REF], ids=["tag", "digest"])
def test_one_command_sets_the_image_everywhere(checkout: Path, ref: str) -> None:
    done = set_image(checkout, ref)
    assert done.returncode == 0, done.stderr
    installed = kustomize_build(checkout / "manifests")
    uninstall = kustomize_build(checkout / "manifests" / "uninstall")
    assert workload_images(installed) == {ref}
    assert [o["kind"] for o in installed if o["kind"] in ("Deployment", "DaemonSet")] == ["Deployment", "DaemonSet"]
    assert workload_images(uninstall) == {ref} and [o["kind"] for o in uninstall] == ["Job"]
    assert bundle_images(checkout) == {ref}
    # Nothing else in the copy still names another image of ours.
    leftovers = [p for p in checkout.rglob("*.yaml") if "localhost/bootimage-controller" in p.read_text()]
    assert leftovers == []


def test_a_reference_without_a_registry_or_tag_is_refused_and_changes_nothing(checkout: Path) -> None:
    before = (checkout / "manifests" / "image" / "kustomization.yaml").read_text()
    for bad in ("bootimage-controller", "registry.example.com/bootimage-controller", "Registry/X:1"):
        done = set_image(checkout, bad)
        assert done.returncode == 2 and "is not an image reference" in done.stderr, (bad, done.stderr)
    assert (checkout / "manifests" / "image" / "kustomization.yaml").read_text() == before


def test_the_docs_url_of_the_kustomization_reaches_every_runbook_link(checkout: Path) -> None:
    kustomization = checkout / "manifests" / "kustomization.yaml"
    text = kustomization.read_text()
    mirror = "https://docs.internal.example.com/bootimage-controller/v1"
    text, n = re.subn(r"(?m)^  - url=\S+$", f"  - url={mirror}", text)
    assert n == 1
    kustomization.write_text(text)
    rule = next(o for o in kustomize_build(checkout / "manifests") if o["kind"] == "PrometheusRule")
    links = [r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert links and all(link.startswith(f"{mirror}/runbooks.md#") for link in links), links
