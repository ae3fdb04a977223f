"""What `bootimage-controller plan` reads: files, folders, must-gather trees (a live cluster: plan_cluster).

Everything is loaded as plain JSON values and classified by apiVersion group and kind, so a
must-gather tree, a folder of `oc get -o yaml` dumps, a `kind: List` and a hand-written file all
work the same way. Nothing here decides anything: `PlanInputs` is handed to `prepare`, which turns
it into the planner's arguments (golden data, cluster facts, enrollment) and says where each fact
came from.

Errors name the file (and line for syntax errors), the object and the field, as `InputError`.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog
import yaml

from ..constants import (
    AWS_CREDENTIALS_SECRET,
    AZURE_CREDENTIALS_SECRET,
    BOOTIMAGES_CONFIGMAP,
    CAPI_GROUP,
    CLUSTERVERSION_NAME,
    CONFIG_GROUP,
    CPMS_KIND,
    FEATUREGATE_NAME,
    GCP_CREDENTIALS_SECRET,
    INFRA_TEMPLATES,
    INFRASTRUCTURE_GROUP,
    INFRASTRUCTURE_NAME,
    MACHINE_API_GROUP,
    MACHINECONFIGURATION_KIND,
    MACHINECONFIGURATION_NAME,
    MACHINESET_KIND,
    MAPI_NAMESPACE,
    MCO_CLUSTER_OPERATOR,
    MCO_NAMESPACE,
    OPERATOR_GROUP,
    VSPHERE_CREDENTIALS_SECRET,
    Action,
    Platform,
    Reason,
)
from ..core.cloud.facts import CloudFacts
from ..core.cluster import ClusterObjects
from ..core.context import PlanningContext, planning_context
from ..core.forecast import Forecast, UpgradeGate, When, Writer
from ..core.golden import GoldenBootImages
from ..core.model import BootImageDecision, get_path
from ..core.patching import apply_changes
from ..core.planner import plan_all
from ..core.skew.assess import PassResult, SkewAssessment, assess_skew
from ..core.skew.verdict import SkewLimits, SkewVerdict
from ..data import bundled_index
from ..errors import BootImageControllerError, InputError
from ..observability import log_input_notes

log = structlog.get_logger(__name__)

YAML_SUFFIXES = frozenset({".yaml", ".yml"})
JSON_SUFFIXES = frozenset({".json"})


class ClusterReadError(BootImageControllerError):
    """`plan --from-cluster` could not read the cluster (no configuration, unreachable, refused)."""


# ---- YAML that reads like Kubernetes reads it ------------------------------------------------


class _KubeYamlLoader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML loader that keeps timestamps as strings.

    The API server converts YAML to JSON, where `2024-05-29T15:27:00Z` is a string. PyYAML would
    make it a `datetime`, which changes the value written by `--write-patched` and is not JSON.
    """


class _PyKubeYamlLoader(yaml.SafeLoader):
    """The same in pure Python, for documents that might nest deeper than libyaml's C stack allows:
    here too deep a document is a RecursionError, which we report, not a crash."""


def _unique_keys(loader: Any, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    """A mapping whose keys are unique, as kubectl and the API server require. PyYAML keeps the last
    value of a repeated key: two manifests concatenated without a `---` line then merge silently
    into one object (issue 27). A repeated key is an error naming its line."""
    seen: dict[Any, int] = {}
    for key_node, _value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.setdefault(key, key_node.start_mark.line)
        except TypeError:
            continue  # an unhashable (complex) key: the base constructor reports it
        if first != key_node.start_mark.line:
            raise yaml.constructor.ConstructorError(
                None, None,
                f"key {key!r} repeats the one at line {first + 1}: were two documents joined without a "
                "'---' line between them?",
                key_node.start_mark,
            )
    mapping: dict[Any, Any] = yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep)
    return mapping


_KubeYamlLoader.construct_mapping = _unique_keys
_PyKubeYamlLoader.construct_mapping = _unique_keys  # type: ignore[method-assign,assignment]

_NO_TIMESTAMPS = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_KubeYamlLoader.yaml_implicit_resolvers = _NO_TIMESTAMPS
_PyKubeYamlLoader.yaml_implicit_resolvers = _NO_TIMESTAMPS


# ---- loaded objects --------------------------------------------------------------------------


@dataclass(frozen=True)
class SourcedObject:
    """One Kubernetes object and where it was read (file, document, list item, or the cluster)."""

    obj: Mapping[str, Any]
    source: str

    @property
    def api_group(self) -> str:
        api_version = str(self.obj.get("apiVersion") or "")
        return api_version.rpartition("/")[0] if "/" in api_version else ""

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind") or "")

    @property
    def namespace(self) -> str:
        return str(get_path(self.obj, ("metadata", "namespace")) or "")

    @property
    def name(self) -> str:
        return str(get_path(self.obj, ("metadata", "name")) or "")

    @property
    def identity(self) -> tuple[str, str, str, str]:
        # Nameless (broken) objects never count as duplicates of each other: each gets its row.
        return (self.api_group, self.kind, self.namespace, self.name or f"<unnamed in {self.source}>")

    @property
    def display(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    @property
    def where(self) -> str:
        """`file: Kind ns/name`, the prefix of every message about this object."""
        return f"{self.source}: {self.display}"


def load_paths(paths: Sequence[str | os.PathLike[str]]) -> list[SourcedObject]:
    """Every Kubernetes object in `paths` (files, or folders searched recursively), in order.

    `plan` plans one cluster: paths that hold two must-gather trees are refused, naming both
    (`fleet` reads many clusters)."""
    out: list[SourcedObject] = []
    refuse_two_must_gathers(paths)
    for raw in paths:
        if str(raw) == STDIN:
            out.extend(expand_lists(parse_documents(_read_stdin(), "<stdin>")))
            continue
        path = Path(raw)
        if path.is_dir():
            out.extend(_load_tree(path))
        elif path.exists():
            out.extend(load_file(path))
        else:
            raise InputError(str(path), None, "no such file or directory")
    return out


STDIN = "-"  # `plan -`: `oc get machinesets -o yaml | bootimage-controller plan -` (with --bootimages)


# A must-gather tree (`oc adm must-gather`, `oc adm inspect`) has this folder at its root.
MUST_GATHER_MARKER = "cluster-scoped-resources"


def must_gather_roots(path: Path) -> list[Path]:
    """The must-gather trees in a folder (the folder itself, or folders below it), sorted."""
    roots = [Path(d) for d, dirs, _ in os.walk(path) if MUST_GATHER_MARKER in dirs]
    return sorted(roots)


def refuse_two_must_gathers(paths: Sequence[str | os.PathLike[str]]) -> None:
    roots = [root for raw in paths if str(raw) != STDIN and Path(raw).is_dir() for root in must_gather_roots(Path(raw))]
    distinct = sorted({r.resolve(): r for r in roots}.values())
    if len(distinct) > 1:
        more = f" (and {len(distinct) - 2} more)" if len(distinct) > 2 else ""
        raise InputError(f"{distinct[0]} and {distinct[1]}{more}", None,
                         "two must-gather trees, so two clusters: plan reads one cluster at a time "
                         "(give one tree, or use `bootimage-controller fleet` for many)")


def _read_stdin() -> str:
    return _text(sys.stdin.buffer.read(MAX_INPUT_BYTES + 1), "<stdin>", oversized=False)


def _load_tree(root: Path) -> Iterator[SourcedObject]:
    # Sorted, so the result (and "the later duplicate wins") does not depend on the file system;
    # symlinked folders are not followed (a must-gather may link back to itself).
    real_root = root.resolve()
    files = [Path(d) / f for d, _dirs, names in os.walk(root) for f in names]
    for path in sorted(files):
        if path.suffix.lower() not in YAML_SUFFIXES | JSON_SUFFIXES:
            log.debug("ignoring file that is not YAML or JSON", file=str(path))
            continue
        try:
            _inside(path, real_root)
            yield from load_file(path)
        except UnreadableFile as exc:
            # A tree may hold anything; one odd entry must not stop the plan. Said on stderr.
            log.warning("skipped a file plan will not read", file=str(path), why=exc.problem)


class UnreadableFile(InputError):
    """A path that is not something `plan` reads: a special file, one too large, a symlink out of
    the tree. Named on the command line it is an error; found in a tree it is skipped and said."""


def _inside(path: Path, real_root: Path) -> None:
    """A symlink in a tree is followed only when it resolves inside the tree (a must-gather's own
    links): not to /dev/zero, /etc or another tree."""
    if not path.is_symlink():
        return
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise UnreadableFile(str(path), None, "a symlink to nothing (or to itself)") from None
    if not target.is_relative_to(real_root):
        raise UnreadableFile(str(path), None, f"a symlink out of the tree (to {target})")


def load_file(path: Path) -> list[SourcedObject]:
    return list(expand_lists(parse_documents(_read(path), str(path), path.suffix.lower())))


# One input file at most; a 5,000-MachineSet `oc get machinesets -o yaml` is about 40 MB.
MAX_INPUT_BYTES = 128 * 1024 * 1024


def _read(path: Path) -> str:
    """A regular file's text, never more than MAX_INPUT_BYTES; never blocks on a FIFO or reads a device."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(str(path), None, exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(str(path), None, "not a regular file (a FIFO, device or socket): not read")
        # The size first (no 128 MiB read to learn it), then a bounded read (it may be growing).
        data = f.read(MAX_INPUT_BYTES + 1) if info.st_size <= MAX_INPUT_BYTES else b""
    return _text(data, str(path), oversized=info.st_size > MAX_INPUT_BYTES)


def _text(data: bytes, source: str, *, oversized: bool) -> str:
    """What was read (at most MAX_INPUT_BYTES + 1 bytes) as text, or why not."""
    if oversized or len(data) > MAX_INPUT_BYTES:
        raise UnreadableFile(source, None, f"larger than {MAX_INPUT_BYTES // 2**20} MiB: not read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(source, None, f"not a UTF-8 text file (byte {exc.start})") from None


def parse_documents(text: str, source: str, suffix: str = "") -> list[tuple[str, Any]]:
    """(source, value) per document; JSON for `.json` (or text that starts like JSON), else YAML."""
    looks_json = suffix in JSON_SUFFIXES or (suffix not in YAML_SUFFIXES and text.lstrip()[:1] in ("{", "["))
    if looks_json:
        return [(source, _parse_json(text, source))]
    docs = [doc for doc in _parse_yaml(text, source) if doc is not None]
    if len(docs) == 1:
        return [(source, docs[0])]
    return [(f"{source} (document {i + 1})", doc) for i, doc in enumerate(docs)]


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, None, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(source, None, "JSON nested too deeply") from None


# Kubernetes objects nest a few dozen levels; libyaml recurses on the C stack and crashes the whole
# process (SIGSEGV) somewhere past 30,000 levels, before Python could raise RecursionError. Text
# whose brackets might nest that deep (brackets inside strings count too) takes the Python loader.
MAX_YAML_FLOW_DEPTH = 1000


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """Whether `[`/`{` nesting goes past `limit` (a cheap over-estimate: quotes are not parsed)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth = max(0, depth - 1)
    return False


def _parse_yaml(text: str, source: str) -> list[Any]:
    loader = _PyKubeYamlLoader if _flow_depth_exceeds(text, MAX_YAML_FLOW_DEPTH) else _KubeYamlLoader
    try:
        return list(yaml.load_all(text, Loader=loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "syntax error"
        raise InputError(source, None, f"invalid YAML{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(source, None, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InputError(source, None, "YAML nested too deeply") from None


def expand_lists(docs: Iterable[tuple[str, Any]]) -> Iterator[SourcedObject]:
    """Kubernetes objects among documents; `kind: List` and every `*List` contribute their items."""
    for source, doc in docs:
        if not isinstance(doc, Mapping) or not doc.get("kind") or not doc.get("apiVersion"):
            log.debug("ignoring a document that is not a Kubernetes object", source=source)
            continue
        kind = str(doc["kind"])
        items = doc.get("items")
        if kind.endswith("List") and isinstance(items, list):
            yield from _list_items(doc, kind, items, source)
        else:
            yield SourcedObject(doc, source)


def _list_items(doc: Mapping[str, Any], kind: str, items: list[Any], source: str) -> Iterator[SourcedObject]:
    # Items of a typed list (`ConfigMapList` from the API) carry no kind/apiVersion of their own.
    item_kind = kind[: -len("List")]
    for i, item in enumerate(items):
        where = f"{source} items[{i}]"
        if not isinstance(item, Mapping):
            log.debug("ignoring a list item that is not an object", source=where)
            continue
        if item_kind and not item.get("kind"):
            item = {"apiVersion": doc.get("apiVersion"), "kind": item_kind, **item}
        yield from expand_lists([(where, item)])


# ---- classification --------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanInputs:
    """The objects `plan` uses, by role. Later duplicates (same group, kind, namespace, name) win."""

    machines: tuple[SourcedObject, ...] = ()  # MachineSets and the ControlPlaneMachineSet
    bootimages: SourcedObject | None = None
    machine_configuration: SourcedObject | None = None
    infrastructure: SourcedObject | None = None
    cluster_version: SourcedObject | None = None
    mco_operator: SourcedObject | None = None  # ClusterOperator machine-config
    feature_gate: SourcedObject | None = None  # FeatureGate cluster
    nodes: tuple[SourcedObject, ...] = ()
    secrets: Mapping[str, SourcedObject] = field(default_factory=dict)  # platform -> its credentials Secret
    ignored: int = 0
    capi: tuple[SourcedObject, ...] = ()
    kinds: tuple[str, ...] = ()  # every kind found in the input, sorted (for messages)  # Cluster API MachineSets and MachineDeployments
    templates: Mapping[tuple[str, str, str], SourcedObject] = field(default_factory=dict)  # (kind, ns, name)


def classify(objects: Iterable[SourcedObject]) -> PlanInputs:
    unique: dict[tuple[str, str, str, str], SourcedObject] = {}
    for obj in objects:
        earlier = unique.get(obj.identity)
        if earlier is not None and earlier.obj != obj.obj:
            refuse_two_clusters(earlier, obj)
            log.info("object given twice; the later one wins", object=obj.display, used=obj.source,
                     ignored=earlier.source)
        unique[obj.identity] = obj
    machines: list[SourcedObject] = []
    nodes: list[SourcedObject] = []
    singles: dict[str, SourcedObject] = {}
    secrets: dict[str, SourcedObject] = {}
    capi: list[SourcedObject] = []
    templates: dict[tuple[str, str, str], SourcedObject] = {}
    ignored = 0
    for obj in unique.values():
        role = _role(obj)
        if role == "machine":
            machines.append(obj)
        elif role == "capi":
            capi.append(obj)
        elif role == "template":
            templates[(obj.kind, obj.namespace, obj.name)] = obj
        elif role == "node":
            nodes.append(obj)
        elif role is not None and role.startswith("secret:"):
            secrets[role.removeprefix("secret:")] = obj
        elif role is not None:
            singles[role] = obj
        else:
            ignored += 1
            near = near_miss_kind(obj.kind)
            if near is not None:
                log.warning(f"{_line_of(obj)}: kind {obj.kind!r} is not a kind plan reads; did you mean {near}? "
                            "The object is ignored")
            else:
                log.debug("ignoring an object plan does not use", object=obj.display, source=obj.source)
    return PlanInputs(
        machines=tuple(sorted(machines, key=lambda o: (o.namespace, o.name, o.kind))),
        bootimages=singles.get("bootimages"),
        machine_configuration=singles.get("machineconfiguration"),
        infrastructure=singles.get("infrastructure"),
        cluster_version=singles.get("clusterversion"),
        mco_operator=singles.get("mco_operator"),
        feature_gate=singles.get("feature_gate"),
        nodes=tuple(sorted(nodes, key=lambda o: o.name)),
        secrets=secrets,
        ignored=ignored,
        kinds=tuple(sorted({o.kind for o in unique.values()})),
        capi=tuple(sorted(capi, key=lambda o: (o.kind, o.namespace, o.name))),
        templates=templates,
    )


# What tells one cluster from another: Infrastructure's infrastructure name, ClusterVersion's cluster id.
_CLUSTER_IDENTITY = {
    (CONFIG_GROUP, "Infrastructure", INFRASTRUCTURE_NAME): ("status", "infrastructureName"),
    (CONFIG_GROUP, "ClusterVersion", CLUSTERVERSION_NAME): ("spec", "clusterID"),
}


def refuse_two_clusters(earlier: SourcedObject, later: SourcedObject) -> None:
    """Two Infrastructure `cluster` or ClusterVersion `version` objects of different clusters (not
    an edited copy of one: that is `plan tree/ my-edit.yaml`, and the later one wins)."""
    path = _CLUSTER_IDENTITY.get((later.api_group, later.kind, later.name))
    if path is None:
        return
    ids = [get_path(o.obj, path) or get_path(o.obj, ("metadata", "uid")) for o in (earlier, later)]
    if all(isinstance(i, str) and i for i in ids) and ids[0] != ids[1]:
        raise InputError(f"{earlier.source} and {later.source}", None,
                         f"two {later.kind} objects of two clusters ({ids[0]} and {ids[1]}): plan reads one cluster "
                         "at a time (use `bootimage-controller fleet` for many)")


# Kinds plan reads: one an edit or two away is most likely a typo, and worth a warning.
_KNOWN_KINDS = (
    MACHINESET_KIND, CPMS_KIND, "ConfigMap", MACHINECONFIGURATION_KIND, "Infrastructure", "ClusterVersion",
    "ClusterOperator", "FeatureGate", "Node", "Secret", "MachineDeployment", *INFRA_TEMPLATES,
)


def near_miss_kind(kind: str) -> str | None:
    """The known kind `kind` is one or two edits from (case ignored), or None. Short kinds allow one
    edit only: `Role` and `Pod` are real kinds two edits from `Node`."""
    if not kind or kind in _KNOWN_KINDS or kind.endswith("List"):
        return None
    for known in _KNOWN_KINDS:
        limit = 2 if len(known) >= 8 else 1
        if _edit_distance(kind.lower(), known.lower(), limit) <= limit:
            return known
    return None


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, or `limit + 1` as soon as it is known to exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def _line_of(obj: SourcedObject) -> str:
    """`file:line` of the object's `kind:` where the file can be read, else its source."""
    path = obj.source.split(" (document ")[0].split(" items[")[0]
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return obj.source
    for number, line in enumerate(lines, 1):
        key, _, value = line.strip().strip(",").partition(":")
        if key.strip().strip('"') == "kind" and value.strip().strip('"') == obj.kind:
            return f"{path}:{number}"
    return obj.source


def _role(obj: SourcedObject) -> str | None:
    group, kind, namespace, name = obj.api_group, obj.kind, obj.namespace, obj.name
    if group == MACHINE_API_GROUP and kind in (MACHINESET_KIND, CPMS_KIND):
        return "machine"
    if group == "" and kind == "Node":
        return "node"
    if group == CAPI_GROUP and kind in ("MachineSet", "MachineDeployment"):
        return "capi"
    if group == INFRASTRUCTURE_GROUP and kind in INFRA_TEMPLATES:
        return "template"
    if group == "" and kind == "Secret" and namespace == MAPI_NAMESPACE:
        if name == VSPHERE_CREDENTIALS_SECRET:
            return f"secret:{Platform.VSPHERE}"
        platform = next((p for p, n in CLOUD_SECRET_NAMES.items() if n == name), None)
        return f"secret:{platform}" if platform else None
    if group == "" and kind == "ConfigMap" and name == BOOTIMAGES_CONFIGMAP and namespace in ("", MCO_NAMESPACE):
        return "bootimages"
    named = {
        (OPERATOR_GROUP, MACHINECONFIGURATION_KIND, MACHINECONFIGURATION_NAME): "machineconfiguration",
        (CONFIG_GROUP, "Infrastructure", INFRASTRUCTURE_NAME): "infrastructure",
        (CONFIG_GROUP, "ClusterVersion", CLUSTERVERSION_NAME): "clusterversion",
        (CONFIG_GROUP, "ClusterOperator", MCO_CLUSTER_OPERATOR): "mco_operator",
        (CONFIG_GROUP, "FeatureGate", FEATUREGATE_NAME): "feature_gate",
    }
    return named.get((group, kind, name))


# ---- golden data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoldenSource:
    golden: GoldenBootImages
    description: str  # for the table footer: which file/object gave the golden data


def golden_from(inputs: PlanInputs, bootimages_file: str | None) -> GoldenSource:
    """`--bootimages FILE` wins over a ConfigMap among the inputs; neither is bad input."""
    if bootimages_file:
        return load_bootimages_file(Path(bootimages_file))
    if inputs.bootimages is not None:
        cm = inputs.bootimages
        golden = GoldenBootImages.from_configmap(cm.obj, source=f"{cm.source}: ConfigMap {MCO_NAMESPACE}/{BOOTIMAGES_CONFIGMAP}")
        return GoldenSource(golden, f"ConfigMap {BOOTIMAGES_CONFIGMAP} ({cm.source})")
    if not inputs.kinds:
        # The real cause first (issue 27): an empty file, an empty folder or nothing on stdin.
        raise InputError("plan", None, "no Kubernetes objects in the input: nothing to plan (an empty file, folder "
                                       "or standard input?)")
    if not inputs.machines and not inputs.capi:
        raise InputError("plan", None, f"the input had no MachineSet, only {', '.join(inputs.kinds)}; plan reads "
                                       f"MachineSets and the ConfigMap {MCO_NAMESPACE}/{BOOTIMAGES_CONFIGMAP} (or "
                                       "--bootimages FILE)")
    raise InputError(
        "plan",
        None,
        f"no ConfigMap {MCO_NAMESPACE}/{BOOTIMAGES_CONFIGMAP} among the inputs; add it to the paths "
        "or pass --bootimages FILE (that ConfigMap, or a stream metadata JSON)",
    )


def load_bootimages_file(path: Path) -> GoldenSource:
    """A `coreos-bootimages` ConfigMap (YAML/JSON, possibly in a List) or a bare stream JSON."""
    docs = parse_documents(_read(path), str(path), path.suffix.lower())
    for source, doc in docs:
        if isinstance(doc, Mapping) and "architectures" in doc and "kind" not in doc:
            # Round trip through JSON: the document may have come from YAML.
            golden = GoldenBootImages.from_stream_json(json.dumps(doc), source=source)
            return GoldenSource(golden, f"stream metadata {source}")
    configmaps = [o for o in expand_lists(docs) if o.kind == "ConfigMap" and o.api_group == ""]
    named = [o for o in configmaps if o.name == BOOTIMAGES_CONFIGMAP]
    chosen = named[-1] if named else (configmaps[0] if len(configmaps) == 1 else None)
    if chosen is None:
        raise InputError(
            str(path), None,
            f"--bootimages: found neither a ConfigMap {BOOTIMAGES_CONFIGMAP} nor a stream metadata "
            "document (a JSON object with `architectures`)",
        )
    golden = GoldenBootImages.from_configmap(chosen.obj, source=chosen.where)
    return GoldenSource(golden, f"ConfigMap {chosen.name} ({chosen.source})")


# ---- the planner's context ---------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedPlan:
    """The planner's context (the daemon's, built by the same function) and the inputs it came from."""

    inputs: PlanInputs
    context: PlanningContext

    def objects_by_key(self) -> dict[tuple[str, str, str], Mapping[str, Any]]:
        """Every planned object by (decision kind, namespace, name): CAPI kinds as `Kind.group`."""
        out = {(m.kind, m.namespace, m.name): m.obj for m in self.inputs.machines}
        out.update({(f"{c.kind}.{CAPI_GROUP}", c.namespace, c.name): c.obj for c in self.inputs.capi})
        return out

    def forecast(self, decisions: Iterable[BootImageDecision]) -> Forecast:
        """What happens next on this input (core.forecast): the upgrade gate from its ClusterVersion
        (absent: unknown, so closed, as the daemon judges it), the writers, the writer conflicts.
        `plan` and `fleet` report from this one model."""
        objects = self.objects_by_key()
        cv, mc = self.inputs.cluster_version, self.inputs.machine_configuration
        return Forecast.build(decisions, UpgradeGate.from_cluster_version(cv.obj if cv else None),
                              lambda kind, namespace, name: objects.get((kind, namespace, name)),
                              mc.obj if mc is not None else None, self.context.facts.managers.gitops_labels)

    def with_cloud(self, cloud: CloudFacts, platforms: frozenset[str]) -> PreparedPlan:
        facts = replace(self.context.facts, cloud=cloud, cloud_platforms=platforms)
        return replace(self, context=replace(self.context, facts=facts))


def prepare(
    inputs: PlanInputs,
    *,
    bootimages_file: str | None = None,
    control_plane_arch: str | None = None,
    gitops_labels: tuple[str, ...] = (),
    golden_source: GoldenSource | None = None,
) -> PreparedPlan:
    """Golden data, cluster facts and enrollment; raises `InputError` naming file, object, field.
    `golden_source`: golden data already loaded (`fleet --bootimages`, read once for every cluster)."""
    golden = golden_source or golden_from(inputs, bootimages_file)
    context = planning_context(
        cluster_objects(inputs),
        golden=golden.golden,
        golden_origin=golden.description,
        arch_override=control_plane_arch,
        gitops_labels=gitops_labels,
        published=bundled_index(),
    )
    return PreparedPlan(inputs, context)


def run_planner(prepared: PreparedPlan) -> list[BootImageDecision]:
    """`planner.plan_all` over the inputs; an object too broken to parse is named by its file."""
    machines = prepared.inputs.machines
    ctx = prepared.context
    decisions = plan_all([m.obj for m in machines], ctx.golden, ctx.facts, ctx.enrollment)
    decisions += [_plan_capi(prepared, c) for c in prepared.inputs.capi]
    return [
        replace(d, message=f"{m.source}: {d.message}") if d.reason == Reason.INVALID_OBJECT else d
        for m, d in zip((*machines, *prepared.inputs.capi), decisions, strict=True)
    ]


def _plan_capi(prepared: PreparedPlan, item: SourcedObject) -> BootImageDecision:
    """A Cluster API object, with the template it names and its Machine API twin from the inputs
    (`lookups`, as the daemon plans it from its caches)."""
    from ..core.lookups import plan_object

    ctx = prepared.context
    return plan_object(item.obj, InputsStore(prepared.inputs), ctx, ctx.facts)


class InputsStore:
    """`plan`'s inputs as a `lookups.ObjectStore`: objects by kind, CAPI kinds as `Kind.group`."""

    def __init__(self, inputs: PlanInputs) -> None:
        self._objects: dict[tuple[str, str, str], Mapping[str, Any]] = {
            key: obj.obj for key, obj in inputs.templates.items()
        }
        for m in inputs.machines:
            self._objects[(m.kind, m.namespace, m.name)] = m.obj
        for c in inputs.capi:
            self._objects[(f"{c.kind}.{CAPI_GROUP}", c.namespace, c.name)] = c.obj

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._objects.get((kind, namespace, name))

    def list(self, kind: str) -> list[Mapping[str, Any]]:
        return [obj for (k, _, _), obj in self._objects.items() if k == kind]


# ---- skew --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SkewOutcome:
    verdict: SkewVerdict
    explanation: str  # why this mode is in effect
    # Held now: the verdict once the writes planned now (this controller's and the MCO's) are made.
    # None: nothing is held, or nothing is written now that could change it.
    after_writes: SkewVerdict | None = None

    def to_json(self) -> dict[str, Any]:
        """The `skew` object of `plan -o json` (SPEC section 4): the verdict now, and
        `afterPlannedWrites` (null when nothing is held or nothing written now could change it)."""
        after = self.after_writes
        return {**self.verdict.to_json(), "afterPlannedWrites": None if after is None else {
            "upgradeable": after.upgradeable, "reason": str(after.reason), "message": after.message}}


def evaluate_plan_skew(
    prepared: PreparedPlan, decisions: Sequence[BootImageDecision], limits: SkewLimits
) -> SkewOutcome:
    """The skew verdict the daemon would reach on these objects now (SPEC section 5).

    The boot images judged are the MachineSets' current ones, before any patch in the plan: that
    is what holds or allows an upgrade today. Error decisions count as BootImageUpdateDegraded, as
    they would in the daemon. The same `assess_skew` as the daemon's, on the same objects.
    """
    objects = prepared.objects_by_key()
    machines = [(d, objects.get((d.kind, d.namespace, d.name))) for d in decisions]
    assessment = _assess(prepared, machines, limits)
    log_input_notes(assessment.notes)
    after = None
    if not assessment.verdict.upgradeable:
        written = _written_now(prepared, machines)
        if written is not None:
            # Each written MachineSet is an up-to-date decision in `written`: counted as the daemon counts.
            after_pass = PassResult.counted((d, False, False) for d, _ in written)
            after = _assess(prepared, written, limits, after_pass=after_pass).verdict
    return SkewOutcome(assessment.verdict, assessment.status.explanation, after)


Machines = list[tuple[BootImageDecision, Mapping[str, Any] | None]]


def _assess(prepared: PreparedPlan, machines: Machines, limits: SkewLimits,
            after_pass: PassResult | None = None) -> SkewAssessment:
    mc = prepared.inputs.machine_configuration
    errors = [d for d, _ in machines if d.action == Action.ERROR]
    try:
        return assess_skew(
            cluster_objects(prepared.inputs),
            prepared.context.enrollment,
            machines,
            limits,
            degraded=bool(errors),
            degraded_message="; ".join(f"{d.namespace}/{d.name}: {d.reason}" for d in errors),
            golden=prepared.context.golden,
            facts=prepared.context.facts,
            after_pass=after_pass,
        )
    except InputError as exc:
        raise exc.located(mc.source if mc else None) from None


def _written_now(prepared: PreparedPlan, machines: Machines) -> Machines | None:
    """The MachineSets as they will be once the writes planned now are made: this controller's and
    the MCO's (the forecast's `now`), each at its target with its decision up to date. None when
    nothing is written now."""
    forecast = prepared.forecast([d for d, _ in machines])
    now = {(w.decision.kind, w.decision.namespace, w.decision.name) for w in forecast.writes
           if w.when is When.NOW and w.writer in (Writer.OURS, Writer.MCO) and w.decision.kind == MACHINESET_KIND}
    if not now:
        return None
    out: Machines = []
    for d, obj in machines:
        if (d.kind, d.namespace, d.name) in now and obj is not None:
            d, obj = replace(d, action=Action.NOOP, reason=Reason.UP_TO_DATE, current=d.target,
                             current_release=d.target_release, changes=()), apply_changes(obj, d.changes)
        out.append((d, obj))
    return out


def cluster_objects(inputs: PlanInputs) -> ClusterObjects:
    singles = {
        "bootimages": inputs.bootimages,
        "machineconfiguration": inputs.machine_configuration,
        "infrastructure": inputs.infrastructure,
        "clusterversion": inputs.cluster_version,
        "mco_operator": inputs.mco_operator,
        "feature_gate": inputs.feature_gate,
    }

    def obj(role: str) -> Mapping[str, Any] | None:
        item = singles[role]
        return item.obj if item is not None else None

    return ClusterObjects.from_roles(obj, nodes=[n.obj for n in inputs.nodes], machines=[m.obj for m in inputs.machines],
                                     origins={role: item.source for role, item in singles.items() if item is not None})


# ---- cloud verification (`plan --cloud-verify`) ------------------------------------------------

# Without the cluster's Secret, `plan` uses the administrator's own credentials from these
# variables (the names each cloud's CLI uses), shaped like the Secret so one parser validates both.
_ENV_SECRET_KEYS: Mapping[Platform, Mapping[str, str]] = {
    Platform.AWS: {
        "aws_access_key_id": "AWS_ACCESS_KEY_ID",
        "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
        "role_arn": "AWS_ROLE_ARN",
        "web_identity_token_file": "AWS_WEB_IDENTITY_TOKEN_FILE",
    },
    Platform.AZURE: {
        "azure_client_id": "AZURE_CLIENT_ID",
        "azure_client_secret": "AZURE_CLIENT_SECRET",
        "azure_tenant_id": "AZURE_TENANT_ID",
        "azure_subscription_id": "AZURE_SUBSCRIPTION_ID",
        "azure_federated_token_file": "AZURE_FEDERATED_TOKEN_FILE",
    },
}
GCP_CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
CLOUD_SECRET_NAMES: Mapping[Platform, str] = {
    Platform.AWS: AWS_CREDENTIALS_SECRET,
    Platform.GCP: GCP_CREDENTIALS_SECRET,
    Platform.AZURE: AZURE_CREDENTIALS_SECRET,
}


@dataclass(frozen=True)
class CloudCredentialSources:
    secrets: Mapping[Platform, Mapping[str, Any]]  # Secret-shaped objects, for CloudVerifier.from_secrets
    origins: Mapping[Platform, str]  # where each came from (no values), for the table's Inputs


def cloud_credentials(inputs: PlanInputs, environ: Mapping[str, str]) -> CloudCredentialSources:
    """Per cloud: the credentials Secret among the inputs (or read from the cluster), else the environment."""
    secrets: dict[Platform, Mapping[str, Any]] = {}
    origins: dict[Platform, str] = {}
    for platform, secret in inputs.secrets.items():
        if platform == Platform.VSPHERE:
            continue  # vCenter credentials go to vsphere.checks, not the cloud verifier
        secrets[Platform(platform)] = secret.obj
        origins[Platform(platform)] = f"Secret {secret.namespace}/{secret.name} ({secret.source})"
    for platform, secret_from_env in _environment_secrets(environ).items():
        if platform not in secrets:
            secrets[platform] = secret_from_env
            origins[platform] = f"environment ({secret_from_env['metadata']['name']})"
    return CloudCredentialSources(secrets, origins)


def _environment_secrets(environ: Mapping[str, str]) -> dict[Platform, Mapping[str, Any]]:
    out: dict[Platform, Mapping[str, Any]] = {}
    for platform, keys in _ENV_SECRET_KEYS.items():
        data = {key: _b64(environ[var]) for key, var in keys.items() if environ.get(var)}
        if data:
            used = "/".join(var for key, var in keys.items() if key in data)
            out[platform] = _secret_shape(used, data)
    path = environ.get(GCP_CREDENTIALS_ENV)
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(GCP_CREDENTIALS_ENV, None, f"cannot read {path}: {exc.strerror or exc}") from None
        out[Platform.GCP] = _secret_shape(GCP_CREDENTIALS_ENV, {"service_account.json": _b64(text)})
    return out


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _secret_shape(name: str, data: Mapping[str, str]) -> Mapping[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "environment", "name": name}, "data": data}


