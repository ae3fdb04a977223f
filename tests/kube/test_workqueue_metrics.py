"""The work queue's metrics (controller-runtime's names) and the reconcile error counter (issue 17)."""

from __future__ import annotations

import asyncio

from bootimage_controller import observability as obs
from bootimage_controller.kube.workqueue import WorkQueue


def sample(metric: str, **labels: str) -> float:
    value = obs.REGISTRY.get_sample_value(metric, labels)
    return 0.0 if value is None else value


async def test_adds_waits_work_retries_depth_and_unfinished_work_are_reported() -> None:
    metrics = obs.QueueMetrics("test-queue")
    queue = WorkQueue("test-queue", metrics=metrics)
    metrics.watch(lambda: len(queue), queue.unfinished_seconds)
    adds = sample("workqueue_adds_total", name="test-queue")
    queue.add("a")
    queue.add("a")  # de-duplicated: not another add
    queue.add("b")
    assert sample("workqueue_adds_total", name="test-queue") == adds + 2
    assert sample("workqueue_depth", name="test-queue") == 2

    key = await queue.get()
    assert key == "a" and sample("workqueue_depth", name="test-queue") == 1
    assert sample("workqueue_queue_duration_seconds_count", name="test-queue") >= 1
    await asyncio.sleep(0.05)
    total, longest = queue.unfinished_seconds()
    assert total >= 0.05 and longest >= 0.05
    assert sample("workqueue_longest_running_processor_seconds", name="test-queue") >= 0.05

    retries = sample("workqueue_retries_total", name="test-queue")
    queue.done("a")
    queue.add_rate_limited("a")
    assert sample("workqueue_retries_total", name="test-queue") == retries + 1
    assert sample("workqueue_work_duration_seconds_count", name="test-queue") >= 1
    assert queue.unfinished_seconds() == (0.0, 0.0)
    queue.shutdown()


def test_the_scrape_carries_the_workqueue_and_error_series() -> None:
    from prometheus_client import generate_latest

    obs.QueueMetrics("scraped").watch(lambda: 3, lambda: (1.5, 1.0))
    obs.RECONCILE_ERRORS.labels(reason="Forbidden").inc()
    text = generate_latest(obs.REGISTRY).decode()
    assert 'workqueue_depth{name="scraped"} 3.0' in text
    assert 'workqueue_unfinished_work_seconds{name="scraped"} 1.5' in text
    assert 'bootimage_controller_reconcile_errors_total{reason="Forbidden"}' in text
