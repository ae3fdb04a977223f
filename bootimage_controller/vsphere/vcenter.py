"""vCenter calls for template refreshes: pyvmomi (SOAP) and the vAPI REST endpoint (tags).

Synchronous: pyvmomi is. `vsphere.template_checks` runs every call here in a thread, at most a few at once.
Every failure leaves as `VCenterError` with a short message (the fault's own text, never the
credentials); a VM is handled by its managed object id between calls, never by a cached object.

The release record: vcsim (and some real templates built by hand) carry no vApp product version, so
when this controller builds a template it also writes the release into the VM's annotation, one line
`machineconfiguration.openshift.io/boot-image-release=<build id>` beside whatever else it says.
`release_of` reads the product version first, then that line.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..constants import ANNOTATION_RELEASE
from ..core.cloud.facts import TemplateVm
from ..core.vsphere.topology import TemplatePlacement, clean_path
from .ova import OvfInfo

RECORD_PREFIX = f"{ANNOTATION_RELEASE}="
TASK_POLL = 0.2
UPLOAD_BLOCK = 1 << 20


class InventoryMissing(Exception):
    """A placement's datacenter or folder does not exist in vCenter: the MachineSet names nothing
    there (an `error` naming the field, not an outage to retry)."""

    def __init__(self, what: str, path: str, server: str) -> None:
        self.what, self.path = what, path
        super().__init__(f"{what} {path} does not exist in vCenter {server}")


class VCenterError(Exception):
    """A vCenter call failed; the message says which and why (no secrets)."""


@dataclass(frozen=True)
class VCenterLogin:
    server: str
    port: int
    username: str
    password: str = field(repr=False)
    ca_file: str | None = None
    insecure: bool = False

    def ssl_context(self) -> ssl.SSLContext:
        if self.insecure:
            return ssl._create_unverified_context()
        context = ssl.create_default_context()
        if self.ca_file:
            context.load_verify_locations(cafile=self.ca_file)
        return context


def release_of(product_version: str | None, annotation: str | None) -> tuple[str | None, str | None]:
    """(release, where it came from): the vApp product version, else our record line."""
    if product_version and product_version.strip():
        return product_version.strip(), "product version"
    for line in (annotation or "").splitlines():
        if line.startswith(RECORD_PREFIX) and line[len(RECORD_PREFIX) :].strip():
            return line[len(RECORD_PREFIX) :].strip(), "record"
    return None, None


def with_record(annotation: str | None, release: str) -> str:
    """The annotation with our record line set to `release` (other lines kept)."""
    kept = [line for line in (annotation or "").splitlines() if not line.startswith(RECORD_PREFIX)]
    return "\n".join([*kept, f"{RECORD_PREFIX}{release}"])


class VCenterSession:
    """One logged-in session to one vCenter. Not thread-safe: the caller serialises its use."""

    def __init__(self, login: VCenterLogin, timeout: float = 60.0) -> None:
        self.login = login
        self.timeout = timeout
        self._si: Any = None
        self._rest_session: str | None = None

    # ---- connection -----------------------------------------------------------------------------
    @property
    def si(self) -> Any:
        if self._si is None:
            self._si = self._connect()
        return self._si

    def _connect(self) -> Any:
        from pyVim.connect import SmartConnect  # pyvmomi loads only when vSphere is used
        from pyVmomi import vim

        proxy = _proxy(self.login.server, self.login.port)
        try:
            return SmartConnect(
                host=self.login.server,
                port=self.login.port,
                user=self.login.username,
                pwd=self.login.password,
                sslContext=self.login.ssl_context(),
                httpConnectionTimeout=self.timeout,
                **({"httpProxyHost": proxy[0], "httpProxyPort": proxy[1]} if proxy else {}),
            )
        except vim.fault.InvalidLogin:
            raise VCenterError(f"vCenter {self.login.server} rejected the login") from None
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            raise VCenterError(f"cannot reach vCenter {self.login.server}:{self.login.port}: {exc}") from None

    def close(self) -> None:
        if self._si is not None:
            from pyVim.connect import Disconnect

            with contextlib.suppress(Exception):  # logging out of a dead session: nothing to do
                Disconnect(self._si)
            self._si = None
        self._rest_session = None

    @contextlib.contextmanager
    def calls(self, what: str) -> Iterator[None]:
        """Turn whatever pyvmomi raises into a `VCenterError` naming the step; a broken connection
        is dropped so the next call logs in again."""
        from pyVmomi import vmodl

        try:
            yield
        except VCenterError:
            raise
        except vmodl.MethodFault as exc:
            raise VCenterError(f"{what}: {getattr(exc, 'msg', None) or type(exc).__name__}") from None
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            self.close()
            raise VCenterError(f"{what}: {exc}") from None

    # ---- inventory --------------------------------------------------------------------------------
    def _by_path(self, path: str) -> Any:
        found = self.si.content.searchIndex.FindByInventoryPath(clean_path(path).lstrip("/"))
        if found is None:
            raise VCenterError(f"{path} does not exist in vCenter {self.login.server}")
        return found

    def _vm(self, moid: str) -> Any:
        from pyVmomi import vim

        return vim.VirtualMachine(moid, self.si._stub)

    def find(self, datacenter: str, folder: str, names: tuple[str, ...]) -> dict[str, tuple[str, TemplateVm] | None]:
        """Each name's VM in the datacenter (moid and facts), preferring the one in `folder`; None
        when the datacenter has no VM of that name."""
        from pyVmomi import vim, vmodl

        with self.calls(f"list VMs in datacenter {datacenter}"):
            index = self.si.content.searchIndex
            dc = index.FindByInventoryPath(clean_path(datacenter).lstrip("/"))
            if dc is None:
                raise InventoryMissing("datacenter", datacenter, self.login.server)
            folder_obj = index.FindByInventoryPath(clean_path(folder).lstrip("/"))
            if folder_obj is None:
                raise InventoryMissing("folder", folder, self.login.server)
            folder_id = folder_obj._moId
            view = self.si.content.viewManager.CreateContainerView(dc.vmFolder, [vim.VirtualMachine], True)
            try:
                pc = vmodl.query.PropertyCollector
                spec = pc.FilterSpec(
                    objectSet=[pc.ObjectSpec(obj=view, skip=True, selectSet=[
                        pc.TraversalSpec(name="view", path="view", skip=False, type=vim.view.ContainerView)
                    ])],
                    propSet=[pc.PropertySpec(type=vim.VirtualMachine, pathSet=[
                        "name", "parent", "config.template", "config.annotation", "summary.config.product",
                    ])],
                )
                contents = self.si.content.propertyCollector.RetrieveContents([spec])
            finally:
                view.DestroyView()
        out: dict[str, tuple[str, TemplateVm] | None] = dict.fromkeys(names)
        for obj in contents:
            props = {p.name: p.val for p in obj.propSet}
            name = props.get("name")
            if name not in out:
                continue
            parent = props.get("parent")
            in_folder = parent is not None and parent._moId == folder_id
            current = out[name]
            if current is not None and current[1].in_folder:
                continue
            product = props.get("summary.config.product")
            release, source = release_of(getattr(product, "version", None), props.get("config.annotation"))
            vm = TemplateVm(
                name=name,
                in_folder=in_folder,
                folder=folder if in_folder else self._path_of(parent),
                is_template=bool(props.get("config.template")),
                release=release,
                release_from=source,
            )
            out[name] = (obj.obj._moId, vm)
        return out

    def _path_of(self, entity: Any) -> str | None:
        parts = []
        try:
            while entity is not None and entity._moId != self.si.content.rootFolder._moId:
                parts.append(entity.name)
                entity = entity.parent
        except Exception:  # a best-effort path for a message: never worth failing the lookup
            return None
        return "/" + "/".join(reversed(parts))

    # ---- changes ----------------------------------------------------------------------------------
    def import_ova(
        self,
        placement: TemplatePlacement,
        name: str,
        ova: Path,
        ovf: OvfInfo,
        network: str | None,
        progress: Callable[[int, int], None],
    ) -> str:
        """Import the OVA as VM `name` in the workspace folder; returns its moid. The NFC upload
        streams each disk from the OVA file; the lease is aborted on any failure."""
        from pyVmomi import vim

        with self.calls(f"import {name}"):
            content = self.si.content
            dc = self._by_path(placement.datacenter)
            folder = self._by_path(placement.folder)
            pool = self._by_path(placement.resource_pool)
            datastore = next((d for d in dc.datastore if _same_name(d.name, placement.datastore)), None)
            if datastore is None:
                raise VCenterError(f"datastore {placement.datastore} not found in datacenter {placement.datacenter}")
            mapping = []
            if network and ovf.networks:
                net = next((n for n in dc.network if n.name == network), None)
                if net is None:
                    raise VCenterError(f"network {network} not found in datacenter {placement.datacenter}")
                mapping = [vim.OvfManager.NetworkMapping(name=n, network=net) for n in ovf.networks]
            params = vim.OvfManager.CreateImportSpecParams(
                entityName=name, diskProvisioning="thin", networkMapping=mapping
            )
            result = content.ovfManager.CreateImportSpec(ovf.descriptor, pool, datastore, params)
            if result.error:
                raise VCenterError(f"import {name}: the OVF was refused: {result.error[0].msg}")
            lease = pool.ImportVApp(result.importSpec, folder)
            try:
                moid = self._upload(lease, result.fileItem or [], ova, progress)
            except BaseException:
                with contextlib.suppress(Exception):
                    lease.HttpNfcLeaseAbort()
                raise
            return moid

    def _upload(self, lease: Any, items: list[Any], ova: Path, progress: Callable[[int, int], None]) -> str:
        from pyVmomi import vim

        deadline = time.monotonic() + self.timeout
        while lease.state == vim.HttpNfcLease.State.initializing:
            if time.monotonic() > deadline:
                raise VCenterError("the import lease did not become ready")
            time.sleep(TASK_POLL)
        if lease.state != vim.HttpNfcLease.State.ready:
            raise VCenterError(f"the import lease is {lease.state}: {getattr(lease.error, 'msg', '')}")
        info = lease.info
        moid = str(info.entity._moId)
        by_key = {item.deviceId: item for item in items}
        total = sum(int(item.size or 0) for item in items) or 1
        sent = 0
        import tarfile  # here: only an upload reads the OVA's disks (ova.py imports it alike)

        with tarfile.open(ova, "r:") as tar:
            for device in info.deviceUrl:
                item = by_key.get(device.importKey)
                if item is None:
                    continue
                member = tar.getmember(item.path)
                handle = tar.extractfile(member)
                assert handle is not None
                url = device.url.replace("*", f"{self.login.server}:{self.login.port}")

                def sent_so_far(n: int, base: int = sent) -> None:
                    progress(base + n, total)
                    with contextlib.suppress(Exception):  # progress is advisory: never fail an upload on it
                        lease.HttpNfcLeaseProgress(min(99, int(100 * (base + n) / total)))

                self._put(url, handle, member.size, item.create, sent_so_far)
                sent += member.size
        lease.HttpNfcLeaseProgress(100)
        lease.HttpNfcLeaseComplete()
        return moid

    def _put(self, url: str, data: Any, size: int, create: bool, progress: Callable[[int], None]) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        conn = self._connection(parts.hostname or self.login.server, parts.port or 443)
        try:
            conn.putrequest("PUT" if create else "POST", parts.path + (f"?{parts.query}" if parts.query else ""))
            conn.putheader("Content-Type", "application/x-vnd.vmware-streamVmdk")
            conn.putheader("Content-Length", str(size))
            conn.endheaders()
            done, next_report = 0, 0
            while block := data.read(UPLOAD_BLOCK):
                conn.send(block)
                done += len(block)
                if done >= next_report:
                    progress(done)
                    next_report = done + (64 << 20)
            response = conn.getresponse()
            response.read()
            if response.status >= 300:
                raise VCenterError(f"disk upload answered {response.status} {response.reason}")
        finally:
            conn.close()

    def finish_template(self, moid: str, release: str, *, disable_secure_boot: bool, mark: bool) -> None:
        """Turn EFI secure boot off when the OVF turned it on (RHCOS boot images are not signed
        for it); with `mark`, write our release record and mark the VM a template (the last step
        of an import: a template carrying the record is a complete one)."""
        from pyVmomi import vim

        with self.calls("finish the imported template"):
            vm = self._vm(moid)
            spec = vim.vm.ConfigSpec()
            if disable_secure_boot:
                spec.bootOptions = vim.vm.BootOptions(efiSecureBootEnabled=False)
            if mark:
                spec.annotation = with_record(vm.config.annotation, release)
            if disable_secure_boot or mark:
                self._wait(vm.ReconfigVM_Task(spec), "reconfigure")
            if mark and not vm.config.template:
                vm.MarkAsTemplate()

    def rename(self, moid: str, new_name: str) -> None:
        with self.calls(f"rename to {new_name}"):
            self._wait(self._vm(moid).Rename_Task(new_name), f"rename to {new_name}")

    def destroy(self, moid: str) -> None:
        from pyVmomi import vmodl

        with self.calls("delete VM"):
            try:
                self._wait(self._vm(moid).Destroy_Task(), "delete")
            except vmodl.fault.ManagedObjectNotFound:
                return  # already gone

    def _wait(self, task: Any, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            state = task.info.state
            if state == "success":
                return
            if state == "error":
                error = task.info.error
                raise VCenterError(f"{what}: {getattr(error, 'msg', None) or type(error).__name__}")
            if time.monotonic() > deadline:
                raise VCenterError(f"{what}: no answer from vCenter within {self.timeout:.0f}s")
            time.sleep(TASK_POLL)

    # ---- tags (vAPI REST) ---------------------------------------------------------------------------
    def attached_tags(self, moid: str) -> list[str]:
        answer = self._rest("POST", "/rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags",
                            {"object_id": {"type": "VirtualMachine", "id": moid}})
        return [str(t) for t in (answer or {}).get("value") or []]

    def tag_named(self, name: str, category_name: str | None = None) -> str | None:
        """The id of the tag called `name` (in the category of that name, when given)."""
        for tag_id in (self._rest("GET", "/rest/com/vmware/cis/tagging/tag") or {}).get("value") or []:
            tag = (self._rest("GET", f"/rest/com/vmware/cis/tagging/tag/id:{quote(str(tag_id))}") or {}).get("value") or {}
            if tag.get("name") != name:
                continue
            if category_name is None:
                return str(tag_id)
            category = (self._rest("GET", f"/rest/com/vmware/cis/tagging/category/id:{quote(str(tag.get('category_id')))}") or {}).get("value") or {}
            if category.get("name") == category_name:
                return str(tag_id)
        return None

    def attach_tag(self, tag_id: str, moid: str) -> None:
        self._rest("POST", f"/rest/com/vmware/cis/tagging/tag-association/id:{quote(tag_id)}?~action=attach",
                   {"object_id": {"type": "VirtualMachine", "id": moid}})

    def _rest(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        for attempt in (1, 2):
            if self._rest_session is None:
                self._rest_session = self._rest_login()
            status, answer = self._rest_call(method, path, body, {"vmware-api-session-id": self._rest_session})
            if status == 401 and attempt == 1:
                self._rest_session = None  # expired: log in again once
                continue
            if status >= 300:
                raise VCenterError(f"vCenter tagging API {method} {path.split('?')[0]} answered {status}")
            return answer
        raise VCenterError("vCenter tagging API kept refusing the session")

    def _rest_login(self) -> str:
        token = base64.b64encode(f"{self.login.username}:{self.login.password}".encode()).decode()
        status, answer = self._rest_call("POST", "/rest/com/vmware/cis/session", None, {"Authorization": f"Basic {token}"})
        if status >= 300 or not isinstance(answer, Mapping):
            raise VCenterError(f"vCenter {self.login.server} tagging API rejected the login ({status})")
        return str(answer.get("value"))

    def _rest_call(self, method: str, path: str, body: Mapping[str, Any] | None, headers: Mapping[str, str]) -> tuple[int, Any]:
        conn = self._connection(self.login.server, self.login.port)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json", **headers})
            response = conn.getresponse()
            text = response.read()
            return response.status, (json.loads(text) if text.strip() else None)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise VCenterError(f"vCenter tagging API {method} {path.split('?')[0]}: {exc}") from None
        finally:
            conn.close()


    def _connection(self, host: str, port: int) -> http.client.HTTPSConnection:
        """An HTTPS connection to vCenter, through the cluster-wide proxy when NO_PROXY does not
        exempt it (a CONNECT tunnel: TLS stays end to end)."""
        proxy = _proxy(host, port)
        if proxy is None:
            return http.client.HTTPSConnection(host, port, context=self.login.ssl_context(), timeout=self.timeout)
        conn = http.client.HTTPSConnection(proxy[0], proxy[1], context=self.login.ssl_context(), timeout=self.timeout)
        conn.set_tunnel(host, port)
        return conn


def _proxy(host: str, port: int) -> tuple[str, int] | None:
    """(host, port) of the proxy the environment names for https://host:port (cluster_proxy sets it)."""
    from urllib.parse import urlsplit

    from ..kube.client import proxy_for

    url = proxy_for(f"https://{host}:{port}")
    if not url:
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return (parts.hostname, parts.port or 3128) if parts.hostname else None


def _same_name(name: str, path: str) -> bool:
    return name == path or clean_path(path).rsplit("/", 1)[-1] == name
