"""/metrics is streamed family by family with prometheus-client's own encoders (issue 36)."""

from __future__ import annotations

import gzip
import weakref
from collections.abc import Iterator

import aiohttp
import pytest
from harness.fake_http import serving
from prometheus_client import CollectorRegistry, Counter, Histogram, Info
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from bootimage_controller.daemon.exposition import SLICE, metrics_handler, render

OPENMETRICS_ACCEPT = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"
POOLS = 2 * SLICE + 17  # three slices, the last one short


class Pools:
    """A per-pool gauge family larger than a slice, as the daemon's at 5,000 pools, and a small one."""

    def collect(self) -> Iterator[Metric]:
        big = GaugeMetricFamily("pool_info", "Per pool.", labels=["name", "stream"])
        for i in range(POOLS):
            big.add_metric([f"pool-{i:05d}", "rhel-9" if i % 2 else "rhel-10"], 1)
        yield big
        yield GaugeMetricFamily("pool_age_seconds", "Age.", value=3.5, unit="seconds")


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(Pools())
    Counter("patches", "Patches.", ["kind"], registry=reg).labels("MachineSet").inc(3)  # with _created
    Histogram("reconcile_seconds", "Reconcile.", registry=reg).observe(0.2)
    Info("build", "Build.", registry=reg).info({"version": "1.0"})
    return reg


@pytest.mark.parametrize(
    ("accept", "library"),
    [("", generate_latest), ("text/plain;version=0.0.4", generate_latest), (OPENMETRICS_ACCEPT, generate_openmetrics)],
)
def test_the_streamed_body_is_the_librarys_own_bytes(accept: str, library: object) -> None:
    reg = registry()
    content_type, pieces = render(reg.collect(), accept)
    body = list(pieces)
    assert b"".join(body) == library(reg)  # type: ignore[operator]
    assert len(body) > 4 + 2, "the large family was written in slices"
    assert content_type.startswith("application/openmetrics-text" if accept == OPENMETRICS_ACCEPT else "text/plain")


def test_a_family_is_released_before_the_next_is_built() -> None:
    seen: list[weakref.ref[Metric]] = []
    alive_when_next_built: list[bool] = []

    def families() -> Iterator[Metric]:
        for name in ("first", "second", "third"):
            if seen:
                alive_when_next_built.append(seen[-1]() is not None)
            family = GaugeMetricFamily(name, "x", labels=["i"])
            for i in range(SLICE + 1):
                family.add_metric([str(i)], i)
            seen.append(weakref.ref(family))
            yield family
            del family

    _content_type, pieces = render(families(), "")
    assert b"third" in b"".join(pieces)
    assert alive_when_next_built == [False, False]


async def test_the_endpoint_negotiates_filters_and_compresses() -> None:
    reg = registry()
    async with serving(metrics_handler(reg)) as base, aiohttp.ClientSession(auto_decompress=False) as session:
        url = f"{base}/metrics"
        async with session.get(url, headers={"Accept-Encoding": "gzip"}) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert gzip.decompress(await resp.read()) == generate_latest(reg)
        async with session.get(url, headers={"Accept": OPENMETRICS_ACCEPT, "Accept-Encoding": "identity"}) as resp:
            assert resp.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
            assert (await resp.read()).endswith(b"# EOF\n")
        async with session.get(
            url, params=[("name[]", "patches_total"), ("name[]", "build_info")], headers={"Accept-Encoding": "identity"}
        ) as resp:
            text = (await resp.read()).decode()
    assert "patches_total{kind=\"MachineSet\"} 3.0" in text and "build_info{version=\"1.0\"}" in text
    assert "pool_info" not in text
