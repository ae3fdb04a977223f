"""Which `cluster.x-k8s.io` version the API server serves (v1beta2 or v1beta1)."""

from __future__ import annotations

from typing import Any

import structlog
from kubernetes_asyncio.client import ApisApi

from ..constants import CAPI_GROUP, CAPI_VERSIONS
from .api_errors import ApiError
from .retry import CONNECTION_ERRORS, api_call, describe

log = structlog.get_logger(__name__)


async def discover_capi_version(api: Any) -> str:
    """The newest version of ours the server serves; the oldest of ours when the group is absent
    (CAPI not installed: its informers then find no objects, which is not an error) or discovery
    fails (the informers then say why)."""
    try:
        # One attempt: an unreachable API server is reported by the daemon's own start-up check,
        # without waiting here for a retry budget first.
        groups = await api_call(lambda: ApisApi(api).get_api_versions(_request_timeout=10), what="get /apis", attempts=1)
    except ApiError as exc:
        # Info, not a warning: whatever stops discovery stops the reads that follow, which say so.
        log.info("API discovery failed; assuming cluster.x-k8s.io/" + CAPI_VERSIONS[-1], error=describe(exc))
        return CAPI_VERSIONS[-1]
    except CONNECTION_ERRORS as exc:
        log.info("API discovery failed; assuming cluster.x-k8s.io/" + CAPI_VERSIONS[-1], error=describe(exc))
        return CAPI_VERSIONS[-1]
    for group in groups.groups or []:
        if group.name == CAPI_GROUP:
            served = {v.version for v in group.versions or []}
            version = next((v for v in CAPI_VERSIONS if v in served), None)
            if version is None:
                log.warning("cluster.x-k8s.io serves no version this controller reads", served=sorted(served))
                return CAPI_VERSIONS[-1]
            log.info("Cluster API found", version=version)
            return version
    log.info("Cluster API not installed (no cluster.x-k8s.io group): nothing to do for it")
    return CAPI_VERSIONS[-1]
