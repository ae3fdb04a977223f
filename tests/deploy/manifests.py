"""The shipped manifests as data, and a small model of RBAC for checking them.

Used by the fast checks in tests/deploy and by tests/integration/test_rbac.py, which applies the
same documents to a real API server.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

REPO: Final = Path(__file__).resolve().parents[2]
MANIFESTS: Final = REPO / "manifests"
# Folders of manifests/ that the default kustomization does not include, on purpose.
NOT_IN_KUSTOMIZATION: Final = ("crds", "uninstall", "optional", "components", "image")
# The optional component with the Cluster API's rights (a namespace a default cluster lacks).
CAPI_COMPONENT: Final = MANIFESTS / "components" / "capi"
RBAC_KINDS: Final = frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
WORKLOAD_KINDS: Final = frozenset({"Deployment", "DaemonSet", "Job"})
# Verbs that hand out more than they say (granting, impersonating, escalating).
DANGEROUS_VERBS: Final = frozenset({"escalate", "bind", "impersonate", "*"})
SECRET_ENUMERATION_VERBS: Final = frozenset({"list", "watch", "deletecollection"})


@dataclass(frozen=True)
class Manifest:
    """One YAML document of one file under manifests/."""

    path: Path  # relative to manifests/
    index: int  # position in its file
    obj: Mapping[str, Any]

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str | None:
        ns = (self.obj.get("metadata") or {}).get("namespace")
        return str(ns) if ns else None

    @property
    def id(self) -> str:
        return f"{self.path}#{self.index}:{self.kind}/{self.name}"


def load_file(path: Path) -> list[Manifest]:
    rel = path.relative_to(MANIFESTS)
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    return [Manifest(rel, i, d) for i, d in enumerate(docs)]


def manifest_files(*, include_crds: bool = False) -> list[Path]:
    """Every YAML file under manifests/ (crds/ only on request), kustomization files excluded."""
    files = sorted(p for p in MANIFESTS.rglob("*.yaml") if p.name != "kustomization.yaml")
    if include_crds:
        return files
    return [p for p in files if p.relative_to(MANIFESTS).parts[0] != "crds"]


def kustomization() -> dict[str, Any]:
    doc = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def image_component() -> dict[str, Any]:
    """manifests/image: the one place the image is set (hack/set-image.sh writes it)."""
    doc = yaml.safe_load((MANIFESTS / "image" / "kustomization.yaml").read_text())
    assert isinstance(doc, dict) and doc["kind"] == "Component"
    return doc


def kustomize_binary() -> list[str]:
    """How to render a kustomization here: BOOTIMAGE_KUSTOMIZE (hack/test.sh builds it with
    hack/build-kustomize.sh), the cache that script fills, kustomize, or kubectl kustomize."""
    import os
    import shutil

    for candidate in (os.environ.get("BOOTIMAGE_KUSTOMIZE"),
                      str(Path.home() / ".cache" / "bootimage-controller" / "kustomize-v5.7.1" / "kustomize")):
        if candidate and Path(candidate).is_file():
            return [candidate, "build"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    raise AssertionError("no kustomize to render with: run hack/build-kustomize.sh "
                         "~/.cache/bootimage-controller/kustomize-v5.7.1 (hack/test.sh does)")


def kustomize_build(path: Path) -> list[dict[str, Any]]:
    import subprocess

    out = subprocess.run([*kustomize_binary(), str(path)], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def default_set() -> list[Manifest]:
    """What `oc apply -k manifests/` creates: the kustomization's resources, in its order."""
    out: list[Manifest] = []
    for name in kustomization()["resources"]:
        out.extend(load_file(MANIFESTS / name))
    return out


def capi_component() -> list[Manifest]:
    """What the `components/capi` kustomize component adds."""
    doc = yaml.safe_load((CAPI_COMPONENT / "kustomization.yaml").read_text())
    assert doc["kind"] == "Component"
    return [m for name in doc["resources"] for m in load_file(CAPI_COMPONENT / name)]


def full_set() -> list[Manifest]:
    """A cluster that manages Cluster API objects: the default set and the capi component."""
    return [*default_set(), *capi_component()]


def all_manifests() -> list[Manifest]:
    """Every shipped document outside crds/: the default set, uninstall/ and optional/."""
    return [m for path in manifest_files() for m in load_file(path)]


def one(manifests: Iterable[Manifest], kind: str, name: str) -> Manifest:
    found = [m for m in manifests if m.kind == kind and m.name == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


# --- RBAC ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...]

    @classmethod
    def from_dict(cls, rule: Mapping[str, Any]) -> Rule:
        def strings(key: str) -> tuple[str, ...]:
            return tuple(str(v) for v in rule.get(key) or ())

        return cls(strings("apiGroups"), strings("resources"), strings("verbs"), strings("resourceNames"))

    def allows(self, verb: str, group: str, resource: str, name: str | None) -> bool:
        """RBAC's matching (wildcards included, so a bad rule is judged as the server would)."""
        if not _match(self.verbs, verb) or not _match(self.api_groups, group):
            return False
        if not _match(self.resources, resource):
            return False
        if not self.resource_names:
            return True
        # A name-restricted rule covers create never, list/watch only with a metadata.name field
        # selector (the caller passes that name), other verbs only on a named object.
        return verb != "create" and name is not None and name in self.resource_names


def _match(values: Sequence[str], wanted: str) -> bool:
    return "*" in values or wanted in values


@dataclass(frozen=True)
class Grant:
    """The rules one ServiceAccount gets in one namespace (None: cluster-wide)."""

    role: Manifest
    binding: Manifest
    namespace: str | None
    rules: tuple[Rule, ...]


def rules_of(role: Manifest) -> tuple[Rule, ...]:
    return tuple(Rule.from_dict(r) for r in role.obj.get("rules") or ())


def grants_for(manifests: Sequence[Manifest], namespace: str, service_account: str) -> list[Grant]:
    """Every role bound to the ServiceAccount by the manifests, with where it applies."""
    roles = {(m.kind, m.namespace, m.name): m for m in manifests if m.kind in ("Role", "ClusterRole")}
    out: list[Grant] = []
    for binding in (m for m in manifests if m.kind in ("RoleBinding", "ClusterRoleBinding")):
        subjects = binding.obj.get("subjects") or []
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == service_account
            and s.get("namespace") == namespace
            for s in subjects
        ):
            continue
        ref = binding.obj["roleRef"]
        role_ns = binding.namespace if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_ns, ref["name"]))
        assert role is not None, f"{binding.id} refers to {ref['kind']} {ref['name']}, which is not shipped"
        where = binding.namespace if binding.kind == "RoleBinding" else None
        out.append(Grant(role, binding, where, rules_of(role)))
    return out


@dataclass(frozen=True)
class Request:
    """One API request as the authorizer sees it."""

    verb: str
    group: str
    resource: str  # plural, or plural/subresource
    namespace: str | None  # None: cluster-scoped
    name: str | None = None  # for list/watch: the metadata.name field selector

    def __str__(self) -> str:
        where = f"ns {self.namespace}" if self.namespace else "cluster"
        return f"{self.verb} {self.group or 'core'}/{self.resource} {self.name or '*'} ({where})"


def allowed(grants: Iterable[Grant], request: Request) -> bool:
    for grant in grants:
        # A namespaced request is covered by a ClusterRoleBinding or by a RoleBinding in its
        # namespace; a cluster-scoped one only by a ClusterRoleBinding.
        if grant.namespace is not None and grant.namespace != request.namespace:
            continue
        if any(r.allows(request.verb, request.group, request.resource, request.name) for r in grant.rules):
            return True
    return False


def rbac_violations(role: Mapping[str, Any]) -> list[str]:
    """Why a Role/ClusterRole breaks the project's RBAC policy (empty: it does not).

    No wildcard anywhere; no verb that grants more than it says; Secrets only by name, never
    enumerated (list/watch/deletecollection); no aggregation (it would import unknown rules).
    """
    problems: list[str] = []
    name = f"{role.get('kind')} {(role.get('metadata') or {}).get('name')}"
    if role.get("aggregationRule"):
        problems.append(f"{name}: aggregationRule pulls in rules not written here")
    for i, raw in enumerate(role.get("rules") or ()):
        where = f"{name} rule {i}"
        for key in ("verbs", "resources", "apiGroups", "resourceNames", "nonResourceURLs"):
            if any("*" in str(v) for v in raw.get(key) or ()):
                problems.append(f"{where}: wildcard in {key}")
        if raw.get("nonResourceURLs") and (
            list(raw["nonResourceURLs"]) != ["/metrics"] or set(raw.get("verbs") or ()) != {"get"}
        ):
            problems.append(f"{where}: nonResourceURLs other than get /metrics (the scrapers' right) are not needed")
        verbs = {str(v) for v in raw.get("verbs") or ()}
        if verbs & DANGEROUS_VERBS:
            problems.append(f"{where}: grants {sorted(verbs & DANGEROUS_VERBS)}")
        if not verbs:
            problems.append(f"{where}: no verbs")
        secrets = [r for r in raw.get("resources") or () if str(r).split("/")[0] in ("secrets", "*")]
        core = any(g in ("", "*") for g in raw.get("apiGroups") or ())
        if secrets and core:
            if not raw.get("resourceNames"):
                problems.append(f"{where}: grants secrets without resourceNames")
            if verbs & SECRET_ENUMERATION_VERBS:
                problems.append(f"{where}: grants {sorted(verbs & SECRET_ENUMERATION_VERBS)} on secrets")
    return problems


def containers(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def pod_spec(workload: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def iter_rbac(manifests: Iterable[Manifest]) -> Iterator[Manifest]:
    return (m for m in manifests if m.kind in ("Role", "ClusterRole"))
