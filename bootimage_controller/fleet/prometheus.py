"""`fleet --prometheus URL`: the fleet from an aggregating Prometheus API (Thanos Querier, ACM
Observability) instead of each cluster (SPEC section 4).

Eight instant queries over `/api/v1/query`, each aggregated by the cluster label so two daemon
replicas (or two scrapes of one) count once and the answer stays one series per pool: at 10,000
clusters of 6 pools the largest answer is 60,000 series (docs/benchmarks.md). The rows are built by
`core/fleet_metrics.py`. An answer that is not a Prometheus success is an error naming the URL and
the query; nothing is guessed.
"""

from __future__ import annotations

import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from ..constants import (
    METRIC_BOOT_IMAGE_VERIFIED,
    METRIC_CLUSTER_BOOT_IMAGE,
    METRIC_POOL_BOOT_IMAGE,
    METRIC_POOL_BOOT_IMAGE_AGE,
    METRIC_SKEW_NONE,
    METRIC_SKEW_UPGRADEABLE,
)
from ..core.fleet import ClusterRow
from ..core.fleet_metrics import FleetSamples, Sample, fleet_rows
from ..core.index import PublishedImageIndex
from ..errors import InputError

# The Service the install creates: its ServiceMonitor's targets carry job="<service name>".
DEFAULT_JOB = "bootimage-controller-metrics"
# A cluster seen within this window but not now: its series went stale (a row with that error).
SEEN_WITHIN = "1d"


@dataclass(frozen=True)
class PrometheusSource:
    url: str
    bearer_token_file: Path | None = None
    ca_file: Path | None = None
    job: str = DEFAULT_JOB
    cluster_label: str = "cluster"
    timeout: float = 60.0

    def queries(self) -> dict[str, str]:
        by = self.cluster_label
        pool = f"{by}, namespace, name, kind"
        return {
            "pools": f"max by ({pool}, stream, arch, release, target_release, manager) ({METRIC_POOL_BOOT_IMAGE}_info)",
            "ages": f"max by ({pool}) ({METRIC_POOL_BOOT_IMAGE_AGE})",
            "upgradeable": f"min by ({by}) ({METRIC_SKEW_UPGRADEABLE})",
            "enforcement_none": f"max by ({by}) ({METRIC_SKEW_NONE})",
            "cluster_images": f"max by ({by}, release, source) ({METRIC_CLUSTER_BOOT_IMAGE}_info)",
            "up": f'max by ({by}) (up{{job="{self.job}"}})',
            "seen": f"max by ({by}) (last_over_time({METRIC_SKEW_UPGRADEABLE}[{SEEN_WITHIN}]))",
            # min: a replica that saw the failure (-1) wins over one that has not judged yet (0).
            "verified": f"min by ({pool}) ({METRIC_BOOT_IMAGE_VERIFIED})",
        }


async def read_prometheus(source: PrometheusSource, index: PublishedImageIndex) -> list[ClusterRow]:
    """Every cluster the aggregator knows, one row each. Raises `InputError` when Prometheus cannot
    be asked (unreachable, refused, not a Prometheus API): then there is no fleet to show."""
    headers = {"Accept": "application/json"}
    if source.bearer_token_file is not None:
        headers["Authorization"] = f"Bearer {_token(source.bearer_token_file)}"
    context = ssl.create_default_context(cafile=str(source.ca_file)) if source.ca_file else None
    timeout = aiohttp.ClientTimeout(total=source.timeout)
    answers: dict[str, list[Sample]] = {}
    async with aiohttp.ClientSession(headers=headers, timeout=timeout,
                                     connector=aiohttp.TCPConnector(ssl=context) if context else None) as http:
        for name, query in source.queries().items():
            answers[name] = await _query(http, source.url, query)
    return fleet_rows(FleetSamples(**answers), f"prometheus {source.url}", index, source.cluster_label)


def _token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(str(path), None, f"--bearer-token-file: cannot read it: {exc.strerror or exc}") from None


async def _query(http: aiohttp.ClientSession, url: str, query: str) -> list[Sample]:
    endpoint = url.rstrip("/") + "/api/v1/query"
    try:
        async with http.get(endpoint, params={"query": query}) as response:
            text = await response.text()
            status = response.status
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise InputError(url, None, f"--prometheus: cannot reach it: {exc or type(exc).__name__}") from None
    body = _json(text)
    if status != 200 or body.get("status") != "success":
        said = body.get("error") or text[:200].strip() or "no body"
        raise InputError(url, None, f"--prometheus: HTTP {status} for {query!r}: {said}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise InputError(url, None, f"--prometheus: {query!r} answered {data.get('resultType')!r}, not a vector")
    return [_sample(item) for item in data.get("result") or [] if isinstance(item, dict)]


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _sample(item: dict[str, Any]) -> Sample:
    labels = item.get("metric") if isinstance(item.get("metric"), dict) else {}
    value = item.get("value")
    try:
        number = float(value[1]) if isinstance(value, list) and len(value) == 2 else float("nan")
    except (TypeError, ValueError):
        number = float("nan")
    return Sample({str(k): str(v) for k, v in (labels or {}).items()}, number)
