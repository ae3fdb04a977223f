"""Read one cluster of a `fleet` run into rows, with the functions `plan` uses.

A must-gather tree is parsed and planned in a worker thread (it is CPU work, and the event loop
keeps the other clusters' reads going); a live cluster is read with the same reads as
`plan --from-cluster`, plus its HostedClusters and NodePools. Whatever goes wrong becomes the
cluster's row with its error: one broken cluster never stops the others.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Mapping
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from ..constants import (
    CLUSTER_DEPLOYMENT_KIND,
    HIVE_GROUP,
    HOSTED_CLUSTER_KIND,
    HYPERSHIFT_GROUP,
    MACHINE_POOL_KIND,
    NODE_POOL_KIND,
)
from ..core.cluster import platform_of
from ..core.fleet import ClusterFactsForFleet, ClusterRow, cluster_releases, cluster_row, failed_cluster
from ..core.hive import cluster_deployment_rows
from ..core.hypershift import PlatformImageCatalog, hosted_cluster_rows
from ..core.index import PublishedImageIndex
from ..core.skew.verdict import SkewLimits
from ..errors import BootImageControllerError
from ..plan.inputs import (
    GoldenSource,
    SourcedObject,
    classify,
    evaluate_plan_skew,
    load_paths,
    prepare,
    run_planner,
)
from .sources import ClusterSource

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FleetOptions:
    golden: GoldenSource | None  # --bootimages, loaded once: golden data for every cluster
    limits: SkewLimits
    catalog: PlatformImageCatalog
    index: PublishedImageIndex
    now: datetime
    golden_by_release: Mapping[str, GoldenSource] = field(default_factory=dict)  # --bootimages RELEASE=FILE


async def read_cluster(source: ClusterSource, options: FleetOptions, parsers: Executor | None = None) -> list[ClusterRow]:
    """The cluster's row (and its HostedClusters' rows); an unreadable cluster is one row with its
    error. Never raises but for cancellation. `parsers`: worker processes for must-gather trees
    (`tree_parsers`), else a thread."""
    if source.error is not None:
        return [failed_cluster(source.name, source.description, source.error)]
    if source.tree is not None and parsers is not None:
        return await asyncio.get_running_loop().run_in_executor(parsers, _tree_rows_in_worker, source)
    return await _guarded(source, options)


async def _guarded(source: ClusterSource, options: FleetOptions) -> list[ClusterRow]:
    try:
        if source.tree is not None:
            return await asyncio.to_thread(read_tree, source, options)
        objects = await _read_live(source)
        return await asyncio.to_thread(rows_from_objects, source, objects, options)
    except Exception as exc:
        return _failed(source, exc)


def _failed(source: ClusterSource, exc: Exception) -> list[ClusterRow]:
    """The cluster's one row when reading it failed: the project's error says why; anything else
    (a bug, an input nobody foresaw) is named by its type."""
    if isinstance(exc, BootImageControllerError):
        return [failed_cluster(source.name, source.description, str(exc))]
    log.debug("cluster read failed", cluster=source.name, exc_info=exc)
    return [failed_cluster(source.name, source.description, f"{type(exc).__name__}: {exc}")]


# Parsing and planning a tree is CPU work, and Python's GIL keeps threads to one core: with many
# trees and more than one core, worker processes parse them (forked, so the options and the imported
# package are there already; only the source goes over, only the rows come back).
PROCESSES_FROM = 32  # trees; below this, starting processes costs more than it saves
_WORKER_OPTIONS: FleetOptions | None = None  # set in each worker by `_start_worker`


def tree_parsers(trees: int, parallel: int, options: FleetOptions) -> Executor | None:
    """Worker processes for `trees` must-gather trees, or None (threads) when they would not help."""
    cores = os.cpu_count() or 1
    if trees < PROCESSES_FROM or cores < 2 or parallel < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return ProcessPoolExecutor(max_workers=min(cores, parallel), mp_context=multiprocessing.get_context("fork"),
                               initializer=_start_worker, initargs=(options,))


def _start_worker(options: FleetOptions) -> None:
    global _WORKER_OPTIONS
    _WORKER_OPTIONS = options


def _tree_rows_in_worker(source: ClusterSource) -> list[ClusterRow]:
    assert _WORKER_OPTIONS is not None, "a tree_parsers() worker"
    try:
        return read_tree(source, _WORKER_OPTIONS)
    except Exception as exc:  # converted here: the project's errors do not pickle
        return _failed(source, exc)


def read_tree(source: ClusterSource, options: FleetOptions) -> list[ClusterRow]:
    assert source.tree is not None
    return rows_from_objects(source, load_paths([source.tree]), options)


async def _read_live(source: ClusterSource) -> list[SourcedObject]:
    from ..plan.live import read_cluster_objects

    return await read_cluster_objects(str(source.kubeconfig), False, context=source.context, hypershift=True)


def rows_from_objects(source: ClusterSource, objects: list[SourcedObject], options: FleetOptions) -> list[ClusterRow]:
    hyper = [o for o in objects if o.api_group == HYPERSHIFT_GROUP]
    hive = [o for o in objects if o.api_group == HIVE_GROUP and o.kind in (CLUSTER_DEPLOYMENT_KIND, MACHINE_POOL_KIND)]
    inputs = classify(o for o in objects if o.api_group not in (HYPERSHIFT_GROUP, HIVE_GROUP))
    current, install = cluster_releases(inputs.cluster_version.obj if inputs.cluster_version else None)
    rows: list[ClusterRow] = []
    if inputs.machines or inputs.capi or not (hyper or hive):
        prepared = prepare(inputs, golden_source=options.golden_by_release.get(current or "") or options.golden)
        decisions = run_planner(prepared)
        skew = evaluate_plan_skew(prepared, decisions, options.limits)
        facts = ClusterFactsForFleet(prepared.context.facts.platform, current, install)
        rows.append(cluster_row(source.name, source.description, facts, decisions, skew.verdict, options.index,
                                options.now, prepared.forecast(decisions), skew.to_json()))
    else:
        # A HyperShift management cluster or a Hive hub with no MachineSets of its own: no pools.
        platform = platform_of(inputs.infrastructure.obj if inputs.infrastructure else None)
        rows.append(ClusterRow(name=source.name, source=source.description, platform=platform, release=current,
                               install_release=install))
    hosted = [o.obj for o in hyper if o.kind == HOSTED_CLUSTER_KIND]
    pools = [o.obj for o in hyper if o.kind == NODE_POOL_KIND]
    rows += hosted_cluster_rows(source.name, source.description, hosted, pools, options.catalog, options.index,
                                options.now)
    rows += cluster_deployment_rows(source.name, source.description,
                                    [o.obj for o in hive if o.kind == CLUSTER_DEPLOYMENT_KIND],
                                    [o.obj for o in hive if o.kind == MACHINE_POOL_KIND],
                                    options.catalog, options.index, options.now)
    return rows
