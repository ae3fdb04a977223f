"""The Kubernetes API client: configuration, client-side rate limit, per-request metrics.

Hook point. Every generated API method of kubernetes_asyncio ends in
`ApiClient.__call_api`, which sends the request through the public method
`ApiClient.request(method, url, query_params, ...)` (it only dispatches to
`rest_client.GET/PUT/...`). Overriding that one method in a subclass sees every request
(typed APIs, CustomObjectsApi, watches, which are GETs with `watch=True`) with the method,
the full URL and the query parameters still separate, and both outcomes: the response status,
or an `ApiException` carrying it. The alternatives are worse: monkeypatching `rest_client`
instance attributes is invisible to readers, and an aiohttp `TraceConfig` must be passed when
the session is created (inside `RESTClientObject.__init__`), cannot block for the rate limiter
cleanly, and sees only the encoded URL.
"""

from __future__ import annotations

import asyncio.sslproto
import ipaddress
import json
import os
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import structlog
import yaml
from kubernetes_asyncio import config as kconfig
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from .. import __version__
from ..constants import MCO_NAMESPACE
from ..observability import API_REQUESTS
from .api_errors import ApiError
from .fence import WriteFence, check_write
from .kubeconfig import contexts_of, default_kubeconfig, missing_kubeconfig
from .retry import TokenBucket
from .tls import api_tls_context

log = structlog.get_logger(__name__)

DEFAULT_QPS = 20.0
DEFAULT_BURST = 40
USER_AGENT = f"bootimage-controller/{__version__}"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# Total seconds for a request that sets no timeout of its own (watches and lists do). Without it
# kubernetes_asyncio waits forever: one request on a connection that never answers (half-open after
# a network partition, a wedged proxy) would hold a worker, and its MachineSet, for good.
DEFAULT_REQUEST_TIMEOUT = 60.0
# kubernetes_asyncio's read buffer (a watch event may carry an object up to etcd's 1.5 MiB limit).
READ_BUFSIZE = 2**21

# What asyncio reads from a TLS socket at once. Its default (`asyncio.sslproto.SSLProtocol.max_size`,
# 256 KiB) is a bytearray allocated and zeroed for every TLS connection, and the daemon keeps one
# connection per watch: 25 of them held 6.6 MiB of zeroes at N = 5,000 (issue 36). A TLS record
# carries at most 16 KiB, so a 64 KiB read still takes four records per call; measured at 5,000
# MachineSets: 3-4.5 MiB less peak memory, no change in time.
TLS_READ_BUFFER = 64 * 1024

_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
# The authentication setting every generated kubernetes_asyncio method names (and `CoreApi`'s).
BEARER_TOKEN_AUTH = "BearerToken"


class ClientConfigError(Exception):
    """No usable kubeconfig and not running in a cluster."""


def classify_request(method: str, url: str, query_params: Any = None) -> tuple[str, str]:
    """(verb, resource) for a request, as the API server's audit log would name them.

    `/api/v1/namespaces/ns/configmaps/x` -> ("get", "configmaps");
    `/apis/g/v/namespaces/ns/machinesets?watch=True` -> ("watch", "machinesets");
    a subresource is reported as `plural/sub` (`machinesets/status`). Discovery paths
    (`/api`, `/apis/g/v`, `/version`) give resource "".
    """
    segments = [s for s in urlsplit(url).path.split("/") if s]
    # A server URL may carry a path prefix (proxies); the API path starts at `api` or `apis`.
    start = next((i for i, s in enumerate(segments) if s in ("api", "apis")), None)
    rest: list[str] = []
    if start is not None:
        # core: api/v1/...; named groups: apis/<group>/<version>/...
        rest = segments[start + (2 if segments[start] == "api" else 3) :]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    method = method.upper()
    if method in _WRITE_VERBS:
        return _WRITE_VERBS[method], resource
    if method == "DELETE":
        return ("delete" if name else "deletecollection"), resource
    if name is not None or not rest:
        return "get", resource
    return ("watch" if _is_watch(query_params) else "list"), resource


def _is_watch(query_params: Any) -> bool:
    items = query_params.items() if isinstance(query_params, dict) else (query_params or [])
    return any(k == "watch" and str(v).lower() in ("true", "1") for k, v in items)


def proxy_for(url: str) -> str | None:
    """The proxy `HTTPS_PROXY`/`HTTP_PROXY` name for `url`, or None when `NO_PROXY` exempts its host.

    `NO_PROXY` entries are host names, domain suffixes (`.svc`), `*`, and, as in Go's
    `httpproxy` that the other OpenShift operators use, CIDR ranges (`172.30.0.0/16`): the cluster-wide
    proxy lists the service network that way, and the in-cluster API address is in it.
    """
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    host = parts.hostname
    if not proxy or not host:
        return None
    # urllib's own NO_PROXY matcher (what aiohttp used per request); typeshed leaves it out.
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if _in_no_proxy_cidr(host, proxies.get("no", "")) or bypass(host, proxies):
        return None
    return proxy


def _in_no_proxy_cidr(host: str, no_proxy: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    for entry in (e.strip() for e in no_proxy.split(",")):
        if "/" not in entry:
            continue
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


class InstrumentedApiClient(ApiClient):
    """An `ApiClient` whose every request waits for the token bucket and is counted.

    The proxy is resolved once, here, from the environment (`proxy_for`); the HTTP session then
    does not look at the environment per request. kubernetes_asyncio opens its aiohttp session with
    `trust_env=True`, which makes every request read `~/.netrc` and the proxy variables in a thread
    of the default executor: two thread hand-offs per request (a 1,000-MachineSet `--once` pass
    took 4.9 s of the daemon's CPU with them, 3.6 s without), and a `~/.netrc` entry for the API
    host would add basic auth beside the bearer token, which aiohttp refuses.
    """

    def __init__(
        self, configuration: Any, limiter: TokenBucket | None = None, fence: WriteFence | None = None
    ) -> None:
        if configuration.proxy is None and configuration.host:
            configuration.proxy = proxy_for(configuration.host)
        super().__init__(configuration)
        self.limiter = limiter
        # Set by the daemon once its elector exists (the elector needs this client first).
        self.fence = fence
        self.user_agent = USER_AGENT
        # The stock session's connector has opened nothing yet: it is replaced by one whose TLS
        # context resumes sessions (kube/tls.py), with the same connection limit.
        stock = self.rest_client.pool_manager
        connector = aiohttp.TCPConnector(limit=configuration.connection_pool_maxsize,
                                         ssl=api_tls_context(configuration))
        self.rest_client.pool_manager = aiohttp.ClientSession(
            connector=connector, trust_env=False, read_bufsize=READ_BUFSIZE
        )
        stock.detach()  # nothing to close: the stock connector never connected

    async def request(
        self,
        method: str,
        url: str,
        query_params: Any = None,
        headers: Any = None,
        post_params: Any = None,
        body: Any = None,
        _preload_content: bool = True,
        _request_timeout: Any = None,
    ) -> Any:
        verb, resource = classify_request(method, url, query_params)
        if _request_timeout is None:
            _request_timeout = DEFAULT_REQUEST_TIMEOUT  # a timeout is retried like a broken connection
        if self.limiter is not None:
            await self.limiter.acquire()
        # After the limiter, right before the send: a wait for a token must not outlive leadership.
        check_write(method, resource, self.fence)
        code = "error"
        try:
            response = await super().request(
                method,
                url,
                query_params=query_params,
                headers=headers,
                post_params=post_params,
                body=body,
                _preload_content=_preload_content,
                _request_timeout=_request_timeout,
            )
            code = str(response.status)
            return response
        except ApiException as exc:
            code = str(exc.status)
            raise
        finally:
            API_REQUESTS.labels(verb=verb, resource=resource, code=code).inc()


async def load_configuration(kubeconfig: str | None, context: str | None = None) -> Any:
    """A `Configuration` from `kubeconfig`; else in-cluster; else `$KUBECONFIG` / `~/.kube/config`.

    Every failure is one `ClientConfigError` naming the file (or variable) and the cause: a missing
    file, YAML that does not parse, a context or user that is not there.
    """
    cfg = Configuration()
    if kubeconfig:
        await _load_file(Path(kubeconfig), f"--kubeconfig {kubeconfig}", cfg, context)
        return cfg
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        # Sync in kubernetes_asyncio; it re-reads the projected token before it expires.
        try:
            kconfig.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except (kconfig.ConfigException, OSError, ValueError) as exc:
            raise ClientConfigError(f"in-cluster configuration: {exc}") from None
        return cfg
    problem = missing_kubeconfig()  # the words `plan` and `fleet` use too, before any client import
    if problem is not None:
        raise ClientConfigError(problem)
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    default = default_kubeconfig()
    await _load_file(default, f"KUBECONFIG {env}" if env else f"kubeconfig {default}", cfg, context)
    return cfg


async def _load_file(path: Path, named: str, cfg: Any, context: str | None = None) -> None:
    if not path.is_file():
        raise ClientConfigError(f"{named}: no such file")
    _check_context(path, named, context)
    try:
        await kconfig.load_kube_config(config_file=str(path), context=context, client_configuration=cfg,
                                       persist_config=False)
    except (kconfig.ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError) as exc:
        cause = " ".join(str(exc).split()) or type(exc).__name__
        raise ClientConfigError(f"{named}: not a usable kubeconfig: {cause}") from None


def _check_context(path: Path, named: str, context: str | None) -> None:
    """A context the file does not have (given, or its current-context) is said with the ones it
    has: the file is fine, the name is not (issue 47). A file that does not parse is left to the
    loader, which says where."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    if not isinstance(doc, dict):
        return
    names, current = contexts_of(doc)
    wanted = context or current
    if not wanted:
        raise ClientConfigError(f"{named}: no current-context; pass --context with one of: {', '.join(names) or 'none'}")
    if wanted not in names:
        given = "--context" if context else "current-context"
        raise ClientConfigError(f"{named}: no context {wanted!r} ({given}); it has: {', '.join(names) or 'none'}")


async def make_api_client(
    kubeconfig: str | None, *, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST, context: str | None = None
) -> InstrumentedApiClient:
    """An `ApiClient` limited to `qps`/`burst` requests (`qps <= 0`: unlimited) and metered.

    Close it with `await api.close()` (or use it as an async context manager).
    """
    cfg = await load_configuration(kubeconfig, context)
    smaller_tls_read_buffers()
    limiter = TokenBucket(qps, burst) if qps > 0 else None
    api = InstrumentedApiClient(cfg, limiter)
    # Whether a proxy is used, not its URL: a proxy URL may carry credentials.
    log.debug("kubernetes client configured", host=cfg.host, qps=qps, burst=burst, proxied=bool(cfg.proxy))
    return api


def smaller_tls_read_buffers() -> None:
    """Every TLS connection opened from now on reads `TLS_READ_BUFFER` bytes at a time.

    asyncio has no parameter for it: this sets the class attribute its TLS protocol reads (CPython
    3.11 to 3.13), process-wide, and only when it is there and larger. Nothing else in the process
    depends on the larger buffer: it only bounds how much one `recv` takes.
    """
    protocol: Any = asyncio.sslproto.SSLProtocol
    size = getattr(protocol, "max_size", None)
    if isinstance(size, int) and size > TLS_READ_BUFFER:
        protocol.max_size = TLS_READ_BUFFER


def current_namespace(default: str = MCO_NAMESPACE) -> str:
    """The daemon's own namespace: `$POD_NAMESPACE`, the service account's, else `default`."""
    env = os.environ.get("POD_NAMESPACE")
    if env:
        return env
    try:
        text = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        return default
    return text or default


async def raise_for_status(resp: Any) -> None:
    """Raise `ApiException` for a non-2xx raw response.

    With `_preload_content=False` (watches, and reads that want the server's JSON as dicts)
    kubernetes_asyncio returns the aiohttp response without checking its status.
    """
    if 200 <= resp.status <= 299:
        return
    text = (await resp.read()).decode("utf-8", "replace")
    reason = resp.reason
    try:
        status = json.loads(text)
        reason = f"{status.get('reason') or resp.reason}: {status.get('message', '')}"
    except (ValueError, AttributeError):
        pass
    exc = ApiException(status=resp.status, reason=reason)
    exc.body = text
    exc.headers = resp.headers
    raise exc


async def read_json(resp: Any, loads: Callable[[bytes], Any] = json.loads) -> Any:
    """The JSON body of a raw response (`_preload_content=False`), after `raise_for_status`."""
    try:
        await raise_for_status(resp)
        return loads(await resp.read())
    finally:
        resp.release()


async def read_answer(request: Awaitable[Any], what: str) -> Any:
    """The JSON body of a raw response; a refusal raised as its typed `ApiError` naming `what`
    (`NotFound`, `Forbidden`, ...), as `retry.api_call` raises them, without the retries (a read
    whose caller says what a failure means). `ValueError` when the answer is not JSON."""
    try:
        return await read_json(await request)
    except ApiException as exc:
        raise ApiError.from_exception(what, exc) from None


def _discard(_body: bytes) -> None:
    return None


def object_path(group: str, version: str, namespace: str, plural: str, name: str) -> str:
    """The API path of one namespaced object (`group` "" for the core group), each part quoted as
    the generated client quotes path parameters."""
    prefix = f"/apis/{quote(group, safe='')}" if group else "/api"
    parts = (version, "namespaces", namespace, plural, name)
    return prefix + "".join("/" + quote(part, safe="") for part in parts)


async def write_and_discard(api: ApiClient, method: str, path: str, body: Any, content_type: str) -> None:
    """Send one write (`body` is JSON-encoded) whose answer nothing reads; raise `ApiException`
    for a non-2xx answer, as `send_and_discard` does.

    For the hot writes (every boot image patch): the generated methods spend about 0.1 ms of CPU
    per call (a fifth of a patch's) on work a known path and a plain JSON body do not need:
    sanitising the body and the headers, quoting path parameters, picking content types
    (issue 36). The request still goes through `api.request`, so the rate limit, the Lease fence
    and the request metrics see it as they see every other request, and the bearer token comes
    from the same place the generated methods take it (refreshed when the kubeconfig says so)."""
    await read_json(await _send(api, method, path, {"Content-Type": content_type}, body=body), _discard)


async def read_path(api: ApiClient, path: str, timeout: float | None = None) -> Any:
    """GET one API path and return its JSON as plain data; raise `ApiException` for a non-2xx
    answer. Through `api.request`, as `write_and_discard`, for reads no generated method fits
    (one discovery document) or whose models nobody needs."""
    return await read_json(await _send(api, "GET", path, {}, _request_timeout=timeout))


async def _send(api: ApiClient, method: str, path: str, headers: dict[str, str], **options: Any) -> Any:
    """`api.request` for an API path, with the JSON and bearer-token headers the generated methods
    send; the raw response (`_preload_content=False`)."""
    headers = {**api.default_headers, "Accept": "application/json", **headers}
    await api.update_params_for_auth(headers, [], [BEARER_TOKEN_AUTH])
    return await api.request(method, f"{api.configuration.host}{path}", headers=headers, _preload_content=False,
                             **options)


async def call_and_discard(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> None:
    """`method(*args, **kwargs)`, a generated API method, asked for its raw answer
    (`_preload_content=False`), which is dropped unparsed (`send_and_discard`). Handed to
    `retry.api_call` with `functools.partial`: each attempt sends the request anew."""
    await send_and_discard(method(*args, _preload_content=False, **kwargs))


async def send_and_discard(request: Awaitable[Any]) -> None:
    """Send a raw request (`_preload_content=False`), raise `ApiException` for a non-2xx answer,
    and drop the body unparsed. For writes whose answer nothing reads: decoding a MachineSet
    answer (and building kubernetes_asyncio's objects from it) costs CPU the API server shares.
    The body is still read to its end so that the connection goes back to the pool."""
    await read_json(await request, _discard)
