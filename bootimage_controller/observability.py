"""Logs, metrics and the health/metrics HTTP endpoints (SPEC section 6).

- `configure_logging`: structlog for our code and stdlib logging (aiohttp, kubernetes_asyncio)
  rendered by the same processors, JSON in a cluster or a pipe, colours on a terminal, secret
  values masked.
- Every metric is defined once here, on the module-level `REGISTRY`; other modules import the
  objects (`PATCHES.labels(result=...).inc()`), never create their own.
- `HealthServer`: `/healthz`, `/readyz`, `/metrics` on `--health-addr` / `--metrics-addr`.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)
from prometheus_client.core import GaugeMetricFamily

from .constants import (
    METRIC_API_REQUESTS,
    METRIC_BOOT_IMAGE_VERIFIED,
    METRIC_CLUSTER_BOOT_IMAGE,
    METRIC_DEPRECATED,
    METRIC_DISAGREEMENTS,
    METRIC_EVENTS_PENDING,
    METRIC_FIRST_BOOT_FAILURES,
    METRIC_LEADER,
    METRIC_MACHINESETS,
    METRIC_OVA_DOWNLOAD_BYTES,
    METRIC_OVA_DOWNLOADS,
    METRIC_PATCHES,
    METRIC_POOL_BOOT_IMAGE,
    METRIC_POOL_BOOT_IMAGE_AGE,
    METRIC_POOL_RELEASES_BEHIND,
    METRIC_RECONCILE_DURATION,
    METRIC_RECONCILE_ERRORS,
    METRIC_SKEW_NONE,
    METRIC_SKEW_UPGRADEABLE,
    METRIC_TEMPLATE_IMPORT_DURATION,
    METRIC_TEMPLATE_IMPORTS,
    METRIC_TEMPLATES,
    METRIC_WRITER_CONFLICTS,
)

log = structlog.get_logger(__name__)

# "sentences": the one-shot commands' default (SPEC section 6): `warning: <what>: <event>` lines.
LogFormat = Literal["json", "console", "sentences"]

# --- redaction ---------------------------------------------------------------------------------

REDACTED = "[REDACTED]"
# Normalised (lower case, '-' -> '_') key names whose values are never logged.
_SENSITIVE_KEYS = frozenset(
    {
        "token",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "aws_secret_access_key",
        "secret_access_key",
        "aws_session_token",
        "authorization",
        "proxy_authorization",
        "api_key",
        "apikey",
        "private_key",
        "bearer",
        "cookie",
        "credentials",
        "user_data",
        "userdata",
    }
)
# Suffixes catch variants such as `bearer_token`, `access_token`, `db_password`, `client_secret`.
# Deliberately not `*_secret_name`: the *name* of a Secret is useful in a log line.
_SENSITIVE_SUFFIXES = (
    "token",
    "password",
    "passwd",
    "client_secret",
    "secret_key",
    "access_key",
    "private_key",
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")


@functools.lru_cache(maxsize=4096)  # log keys are a small, fixed set; a line has about ten
def is_sensitive_key(key: str) -> bool:
    k = key.lower().replace("-", "_")
    # `aws_access_key_id` is an identifier, not a secret; `..._secret_access_key` is caught above.
    if k.endswith("access_key_id"):
        return False
    return k in _SENSITIVE_KEYS or k.endswith(_SENSITIVE_SUFFIXES)


_SCALARS = (bool, int, float, type(None))


def _redact_value(value: Any, depth: int = 0) -> Any:
    # Most values of a log line are short strings and scalars: answer those before the ABC checks.
    kind = value.__class__
    if kind is str:
        return _redact_text(value)
    if kind in _SCALARS or depth > 8:
        return value
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and is_sensitive_key(k) else _redact_value(v, depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(_redact_value(v, depth + 1) for v in value)
    if isinstance(value, str):  # str subclasses: enums
        return _redact_text(value)
    return value


def _redact_text(text: str) -> str:
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text) if _BEARER.search(text) else text


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: mask values of secret-looking keys, at any depth, and bearer tokens."""
    for key in list(event_dict):
        if key == "event":
            event_dict[key] = _redact_value(event_dict[key])
        elif is_sensitive_key(key):
            event_dict[key] = REDACTED
        else:
            event_dict[key] = _redact_value(event_dict[key])
    return event_dict


# --- logging -----------------------------------------------------------------------------------


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def choose_format(fmt: str | None, stream: Any = None) -> LogFormat:
    """JSON unless asked for console, or unasked on a terminal outside a cluster."""
    if fmt in ("json", "console", "sentences"):
        return fmt  # type: ignore[return-value]
    if fmt is not None:
        raise ValueError(f"unknown log format {fmt!r} (expected json or console)")
    stream = stream if stream is not None else sys.stderr
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return "console" if tty and not _in_cluster() else "json"


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record is emitted, as logging's last-resort handler
    does: a stream replaced after configuration (a test's capture, a redirect) is never written to
    closed."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(fmt: str | None = None, level: str | int = "INFO", stream: Any = None) -> LogFormat:
    """Route structlog and stdlib logging through one renderer on `stream` (stderr by default).

    Returns the format chosen. Safe to call again (tests, `--log-format` parsed late).
    """
    chosen = choose_format(fmt, stream)
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        redact_secrets,
    ]
    renderer: Any
    if chosen == "json":
        renderer = structlog.processors.JSONRenderer()
        final: list[Any] = [structlog.processors.format_exc_info, renderer]
    elif chosen == "sentences":
        final = [structlog.processors.format_exc_info, render_sentence]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=True)
        final = [renderer]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: configure_logging may run again and must take effect for existing loggers.
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream) if stream is not None else _CurrentStderr()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *final],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(numeric)
    # kubernetes_asyncio's REST client logs whole response bodies at DEBUG, Secret data included.
    logging.getLogger("kubernetes_asyncio.client.rest").setLevel(max(numeric, logging.INFO))
    return chosen


# Keys a sentence leads with ("warning: ConfigMap coreos-bootimages: not allowed to read").
_SUBJECT_KEYS = ("object", "cluster", "machineset", "file", "path")
_NOT_SHOWN = frozenset({"timestamp", "logger", "logger_name", "level", "event", "exc_info", "exception", "stack"})


_NOTED: set[Any] = set()


def log_input_notes(notes: Iterable[Any]) -> None:
    """Log, once per process, each value the pure core passed over (`core.model.InputNote`): status
    is recomputed every few seconds from every MachineSet, and one odd value is worth one line."""
    out = structlog.get_logger("bootimage_controller.skew")
    for note in notes:
        if note in _NOTED:
            continue
        if len(_NOTED) < 10_000:
            _NOTED.add(note)
        out.warning(note.event, **dict(note.fields))


def render_sentence(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> str:
    """One plain line for a person at a terminal: `warning: <subject>: <event> (key value, ...)`.

    The one-shot commands print their results on stdout; what they log is a side note, so it reads
    as a sentence, without timestamps or logger names (`-v` or `--log-format json` for those).
    """
    level = str(event.get("level", "info"))
    subject = next((str(event[k]) for k in _SUBJECT_KEYS if event.get(k) not in (None, "")), None)
    rest = {k: v for k, v in event.items() if k not in _NOT_SHOWN and str(event.get(k)) != subject}
    text = f"{level}: " + (f"{subject}: " if subject else "") + str(event.get("event", ""))
    if rest:
        text += " (" + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in rest.items()) + ")"
    if event.get("exception"):
        text += f": {str(event['exception']).strip().splitlines()[-1]}"
    return text


# --- metrics -------------------------------------------------------------------------------------

REGISTRY = CollectorRegistry(auto_describe=True)
# process_* (CPU, memory, open fds), python_info and python_gc_*: what every exporter serves, and
# what an SRE looks at first when the daemon is slow or restarts.
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    REGISTRY.register(_collector)

MACHINESETS = Gauge(
    METRIC_MACHINESETS,
    "Machine resources by kind (MachineSet, ControlPlaneMachineSet, MachineSet.cluster.x-k8s.io, "
    "MachineDeployment.cluster.x-k8s.io) and the action and reason of their latest boot image decision.",
    ["kind", "action", "reason"],
    registry=REGISTRY,
)
PATCHES = Counter(
    METRIC_PATCHES,
    "Boot image patches attempted, by result.",
    ["result"],
    registry=REGISTRY,
)
RECONCILE_DURATION = Histogram(
    METRIC_RECONCILE_DURATION,
    "Time taken by one reconcile.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
    registry=REGISTRY,
)
API_REQUESTS = Counter(
    METRIC_API_REQUESTS,
    "Kubernetes API requests, by verb, resource and HTTP status code ('error' when no response).",
    ["verb", "resource", "code"],
    registry=REGISTRY,
)
SKEW_UPGRADEABLE = Gauge(
    METRIC_SKEW_UPGRADEABLE,
    "1 when boot image skew allows cluster upgrades, 0 when it holds them.",
    registry=REGISTRY,
)
DISAGREEMENTS = Gauge(
    METRIC_DISAGREEMENTS,
    "1 for each MachineSet the Machine Config Operator manages that stays on another boot image than this "
    "controller's target after the MCO's pass (Event BootImageDisagreement).",
    ["namespace", "name"],
    registry=REGISTRY,
)
DEPRECATED = Gauge(
    METRIC_DEPRECATED,
    "1 for each MachineSet whose current boot image the cloud says is deprecated (AWS DeprecationTime past, "
    "GCP deprecated.state); Event BootImageDeprecated.",
    ["namespace", "name", "kind"],
    registry=REGISTRY,
)
BOOT_IMAGE_VERIFIED = Gauge(
    METRIC_BOOT_IMAGE_VERIFIED,
    "Whether a node booted from the MachineSet's boot image joined: 1 verified, 0 unverified, -1 failed "
    "(SPEC section 3b; Events BootImageVerified, BootImageFirstBootFailed).",
    ["namespace", "name", "kind"],
    registry=REGISTRY,
)
FIRST_BOOT_FAILURES = Counter(
    METRIC_FIRST_BOOT_FAILURES,
    "Boot images found failing their first boot (a Machine refused for its image, or an instance without a "
    "Node past --first-boot-timeout), per MachineSet.",
    ["namespace", "name", "kind"],
    registry=REGISTRY,
)
WRITER_CONFLICTS = Gauge(
    METRIC_WRITER_CONFLICTS,
    "1 for each MachineSet two writers change: the Machine Config Operator and GitOps or Hive (Event "
    "BootImageWriterConflict).",
    ["namespace", "name"],
    registry=REGISTRY,
)
SKEW_ENFORCEMENT_NONE = Gauge(
    METRIC_SKEW_NONE,
    "1 when boot image skew enforcement is disabled (mode None).",
    registry=REGISTRY,
)
EVENTS_PENDING = Gauge(
    METRIC_EVENTS_PENDING,
    "Events queued behind the MachineSet work they report, not written yet.",
    registry=REGISTRY,
)
LEADER = Gauge(
    METRIC_LEADER,
    "1 while this replica holds the Lease (and so is the one reconciling and reporting), else 0.",
    registry=REGISTRY,
)
OVA_DOWNLOADS = Counter(
    METRIC_OVA_DOWNLOADS,
    "vSphere OVA fetches, by result (downloaded, cached, checksum_mismatch, failed).",
    ["result"],
    registry=REGISTRY,
)
OVA_DOWNLOAD_BYTES = Counter(
    METRIC_OVA_DOWNLOAD_BYTES,
    "Bytes of vSphere OVAs downloaded (resumed downloads count only what was fetched).",
    registry=REGISTRY,
)
TEMPLATE_IMPORTS = Counter(
    METRIC_TEMPLATE_IMPORTS,
    "vSphere template imports (OVF import into vCenter), by result (imported, failed).",
    ["result"],
    registry=REGISTRY,
)
TEMPLATE_IMPORT_DURATION = Histogram(
    METRIC_TEMPLATE_IMPORT_DURATION,
    "Time taken by one vSphere template import, upload included.",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600),
    registry=REGISTRY,
)
TEMPLATES = Gauge(
    METRIC_TEMPLATES,
    "vSphere templates the MachineSets name, by whether they hold the golden release (current true/false).",
    ["current"],
    registry=REGISTRY,
)
CLUSTER_BOOT_IMAGE = Info(
    METRIC_CLUSTER_BOOT_IMAGE,
    "The cluster boot image that skew enforcement judged, and which rule found it.",
    registry=REGISTRY,
)


RECONCILE_ERRORS = Counter(
    METRIC_RECONCILE_ERRORS,
    "Reconciles that failed and are retried with backoff, by reason (an API reason such as Forbidden "
    "or Conflict, or a decision reason such as PatchFailed).",
    ["reason"],
    registry=REGISTRY,
)

# The work queue, with controller-runtime's names (and its `name` label), so the dashboards and
# alerts written for every other controller work here too.
_QUEUE_BUCKETS = (1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
WORKQUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name"], registry=REGISTRY)
WORKQUEUE_ADDS = Counter("workqueue_adds", "Total number of adds handled by workqueue", ["name"], registry=REGISTRY)
WORKQUEUE_RETRIES = Counter("workqueue_retries", "Total number of retries handled by workqueue", ["name"], registry=REGISTRY)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested",
    ["name"], buckets=_QUEUE_BUCKETS, registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes",
    ["name"], buckets=_QUEUE_BUCKETS, registry=REGISTRY,
)
WORKQUEUE_UNFINISHED = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. "
    "Large values indicate stuck threads.",
    ["name"], registry=REGISTRY,
)
WORKQUEUE_LONGEST = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name"], registry=REGISTRY,
)


class QueueMetrics:
    """`kube.workqueue.QueueMetrics` on the metrics above, for the queue called `name`."""

    def __init__(self, name: str) -> None:
        self._adds = WORKQUEUE_ADDS.labels(name=name)
        self._retries = WORKQUEUE_RETRIES.labels(name=name)
        self._waits = WORKQUEUE_QUEUE_DURATION.labels(name=name)
        self._works = WORKQUEUE_WORK_DURATION.labels(name=name)
        self.name = name

    def watch(self, depth: Callable[[], int], unfinished: Callable[[], tuple[float, float]]) -> None:
        """Read the depth and the work in progress at scrape time (no bookkeeping on every add)."""
        WORKQUEUE_DEPTH.labels(name=self.name).set_function(lambda: float(depth()))
        WORKQUEUE_UNFINISHED.labels(name=self.name).set_function(lambda: unfinished()[0])
        WORKQUEUE_LONGEST.labels(name=self.name).set_function(lambda: unfinished()[1])

    def added(self) -> None:
        self._adds.inc()

    def retried(self) -> None:
        self._retries.inc()

    def waited(self, seconds: float) -> None:
        self._waits.observe(seconds)

    def worked(self, seconds: float) -> None:
        self._works.observe(seconds)


def set_cluster_boot_image(release: str, source: str) -> None:
    CLUSTER_BOOT_IMAGE.info({"release": release, "source": source})


POOL_LABELS = ("namespace", "name", "kind")
POOL_INFO_LABELS = (*POOL_LABELS, "stream", "arch", "release", "target_release", "manager")


@dataclass(frozen=True)
class PoolBootImage:
    """One pool's series: labels, and the values (None: the series is left out)."""

    namespace: str
    name: str
    kind: str
    stream: str
    arch: str
    release: str
    target_release: str
    manager: str
    age_seconds: float | None
    releases_behind: int | None


class PoolCollector:
    """The per-pool series, built when /metrics is scraped from the latest outcomes the reporter
    hands in: kept as labelled gauges, 5,000 pools would hold 15,000 children in memory (measured:
    +13 MiB at N = 5,000), and a pool's old series would have to be removed by hand when it moves."""

    def __init__(self) -> None:
        self._pools: Callable[[], Iterable[PoolBootImage]] = tuple

    def show(self, pools: Callable[[], Iterable[PoolBootImage]]) -> None:
        self._pools = pools

    def describe(self) -> list[GaugeMetricFamily]:
        return [self._info(()), self._age(()), self._behind(())]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        # One family at a time, none kept by this frame: /metrics writes each before the next is
        # built (daemon/exposition.py), so a scrape holds one family's 5,000 samples, not 15,000.
        pools = tuple(self._pools())
        yield self._info(pools)
        yield self._age(pools)
        yield self._behind(pools)

    @staticmethod
    def _info(pools: Iterable[PoolBootImage]) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            f"{METRIC_POOL_BOOT_IMAGE}_info",
            "Per pool (MachineSet, ControlPlaneMachineSet, Cluster API pool): the RHCOS build its boot "
            "image is (release) and the golden one (target_release), its stream, architecture and "
            "manager. Always 1.",
            labels=POOL_INFO_LABELS,
        )
        for p in pools:
            family.add_metric([p.namespace, p.name, p.kind, p.stream, p.arch, p.release, p.target_release, p.manager], 1)
        return family

    @staticmethod
    def _age(pools: Iterable[PoolBootImage]) -> GaugeMetricFamily:
        return _per_pool(
            METRIC_POOL_BOOT_IMAGE_AGE,
            "Per pool: seconds since its boot image's RHCOS build was made (absent when the build is unknown).",
            pools, lambda p: p.age_seconds,
        )

    @staticmethod
    def _behind(pools: Iterable[PoolBootImage]) -> GaugeMetricFamily:
        return _per_pool(
            METRIC_POOL_RELEASES_BEHIND,
            "Per pool: OpenShift minor releases between the release that shipped its boot image and the "
            "one that shipped the golden image (4.16 against 4.22: 6; absent when either is unknown).",
            pools, lambda p: p.releases_behind,
        )


def _per_pool(name: str, documentation: str, pools: Iterable[PoolBootImage],
              value: Callable[[PoolBootImage], float | None]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=POOL_LABELS)
    for p in pools:
        if (v := value(p)) is not None:
            family.add_metric([p.namespace, p.name, p.kind], v)
    return family


POOLS = PoolCollector()
REGISTRY.register(POOLS)
