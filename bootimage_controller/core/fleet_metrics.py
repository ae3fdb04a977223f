"""Fleet rows from an aggregating Prometheus (SPEC section 4, `fleet --prometheus`). Pure.

Each daemon exports, per pool, `bootimage_controller_machineset_boot_image_info` (stream, arch,
release, target_release, manager), `..._age_seconds` and `bootimage_controller_boot_image_verified`; per cluster `bootimage_controller_skew_upgradeable`,
`bootimage_controller_skew_enforcement_none` and `bootimage_controller_cluster_boot_image_info`. An
aggregator (Thanos Querier, ACM Observability) adds a `cluster` label. The rows carry what those
series carry and nothing else: no decision (`action`, `reason` stay null: the metrics do not say
them per pool), no platform or release. Every cluster the aggregator knows is a row: a target that
is down (`up == 0`) or whose series went stale is a row with that error.

`fleet/prometheus.py` makes the queries and hands the samples in as `Sample`s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .fleet import ClusterRow, PoolRow
from .index import PublishedImageIndex
from .skew.record import ReleaseKind, release_kind
from .verification import Verdict, verdict_of_value

SECONDS_PER_DAY = 86400


@dataclass(frozen=True)
class Sample:
    """One series of an instant query: its labels and value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class FleetSamples:
    """The answers to the queries of `fleet/prometheus.py`, one list per query."""

    pools: Sequence[Sample]  # max by (cluster, namespace, name, kind, stream, arch, release, target_release, manager) (info)
    ages: Sequence[Sample]  # max by (cluster, namespace, name, kind) (age_seconds)
    upgradeable: Sequence[Sample]  # min by (cluster) (skew_upgradeable)
    enforcement_none: Sequence[Sample]  # max by (cluster) (skew_enforcement_none)
    cluster_images: Sequence[Sample]  # max by (cluster, release, source) (cluster_boot_image_info)
    up: Sequence[Sample]  # max by (cluster) (up{job=...})
    seen: Sequence[Sample]  # max by (cluster) (last_over_time(skew_upgradeable[lookback])): known lately
    verified: Sequence[Sample] = ()  # min by (cluster, namespace, name, kind) (boot_image_verified)


def fleet_rows(samples: FleetSamples, source: str, index: PublishedImageIndex,
               cluster_label: str = "cluster") -> list[ClusterRow]:
    """One row per cluster any query names, in name order (the caller sorts worst first). `index`
    names the OpenShift release that shipped each build, as the direct read does."""
    by_cluster: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for field_name in FleetSamples.__dataclass_fields__:
        for s in getattr(samples, field_name):
            name = s.labels.get(cluster_label)
            if name:
                by_cluster[name][field_name].append(s)
    return [_row(name, found, source, index) for name, found in sorted(by_cluster.items())]


def _row(name: str, found: Mapping[str, list[Sample]], source: str, index: PublishedImageIndex) -> ClusterRow:
    up = [s.value for s in found.get("up", [])]
    if up and max(up) == 0:
        return ClusterRow(name=name, source=source, error="its bootimage-controller target is down (up == 0)")
    if not found.get("upgradeable"):
        return ClusterRow(name=name, source=source, error=_stale_reason(found))
    ages = {_pool_key(s): s.value for s in found.get("ages", [])}
    verdicts = {_pool_key(s): verdict_of_value(s.value) for s in found.get("verified", [])}
    pools = tuple(sorted((_pool(s, ages.get(_pool_key(s)), verdicts.get(_pool_key(s)), index)
                          for s in found.get("pools", [])),
                         key=lambda p: (p.namespace, p.name, p.kind)))
    upgradeable = min(s.value for s in found["upgradeable"]) == 1
    none = any(s.value == 1 for s in found.get("enforcement_none", []))
    return ClusterRow(name=name, source=source, skew=_skew(upgradeable, none, found.get("cluster_images", [])),
                      pools=pools)


def _stale_reason(found: Mapping[str, list[Sample]]) -> str:
    if found.get("seen"):
        return ("its metrics went stale: no bootimage_controller_skew_upgradeable sample within Prometheus's "
                "lookback (the daemon stopped reporting, or its target is gone)")
    return "no bootimage_controller metrics from this cluster (only its target's up series)"


def _pool_key(s: Sample) -> tuple[str, str, str]:
    return (s.labels.get("namespace", ""), s.labels.get("name", ""), s.labels.get("kind", ""))


def _pool(s: Sample, age_seconds: float | None, verdict: Verdict | None, index: PublishedImageIndex) -> PoolRow:
    namespace, name, kind = _pool_key(s)
    current, target = s.labels.get("release") or None, s.labels.get("target_release") or None
    return PoolRow(
        namespace=namespace, name=name, kind=kind,
        stream=s.labels.get("stream") or None,
        architecture=s.labels.get("arch") or None,
        manager=s.labels.get("manager") or None,
        current_release=current,
        target_release=target,
        boot_image_age_days=int(age_seconds // SECONDS_PER_DAY) if age_seconds is not None else None,
        action=None, reason=None,
        current_openshift=index.openshift_release(current) if current else None,
        target_openshift=index.openshift_release(target) if target else None,
        verified=_verified(verdict),
    )


def _verified(verdict: Verdict | None) -> dict[str, Any]:
    """`verified` as plan writes it, with what the metric carries: the verdict alone (a pool it does
    not cover, e.g. a ControlPlaneMachineSet, is `unverified`, as plan says it)."""
    return {"verdict": str(verdict or Verdict.UNVERIFIED), "image": None, "machine": None, "node": None,
            "at": None, "reason": "from the bootimage_controller_boot_image_verified metric" if verdict else ""}


def _skew(upgradeable: bool, none: bool, images: Iterable[Sample]) -> dict[str, object]:
    """The row's `skew`, with what the metrics say (`mode` only when it is None; no reason or message)."""
    image = next(iter(images), None)
    return {
        "mode": "None" if none else None,
        "clusterBootImage": _cluster_image(image.labels) if image is not None else None,
        "limit": None,
        "upgradeable": upgradeable,
        "reason": None,
        "message": None,
    }


def _cluster_image(labels: Mapping[str, str]) -> dict[str, str | None]:
    """`clusterBootImage` as `BootImageRelease.to_json` writes it, from the metric's labels (whose
    source is kept as the label says, known or not)."""
    release = labels.get("release") or None
    kind = release_kind(release) if release else None
    return {"rhcosVersion": release if kind is ReleaseKind.RHCOS else None,
            "ocpVersion": release if kind is ReleaseKind.OCP else None,
            "source": labels.get("source") or None}
