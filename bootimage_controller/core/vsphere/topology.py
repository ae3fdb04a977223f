"""Where a vSphere MachineSet's template lives: the vCenter and failure domain its workspace names.

Pure: reads the Infrastructure `cluster` (`spec.platformSpec.vsphere`, `status.infrastructureName`)
and a providerSpec's `workspace`, and says which vCenter, datacenter, folder, datastore and resource
pool hold (or would hold) the RHCOS template, and the template name the Machine Config Operator
computes, `<infrastructureName>-rhcos-<failureDomain.name>` (reference section 6).

Matching a workspace to a failure domain (the MCO's rules, written down here because the installer
writes the same values into both): the failure domain's `server` is `workspace.server`,
`topology.datacenter` is `workspace.datacenter`, `topology.datastore` is `workspace.datastore`, the
resource pool (`topology.resourcePool`, else `<topology.computeCluster>/Resources`) is
`workspace.resourcePool` when the workspace names one, and `zoneAffinity.hostGroup.vmGroup` is
`workspace.vmGroup` when the workspace names one. Paths are compared cleaned (`//` and a trailing
`/` removed); a datastore given by name alone matches a path ending in that name. More than one
match takes the first in the Infrastructure's order (the installer never writes two alike).

Clusters installed before failure domains (4.12 and older) have none in the Infrastructure, often
no vCenter either. The MCO skips them; here the workspace alone places the template (its server,
datacenter, datastore, resource pool and folder), under the name that installer gave it,
`<infrastructureName>-rhcos`, on the vCenter the credentials Secret has keys for.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_VCENTER_PORT = 443
MAX_VM_NAME = 80  # vCenter's limit on a VM (template) name
INFRASTRUCTURE = "Infrastructure cluster"


@dataclass(frozen=True)
class FailureDomain:
    name: str
    server: str
    datacenter: str
    datastore: str
    resource_pool: str | None
    compute_cluster: str | None
    folder: str | None
    vm_group: str | None
    networks: tuple[str, ...] = ()


@dataclass(frozen=True)
class VCenter:
    server: str
    port: int = DEFAULT_VCENTER_PORT


@dataclass(frozen=True)
class VSphereTopology:
    """Infrastructure `spec.platformSpec.vsphere`, as far as templates need it.

    `problem` is set (and nothing else trusted) when that part of the Infrastructure is malformed:
    the vSphere MachineSets get an `error` naming it, the rest of the cluster is planned as usual.
    """

    infrastructure_name: str | None
    vcenters: tuple[VCenter, ...] = ()
    failure_domains: tuple[FailureDomain, ...] = ()
    problem: str | None = None

    @classmethod
    def from_infrastructure(cls, infrastructure: Mapping[str, Any] | None) -> VSphereTopology | None:
        """None when the Infrastructure has no `spec.platformSpec.vsphere` (nothing to resolve against)."""
        if not isinstance(infrastructure, Mapping):
            return None
        platform_spec = _mapping(_mapping(infrastructure.get("spec")).get("platformSpec"))
        vsphere = platform_spec.get("vsphere")
        infra_name = _mapping(infrastructure.get("status")).get("infrastructureName")
        infra_name = infra_name if isinstance(infra_name, str) and infra_name else None
        if vsphere is None:
            return cls(infra_name)  # installed before failure domains (`legacy`)
        try:
            return cls(infra_name, _vcenters(vsphere), _failure_domains(vsphere))
        except _Malformed as exc:
            return cls(infra_name, problem=f"{INFRASTRUCTURE}: spec.platformSpec.vsphere.{exc.field}: {exc.problem}")

    def vcenter(self, server: str) -> VCenter | None:
        return next((v for v in self.vcenters if v.server == server), None)

    @property
    def legacy(self) -> bool:
        """Installed before failure domains: the workspace alone places the template."""
        return not self.failure_domains


@dataclass(frozen=True)
class Workspace:
    """`providerSpec.workspace` of a VSphereMachineProviderSpec."""

    server: str | None
    datacenter: str | None
    folder: str | None
    datastore: str | None
    resource_pool: str | None
    vm_group: str | None


@dataclass(frozen=True)
class TemplatePlacement:
    """Where the template VM is looked up and where a new one is imported."""

    server: str
    port: int
    datacenter: str
    folder: str  # inventory path, e.g. /DC0/vm/infra-id
    datastore: str
    resource_pool: str
    failure_domain: str  # "" when the workspace alone placed it (`VSphereTopology.legacy`)
    computed_name: str | None  # None without status.infrastructureName

    def field_of(self, what: str) -> str:
        """Where an inventory path of this placement comes from, for a message an admin acts on:
        `workspace.folder`, or the failure domain's `topology.folder`."""
        if not self.failure_domain:
            return f"workspace.{what}"
        return f"workspace.{what} or {INFRASTRUCTURE} failure domain {self.failure_domain} topology.{what}"


@dataclass(frozen=True)
class PlacementError:
    """The workspace names no vCenter or failure domain of the Infrastructure (an `error` decision)."""

    message: str
    field: str  # the workspace field to look at, relative to providerSpec.value


def resolve_placement(topology: VSphereTopology, ws: Workspace) -> TemplatePlacement | PlacementError:
    if topology.problem is not None:
        return PlacementError(topology.problem, "workspace")
    if not ws.server:
        return PlacementError("workspace.server is empty: cannot tell which vCenter holds the template", "workspace.server")
    if topology.legacy:
        return _from_workspace(topology, ws)
    vcenter = topology.vcenter(ws.server)
    if vcenter is None:
        known = ", ".join(v.server for v in topology.vcenters) or "none"
        return PlacementError(
            f"workspace.server {ws.server} is not one of the vCenters in {INFRASTRUCTURE} "
            f"spec.platformSpec.vsphere.vcenters ({known})",
            "workspace.server",
        )
    domain = next((fd for fd in topology.failure_domains if _matches(fd, ws)), None)
    if domain is None:
        return PlacementError(
            f"workspace (server {ws.server}, datacenter {ws.datacenter}, datastore {ws.datastore}, resourcePool "
            f"{ws.resource_pool or '-'}, vmGroup {ws.vm_group or '-'}) matches no failure domain in {INFRASTRUCTURE} "
            f"spec.platformSpec.vsphere.failureDomains ({', '.join(fd.name for fd in topology.failure_domains) or 'none'})",
            "workspace",
        )
    folder = clean_path(ws.folder or domain.folder or f"/{domain.datacenter}/vm")
    pool = clean_path(ws.resource_pool or domain.resource_pool or f"{domain.compute_cluster}/Resources")
    computed = f"{topology.infrastructure_name}-rhcos-{domain.name}" if topology.infrastructure_name else None
    return TemplatePlacement(
        server=vcenter.server,
        port=vcenter.port,
        datacenter=domain.datacenter,
        folder=folder,
        datastore=domain.datastore,
        resource_pool=pool,
        failure_domain=domain.name,
        computed_name=computed,
    )


def _from_workspace(topology: VSphereTopology, ws: Workspace) -> TemplatePlacement | PlacementError:
    """No failure domains: the workspace names every part of the placement itself."""
    assert ws.server
    for field, value in (("datacenter", ws.datacenter), ("datastore", ws.datastore), ("resourcePool", ws.resource_pool)):
        if not value:
            return PlacementError(
                f"workspace.{field} is empty, and {INFRASTRUCTURE} names no failure domain to take it from "
                "(a cluster installed before failure domains: the workspace alone places the template)",
                f"workspace.{field}",
            )
    assert ws.datacenter and ws.datastore and ws.resource_pool
    vcenter = topology.vcenter(ws.server)
    if topology.vcenters and vcenter is None:
        known = ", ".join(v.server for v in topology.vcenters)
        return PlacementError(
            f"workspace.server {ws.server} is not one of the vCenters in {INFRASTRUCTURE} "
            f"spec.platformSpec.vsphere.vcenters ({known})",
            "workspace.server",
        )
    return TemplatePlacement(
        server=ws.server,
        port=vcenter.port if vcenter is not None else 0,  # 0: not named; the vSphere checks' default port
        datacenter=ws.datacenter.strip("/"),
        folder=clean_path(ws.folder or f"/{ws.datacenter.strip('/')}/vm"),
        datastore=ws.datastore,
        resource_pool=clean_path(ws.resource_pool),
        failure_domain="",
        computed_name=f"{topology.infrastructure_name}-rhcos" if topology.infrastructure_name else None,
    )


def clean_path(path: str) -> str:
    cleaned = posixpath.normpath(path) if path else path
    return "/" + cleaned.lstrip("/") if cleaned.startswith("/") else cleaned


def _matches(fd: FailureDomain, ws: Workspace) -> bool:
    if fd.server != ws.server or fd.datacenter != ws.datacenter:
        return False
    if not _same_datastore(fd.datastore, ws.datastore):
        return False
    if ws.resource_pool:
        pool = fd.resource_pool or (f"{fd.compute_cluster}/Resources" if fd.compute_cluster else None)
        if pool is None or clean_path(pool) != clean_path(ws.resource_pool):
            return False
    return not ws.vm_group or fd.vm_group == ws.vm_group


def _same_datastore(domain: str, workspace: str | None) -> bool:
    if not workspace:
        return False
    a, b = clean_path(domain), clean_path(workspace)
    if a == b:
        return True
    # One side by name alone, the other a path ending in it.
    return ("/" not in a and b.rsplit("/", 1)[-1] == a) or ("/" not in b and a.rsplit("/", 1)[-1] == b)


def leftover_names(name: str, release: str) -> tuple[str, str]:
    """(temporary, old) VM names of a refresh of template `name` to `release`, fixed per name and
    release so a crashed refresh is recognised on the next pass. The temporary name carries the
    release (issue 25): vCenter keeps a VM's files in a datastore folder named after the VM at its
    creation and a rename moves none, so the template built at the last release still holds the
    folder of its temporary name; one fixed name collided (FileAlreadyExists) from the second
    release on. Short: they must fit vCenter's 80 characters."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    tag = re.sub(r"[^A-Za-z0-9.-]", "-", release)[:40]
    return f"bic-tmp-{digest}-{tag}", f"bic-old-{digest}"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class _Malformed(Exception):
    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem


def _string(obj: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise _Malformed(f"{where}.{key}", "missing" if value in (None, "") else "expected a string")
    return value or None


def _list(vsphere: Mapping[str, Any], key: str) -> list[Any]:
    value = vsphere.get(key) if isinstance(vsphere, Mapping) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Malformed(key, "expected a list")
    return value


def _vcenters(vsphere: Any) -> tuple[VCenter, ...]:
    out = []
    for i, item in enumerate(_list(vsphere, "vcenters")):
        if not isinstance(item, Mapping):
            raise _Malformed(f"vcenters[{i}]", "expected an object")
        port = item.get("port", DEFAULT_VCENTER_PORT) or DEFAULT_VCENTER_PORT
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise _Malformed(f"vcenters[{i}].port", "expected a port number")
        server = _string(item, "server", f"vcenters[{i}]")
        assert server is not None
        out.append(VCenter(server, port))
    return tuple(out)


def _failure_domains(vsphere: Any) -> tuple[FailureDomain, ...]:
    out = []
    for i, item in enumerate(_list(vsphere, "failureDomains")):
        where = f"failureDomains[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("topology"), Mapping):
            raise _Malformed(where if not isinstance(item, Mapping) else f"{where}.topology", "expected an object")
        topo = item["topology"]
        tw = f"{where}.topology"
        host_group = _mapping(_mapping(item.get("zoneAffinity")).get("hostGroup"))
        networks = topo.get("networks") or []
        out.append(
            FailureDomain(
                name=str(_string(item, "name", where)),
                server=str(_string(item, "server", where)),
                datacenter=str(_string(topo, "datacenter", tw)),
                datastore=str(_string(topo, "datastore", tw)),
                resource_pool=_string(topo, "resourcePool", tw, required=False),
                compute_cluster=_string(topo, "computeCluster", tw, required=False),
                folder=_string(topo, "folder", tw, required=False),
                vm_group=_string(host_group, "vmGroup", f"{where}.zoneAffinity.hostGroup", required=False),
                networks=tuple(n for n in networks if isinstance(n, str)) if isinstance(networks, list) else (),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class OvaSource:
    """The stream's OVA for one architecture (`artifacts.vmware.formats.ova.disk`)."""

    url: str
    sha256: str | None
    release: str


@dataclass(frozen=True)
class TemplateRefresh:
    """Build template `name` from the stream's OVA (create it, or replace the VM of that name)."""

    placement: TemplatePlacement
    name: str
    ova: OvaSource
    infrastructure_name: str | None
    tag_ids: tuple[str, ...] = ()  # providerSpec.tagIDs, attached besides the old template's tags
    network: str | None = None  # providerSpec.network.devices[0].networkName, for the OVF's network


@dataclass(frozen=True)
class TemplateWork:
    """What a vSphere decision needs from vCenter: the names to look up and, for a patch that
    needs one, the template to build. Carried on the decision; never in `plan -o json`."""

    placement: TemplatePlacement
    names: tuple[str, ...]  # providerSpec.template, then the computed name when it differs
    refresh: TemplateRefresh | None = None
