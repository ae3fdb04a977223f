"""Which `cluster.x-k8s.io` version the API server serves (v1beta2 or v1beta1)."""

from __future__ import annotations

from typing import Any

import structlog

from ..constants import CAPI_GROUP, CAPI_VERSIONS
from .api_errors import ApiError, NotFound
from .client import read_path
from .retry import CONNECTION_ERRORS, api_call, describe

log = structlog.get_logger(__name__)

# A refusal, no answer, or not JSON (a proxy's error page): the fallback version.
DISCOVERY_FAILURES: tuple[type[BaseException], ...] = (ApiError, *CONNECTION_ERRORS, ValueError)


async def discover_capi_version(api: Any) -> str:
    """The newest version of ours the server serves; the oldest of ours when the group is absent
    (CAPI not installed: its informers then find no objects, which is not an error) or discovery
    fails (the informers then say why).

    It reads the group's own discovery document (`/apis/cluster.x-k8s.io`, 404 when the group is
    not served), not the list of every group: an OpenShift cluster serves a hundred groups, and
    decoding that list into the client's models was 3 ms of CPU on the way to the first patch even
    on a test server with twenty (issue 36)."""
    try:
        # One attempt: an unreachable API server is reported by the daemon's own start-up check,
        # without waiting here for a retry budget first.
        group = await api_call(lambda: read_path(api, f"/apis/{CAPI_GROUP}", timeout=10), what=f"get /apis/{CAPI_GROUP}",
                               attempts=1)
    except NotFound:
        log.info("Cluster API not installed (no cluster.x-k8s.io group): nothing to do for it")
        return CAPI_VERSIONS[-1]
    except DISCOVERY_FAILURES as exc:
        # Info, not a warning: whatever stops discovery stops the reads that follow, which say so.
        log.info("API discovery failed; assuming cluster.x-k8s.io/" + CAPI_VERSIONS[-1], error=describe(exc))
        return CAPI_VERSIONS[-1]
    versions = group.get("versions") if isinstance(group, dict) else None
    served = {v.get("version") for v in versions or [] if isinstance(v, dict)}
    version = next((v for v in CAPI_VERSIONS if v in served), None)
    if version is None:
        log.warning("cluster.x-k8s.io serves no version this controller reads", served=sorted(map(str, served)))
        return CAPI_VERSIONS[-1]
    log.info("Cluster API found", version=version)
    return version
