"""vCenter access for the daemon and `plan --cloud-verify`: credentials, template lookups, refreshes.

- Credentials: the Secret `--vsphere-credentials` names (default the machine API's
  `openshift-machine-api/vsphere-cloud-credentials`), read by name, re-read at most once a minute.
  Missing, unreadable or without keys for a vCenter: that vCenter's MachineSets stay `skip
  VCenterUnavailable`, said once per cause in the log (and in every decision's message).
- Trust: the system store plus `--vsphere-ca-file`; `--vsphere-insecure` (tests) is warned about.
- Lookups share one session per vCenter, its calls serialised in a thread; each refresh logs in
  with its own (an upload holds a session for minutes). A failed call drops the connection and
  the next one logs in again.
- Lookups are answers for the planner (`CloudFacts.templates`), never raised: a vCenter that cannot
  be reached is `template_errors`, so the decision is a retry-later skip.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from .. import observability as obs
from ..cloud.credentials import CredentialsError, VSphereCredentials, parse_vsphere_credentials
from ..cloud.facts_refresh import AtMostEvery
from ..constants import DEFAULT_OVA_CACHE_DIR, MAPI_NAMESPACE, VSPHERE_CREDENTIALS_SECRET
from ..core.cloud.facts import CloudFacts, TemplateKey, TemplateVm
from ..core.vsphere.topology import TemplateRefresh, TemplateWork
from ..kube.api_errors import ApiError, NotFound, ServerError, TooManyRequests
from ..kube.retry import api_call
from .ova import DEFAULT_MAX_BYTES, OvaCache
from .template_refresh import Guard, RefreshOutcome, TemplateRefresher, VCenterClient
from .vcenter import InventoryMissing, VCenterError, VCenterLogin, VCenterSession

log = structlog.get_logger(__name__)

@dataclass(frozen=True)
class VSphereOptions:
    credentials: tuple[str, str] = (MAPI_NAMESPACE, VSPHERE_CREDENTIALS_SECRET)
    ca_file: str | None = None
    insecure: bool = False
    ova_mirror: str | None = None
    ova_cache_dir: Path = Path(DEFAULT_OVA_CACHE_DIR)
    ova_cache_max_bytes: int = DEFAULT_MAX_BYTES
    concurrency: int = 2  # templates refreshed at once
    timeout: float = 120.0  # one vCenter call
    default_port: int = 443  # a vCenter the Infrastructure does not list (installed before failure domains)

    @classmethod
    def from_args(cls, args: Any) -> VSphereOptions:
        """From the command line's vSphere flags (cli._add_cloud_endpoints)."""
        return cls(
            credentials=tuple(args.vsphere_credentials),
            ca_file=args.vsphere_ca_file,
            insecure=args.vsphere_insecure,
            ova_mirror=args.ova_mirror,
            ova_cache_dir=Path(args.ova_cache_dir),
            default_port=int(getattr(args, "vsphere_port", 443)),
        )


SecretReader = Callable[[str, str], Awaitable[Any]]


@dataclass
class _Said:
    """Causes already logged, so each is said once (until it changes)."""

    causes: set[str] = field(default_factory=set)

    def once(self, cause: str, **kw: Any) -> None:
        if cause not in self.causes:
            self.causes.add(cause)
            log.warning(cause, **kw)


class VSphereChecks:
    # One inventory read serves every MachineSet of a template for this long (a pass over a large
    # fleet, or a resync, would otherwise read the datacenter's VM list once per MachineSet).
    # A refresh drops it: what this process changed is read afresh.
    LOOKUP_TTL = 30.0

    def __init__(self, options: VSphereOptions, read_secret: SecretReader) -> None:
        self.options = options
        self._read_secret = read_secret
        self._credentials: VSphereCredentials | None = None
        self._problem: str | None = "credentials not read yet"
        self._every = AtMostEvery()
        self._clients: dict[str, tuple[VCenterLogin, VCenterClient]] = {}
        self._said = _Said()
        self._current: dict[TemplateKey, bool] = {}
        self._found: dict[tuple[str, str, str, tuple[str, ...]], tuple[float, Any]] = {}
        self.refresher = TemplateRefresher.from_env(
            OvaCache(options.ova_cache_dir, max_bytes=options.ova_cache_max_bytes, mirror=options.ova_mirror),
            concurrency=options.concurrency,
        )
        if options.insecure:
            log.warning("vCenter TLS certificates are not verified (--vsphere-insecure): for tests only")

    @classmethod
    def for_core_api(cls, options: VSphereOptions, core: Any) -> VSphereChecks:
        async def read(namespace: str, name: str) -> Any:
            return await api_call(
                functools.partial(core.read_namespaced_secret, name, namespace), what=f"get secret {namespace}/{name}"
            )

        return cls(options, read)

    # ---- credentials ------------------------------------------------------------------------------
    async def _refresh_credentials(self) -> None:
        await self._every.run(self._load_credentials)

    async def _load_credentials(self) -> None:
        namespace, name = self.options.credentials
        try:
            secret = await self._read_secret(namespace, name)
            self._credentials, self._problem = parse_vsphere_credentials(secret), None
        except (TooManyRequests, ServerError):
            raise  # not knowing is no reason to drop working credentials: this reconcile retries
        except NotFound:
            self._credentials, self._problem = None, f"Secret {namespace}/{name} does not exist"
        except ApiError as exc:
            self._credentials, self._problem = None, f"Secret {namespace}/{name} cannot be read ({exc.describe()})"
        except CredentialsError as exc:
            self._credentials, self._problem = None, str(exc)
        if self._problem is not None:
            self._said.once(f"no vCenter credentials: {self._problem}; vSphere templates are not checked")

    def _login_for(self, server: str, port: int) -> VCenterLogin | str:
        if importlib.util.find_spec("pyVmomi") is None:
            why = "pyvmomi, vCenter's SDK, is not installed (pip install 'bootimage-controller[vsphere]')"
            self._said.once(f"vSphere checks unavailable: {why}")
            return why
        creds = self._credentials
        if creds is None:
            return f"no vCenter credentials ({self._problem})"
        login = creds.logins.get(server)
        if login is None:
            why = f"{creds.source.display} has no {server}.username / {server}.password"
            self._said.once(f"no vCenter credentials for {server}", secret=str(creds.source))
            return why
        return VCenterLogin(server, port, login[0], login[1], self.options.ca_file, self.options.insecure)

    def _client(self, login: VCenterLogin) -> VCenterClient:
        held = self._clients.get(login.server)
        if held is not None and held[0] == login:
            return held[1]
        if held is not None:
            held[1].close()  # rotated credentials (or another port): a new session
        client = VCenterClient(VCenterSession(login, self.options.timeout))
        self._clients[login.server] = (login, client)
        return client

    # ---- lookups ----------------------------------------------------------------------------------
    async def lookup(self, work: TemplateWork, target_release: str | None = None) -> CloudFacts:
        await self._refresh_credentials()
        p = work.placement
        login = self._login_for(p.server, p.port or self.options.default_port)
        if isinstance(login, str):
            return CloudFacts(vcenters_unavailable={p.server: login})
        keys = [TemplateKey(p.server, p.datacenter, p.folder, name) for name in work.names]
        memo_key = (p.server, p.datacenter, p.folder, work.names)
        now = asyncio.get_running_loop().time()
        memo = self._found.get(memo_key)
        if memo is not None and now - memo[0] < self.LOOKUP_TTL:
            found = memo[1]
        else:
            client = self._client(login)
            try:
                found = await client.call(client.session.find, p.datacenter, p.folder, work.names)
            except InventoryMissing as exc:
                return CloudFacts(inventory_missing=dict.fromkeys(keys, (exc.what, exc.path)))
            except VCenterError as exc:
                return CloudFacts(template_errors=dict.fromkeys(keys, str(exc)))
            self._found[memo_key] = (now, found)
        templates: dict[TemplateKey, TemplateVm | None] = {
            key: (found.get(key.name) or (None, None))[1] for key in keys
        }
        if target_release is not None:
            vm = templates.get(keys[0])
            self._current[keys[0]] = vm is not None and vm.release == target_release
            self._report_templates()
        return CloudFacts(templates=templates)

    def forget_lookups(self) -> None:
        """Drop the templates found within `LOOKUP_TTL`: the next lookup asks vCenter again (after
        a refresh, whatever happened there)."""
        self._found.clear()

    def _report_templates(self) -> None:
        current = sum(self._current.values())
        obs.TEMPLATES.labels(current="true").set(current)
        obs.TEMPLATES.labels(current="false").set(len(self._current) - current)

    # ---- refresh ------------------------------------------------------------------------------------
    async def refresh(self, work: TemplateRefresh, guard: Guard) -> RefreshOutcome:
        """Raises `VCenterError`, `ova.OvaError` or `WriteRefused` (see `refresh.TemplateRefresher`)."""
        await self._refresh_credentials()
        login = self._login_for(work.placement.server, work.placement.port or self.options.default_port)
        if isinstance(login, str):
            raise VCenterError(login)
        # Its own session: an upload holds its session for minutes, and the lookups of every other
        # MachineSet must not wait behind it.
        client = VCenterClient(VCenterSession(login, self.options.timeout))
        try:
            outcome = await self.refresher.refresh(client, work, guard)
        finally:
            self.forget_lookups()  # whatever happened in vCenter, read it afresh
            await asyncio.to_thread(client.close)
        p = work.placement
        self._current[TemplateKey(p.server, p.datacenter, p.folder, work.name)] = True
        self._report_templates()
        return outcome

    def close(self) -> None:
        for _, client in self._clients.values():
            client.close()
        self._clients.clear()
