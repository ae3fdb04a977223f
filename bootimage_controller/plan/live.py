"""`plan --from-cluster`: the objects `plan` uses, read once from a live cluster.

The reads are the rows of `cluster.CLUSTER_READS`, the table the daemon's informers are built
from, so `plan` on a live cluster sees what the daemon sees. Missing objects (404) are left out.
Objects the user may not read (403) are left out with one warning naming every refused right, the
user and the role that grants them, unless the refusal leaves nothing to plan (the MachineSets or
the golden ConfigMap refused, or nothing readable at all): then it is the error. A cluster where
every read answers 404 or an empty list is said to be that, not an empty file. Anything else is a
`ClusterReadError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from ..constants import (
    BOOTIMAGES_CONFIGMAP,
    CAPI_VERSIONS,
    CLUSTER_DEPLOYMENT_KIND,
    HIVE_GROUP,
    HIVE_VERSION,
    HOSTED_CLUSTER_KIND,
    HYPERSHIFT_GROUP,
    HYPERSHIFT_VERSION,
    MACHINE_API_GROUP,
    MACHINE_POOL_KIND,
    MACHINESET_KIND,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
    NODE_POOL_KIND,
    VSPHERE_CREDENTIALS_SECRET,
)
from ..core.cluster import CLUSTER_READS, ClusterRead, with_capi_version
from ..kube.forbidden import Refusal, refused_sentence
from ..kube.kubeconfig import target_of
from .inputs import CLOUD_SECRET_NAMES, ClusterReadError, SourcedObject

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class _Read:
    """One read `plan --from-cluster` makes, and the kind/apiVersion to stamp on list items."""

    what: str
    api_version: str
    kind: str
    call: Any = field(repr=False)
    is_list: bool = False
    essential: bool = False  # refused: nothing to plan (the MachineSets, the golden ConfigMap)


@dataclass(frozen=True)
class _ReadResult:
    objects: list[SourcedObject]
    refused: Refusal | str | None = None  # a 403: parsed, or what was read when the message is unusual


def fetch_cluster_objects(
    kubeconfig: str | None, *, with_secrets: bool = False, vsphere_secret: tuple[str, str] | None = None,
    context: str | None = None, timeout: float | None = None,
) -> list[SourcedObject]:
    """The objects `plan` uses, read once from a live cluster. Missing objects are fine.

    `with_secrets` (for `--cloud-verify`) also gets the cloud credentials Secrets, by name only,
    and the vCenter credentials Secret `vsphere_secret` (namespace, name). `context`: the kubeconfig's
    context; `timeout`: seconds for the whole read. An error names the kubeconfig, the context and
    the server (SPEC section 4).
    """
    return asyncio.run(_read_within(kubeconfig, with_secrets, vsphere_secret, context, timeout))


async def _read_within(kubeconfig: str | None, with_secrets: bool, vsphere_secret: tuple[str, str] | None,
                       context: str | None, timeout: float | None) -> list[SourcedObject]:
    # Where it went wrong is worked out only when it did: a read that succeeds opens no file twice.
    try:
        return await asyncio.wait_for(
            read_cluster_objects(kubeconfig, with_secrets, vsphere_secret, context=context), timeout)
    except TimeoutError:
        raise ClusterReadError(f"{target_of(kubeconfig, context)}: no answer within {timeout:g} s (--timeout)") from None
    except ClusterReadError as exc:
        text = str(exc)  # a read that failed gets where; a kubeconfig that cannot be used says so itself
        raise ClusterReadError(f"{target_of(kubeconfig, context)}: {text}" if text.startswith("reading ") else text) from None


async def read_cluster_objects(
    kubeconfig: str | None, with_secrets: bool, vsphere_secret: tuple[str, str] | None = None,
    *, context: str | None = None, hypershift: bool = False, command: str = "plan",
) -> list[SourcedObject]:
    """`fetch_cluster_objects` in a running event loop; `context` picks a kubeconfig context, and
    `hypershift` adds the HostedClusters and NodePools (`fleet`). `command` chooses the role a 403
    names."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.config import ConfigException

    from ..kube.client import ClientConfigError, make_api_client
    from ..kube.core_api import CoreApi

    try:
        api = await make_api_client(kubeconfig, context=context)
    except ClientConfigError as exc:
        raise ClusterReadError(str(exc)) from None
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        raise ClusterReadError(f"cannot load the Kubernetes configuration {kubeconfig or ''}: {exc}") from None
    async with api:
        core = CoreApi(api)
        from ..kube.capi_discovery import discover_capi_version

        custom = client.CustomObjectsApi(api)
        reads = _cluster_reads(custom, core, await discover_capi_version(api))
        if hypershift:
            # `fleet`: a HyperShift management cluster's HostedClusters and NodePools, a Hive hub's
            # ClusterDeployments and MachinePools (404: none).
            reads += [
                _Read(f"{kind}s", f"{group}/{version}", kind,
                      lambda group=group, version=version, plural=plural: custom.list_cluster_custom_object(
                          group, version, plural, _preload_content=False),
                      is_list=True)
                for group, version, kind, plural in (
                    (HYPERSHIFT_GROUP, HYPERSHIFT_VERSION, HOSTED_CLUSTER_KIND, "hostedclusters"),
                    (HYPERSHIFT_GROUP, HYPERSHIFT_VERSION, NODE_POOL_KIND, "nodepools"),
                    (HIVE_GROUP, HIVE_VERSION, CLUSTER_DEPLOYMENT_KIND, "clusterdeployments"),
                    (HIVE_GROUP, HIVE_VERSION, MACHINE_POOL_KIND, "machinepools"),
                )
            ]
        if with_secrets:
            reads += [
                _Read(f"Secret {name}", "v1", "Secret",
                      lambda name=name: core.read_namespaced_secret(name, MAPI_NAMESPACE, _preload_content=False))
                for name in CLOUD_SECRET_NAMES.values()
            ]
            namespace, name = vsphere_secret or (MAPI_NAMESPACE, VSPHERE_CREDENTIALS_SECRET)
            reads.append(_Read(f"Secret {namespace}/{name}", "v1", "Secret",
                               lambda: core.read_namespaced_secret(name, namespace, _preload_content=False)))
        # Every read finishes before the client closes; the first failure is then reported.
        results = await asyncio.gather(*(_run_read(r) for r in reads), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    done = [(read, r) for read, r in zip(reads, results, strict=True) if isinstance(r, _ReadResult)]
    return _objects_or_cause(done, command)


def _objects_or_cause(done: list[tuple[_Read, _ReadResult]], command: str) -> list[SourcedObject]:
    objects = [obj for _, result in done for obj in result.objects]
    refused = [(read, result.refused) for read, result in done if result.refused is not None]
    if refused:
        sentence = refused_sentence([r for _, r in refused if isinstance(r, Refusal)], command,
                                    unparsed=[f"read {r}" for _, r in refused if isinstance(r, str)])
        if not objects or any(read.essential for read, _ in refused):
            raise ClusterReadError(f"reading the cluster: not allowed: {sentence}")
        log.warning(f"not allowed to read everything; planning without it: {sentence}")
    elif not objects:
        raise ClusterReadError(
            "reading the cluster: it has none of the objects plan reads (no MachineSets, no ConfigMap "
            f"{MCO_NAMESPACE}/{BOOTIMAGES_CONFIGMAP}, no Infrastructure: every read answered 404 Not Found or an "
            "empty list): not an OpenShift cluster, or not the one meant?")
    return objects


def _cluster_reads(co: Any, core: Any, capi_version: str = CAPI_VERSIONS[-1]) -> list[_Read]:
    """One read per row of `cluster.CLUSTER_READS`, the table the daemon's informers come from.

    Raw responses (`_preload_content=False`): the objects exactly as the API server sent them,
    unknown fields included, with no typed model to reject or rename anything.
    """
    reads = with_capi_version(CLUSTER_READS, capi_version)
    return [_Read(_what(r), r.api_version, r.kind, _read_call(co, core, r), is_list=True,
                  essential=(r.role, r.group) in _ESSENTIAL) for r in reads]


# Reads without which there is nothing to plan: refused, they are the error, not a warning.
_ESSENTIAL = frozenset({(MACHINESET_KIND, MACHINE_API_GROUP), ("bootimages", "")})


def _what(read: ClusterRead) -> str:
    if read.label_selector:
        return f"{read.kind}s {read.label_selector}"
    return f"{read.kind} {read.name}" if read.name else f"{read.kind}s"


def _read_call(co: Any, core: Any, read: ClusterRead) -> Any:
    """Every read is a list, a named object's with `metadata.name=<name>` as the daemon's informers
    make it: the same verbs, so whoever may run the daemon may plan (its ClusterRole grants `list`
    on ClusterOperators and FeatureGates, `get` only on its own)."""
    raw: dict[str, Any] = {"_preload_content": False}
    if read.name is not None:
        raw["field_selector"] = f"metadata.name={read.name}"
    if read.kind == "ConfigMap":
        return lambda: core.list_namespaced_config_map(read.namespace, **raw)
    if read.kind == "Node":
        return lambda: core.list_node(label_selector=read.label_selector, **raw)
    if read.namespace is None:
        return lambda: co.list_cluster_custom_object(read.group, read.version, read.plural, **raw)
    return lambda: co.list_namespaced_custom_object(read.group, read.version, read.namespace, read.plural, **raw)


async def _run_read(read: _Read) -> _ReadResult:
    import aiohttp

    from ..kube.api_errors import ApiError, Forbidden, NotFound, Unauthorized
    from ..kube.client import read_answer

    try:
        value = await read_answer(read.call(), read.what)
    except NotFound:
        log.info("not found in the cluster", object=read.what)
        return _ReadResult([])
    except Unauthorized as exc:  # the credentials, not a permission: the error, not a missing read
        raise ClusterReadError(f"reading {read.what}: HTTP {exc.describe()}") from None
    except Forbidden as exc:
        log.info("not allowed to read", object=read.what)
        return _ReadResult([], Refusal.from_message(exc.message) or read.what)
    except ApiError as exc:
        raise ClusterReadError(f"reading {read.what}: HTTP {exc.describe()}") from None
    except (OSError, TimeoutError, aiohttp.ClientError) as exc:
        raise ClusterReadError(f"reading {read.what}: {exc or type(exc).__name__}") from None
    except ValueError:
        raise ClusterReadError(f"reading {read.what}: the API server's answer is not JSON") from None
    if not isinstance(value, Mapping):  # a proxy's page, or anything but the API's object or list
        raise ClusterReadError(f"reading {read.what}: the API server's answer is not a JSON object")
    items = (value.get("items") or []) if read.is_list else [value]
    source = f"cluster {read.what}"
    # The API omits kind/apiVersion on the items of typed lists.
    return _ReadResult([
        SourcedObject({**item, "apiVersion": item.get("apiVersion") or read.api_version,
                       "kind": item.get("kind") or read.kind}, source)
        for item in items
        if isinstance(item, Mapping)
    ])
