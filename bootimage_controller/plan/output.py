"""What `plan` prints (table, JSON, YAML) and the manifests `--write-patched` writes.

JSON and YAML are exactly the SPEC section 4 object; the table is for an administrator reading a
terminal: one row per MachineSet, the reasons for skips and errors spelled out below it, a
summary line and the skew verdict.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..constants import (
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINESET,
    CPMS_KIND,
    CPMS_VERSION,
    DEFAULT_CLUSTER_OPERATOR,
    DOCS_BASE_URL,
    ENV_DOCS_URL,
    MACHINE_API_GROUP,
    MACHINESET_KIND,
    MACHINESET_VERSION,
    Action,
    Manager,
)
from ..core.claims import change_ops
from ..core.forecast import OPEN_GATE, Forecast
from ..core.model import BootImageDecision
from ..core.patching import apply_changes
from ..core.skew.record import ReleaseSource
from ..data import bundled_index
from ..errors import InputError

PLAN_KIND = "BootImagePlan"
# kustomize targets of the kinds a GitOps proposal is written for.
_PATCH_TARGETS = {MACHINESET_KIND: (MACHINE_API_GROUP, MACHINESET_VERSION), CPMS_KIND: (MACHINE_API_GROUP, CPMS_VERSION)}

# Fields the API server owns. A manifest that carries them cannot be applied as it is:
# server-side apply rejects `managedFields`; a stale `resourceVersion` makes apply/replace fail
# with 409 Conflict; a `uid` fails the precondition once the object is recreated. Everything else
# (status, creationTimestamp, annotations, unknown keys) is kept exactly as read.
SERVER_OWNED_METADATA = ("managedFields", "resourceVersion", "uid")


@dataclass(frozen=True)
class PlanReport:
    decisions: tuple[BootImageDecision, ...]
    skew: Mapping[str, Any] | None  # the SPEC `skew` object (skew.verdict), None when not evaluated
    context: tuple[str, ...] = ()  # where the facts came from, printed under the table
    # Who writes what next (core.forecast): the table, summary, Details and JSON all read it.
    forecast: Forecast = field(default_factory=lambda: Forecast(OPEN_GATE, ()))

    @classmethod
    def build(
        cls, decisions: Iterable[BootImageDecision], skew: Mapping[str, Any] | None, context: Iterable[str] = (),
        forecast: Forecast | None = None,
    ) -> PlanReport:
        """`forecast`: what happens next (`PreparedPlan.forecast`); none: every write now, no conflicts."""
        ordered = sort_decisions(decisions)
        return cls(ordered, skew, tuple(context), forecast or Forecast.build(ordered, OPEN_GATE))

    @property
    def upgrades_held(self) -> bool:
        return self.skew is not None and self.skew.get("upgradeable") is False


def sort_decisions(decisions: Iterable[BootImageDecision]) -> tuple[BootImageDecision, ...]:
    return tuple(sorted(decisions, key=lambda d: (d.namespace, d.name, d.kind)))


def plan_document(report: PlanReport) -> dict[str, Any]:
    """The `plan -o json` object (SPEC section 4), field names exact, plain JSON types only."""
    forecast = report.forecast
    doc = {
        "kind": PLAN_KIND,
        "machineSets": [{**d.to_json(), "nextWrite": forecast.of(d).to_json()} for d in report.decisions],
        "gate": forecast.gate.to_json(),
        "skew": dict(report.skew) if report.skew is not None else None,
    }
    # A round trip turns enum members (reasons are StrEnums) into the plain strings YAML needs.
    result: dict[str, Any] = json.loads(json.dumps(doc))
    return result


@dataclass(frozen=True)
class TableStyle:
    """How the table is drawn: `width` None draws every column in full (`-o wide`, or a pipe);
    a width drops the least useful columns, then shortens names, until rows fit (a terminal)."""

    width: int | None = None
    colour: bool = False


def render(report: PlanReport, fmt: str, width: int = 100, style: TableStyle | None = None) -> str:
    if fmt == "json":
        return json.dumps(plan_document(report), indent=2) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(plan_document(report), sort_keys=False, default_flow_style=False, allow_unicode=True)
    return render_table(report, width, style or TableStyle())


# ---- table --------------------------------------------------------------------------------------

_SUMMARY_WORDS = (
    (Action.PATCH, "to patch"),
    (Action.NOOP, "up to date"),
    (Action.SKIP, "skipped"),
    (Action.ERROR, "errors"),
)


# Prose (details, skew, inputs) is wrapped at this width at most: longer lines are hard to read.
PROSE_WIDTH = 120


def render_table(report: PlanReport, width: int = 100, style: TableStyle | None = None) -> str:
    style = style or TableStyle()
    width = min(max(60, width), PROSE_WIDTH)
    lines: list[str] = []
    forecast = report.forecast
    if report.decisions:
        lines.extend(_rows(report.decisions, style, forecast))
    else:
        lines.append("No MachineSets or ControlPlaneMachineSets found in the input.")
    upcoming = _next_writes(forecast, width)
    if upcoming:
        lines += ["", "Next writes (this controller's first):", *upcoming]
    details = _details(report.decisions, width)
    if details:
        lines += ["", "Details:", *details]
    lines += ["", *_wrap(summary_line(report.decisions, forecast), width, "", "  ")]
    if not forecast.gate.open:
        lines += _wrap(f"Gate: closed ({forecast.gate.reason}): {forecast.gate.message}", width, "", "  ")
    lines += skew_lines(report.skew, width, style.colour)
    if report.context:
        lines += ["", "Inputs:"]
        for item in report.context:
            lines.extend(_wrap(item, width, "  ", "    "))
    return "\n".join(lines) + "\n"


# Columns dropped when a terminal is too narrow, by meaning (issue 47, item 2). First what is the same
# on every row (said once above the table: `PLATFORM = AWS`), then the build and image columns; then
# (after the names lose their shared prefix and MANAGER its long form) PLATFORM, REASON (Details says
# why for every skip and error; a patch's or a no-op's is its ACTION), then the releases as a pair;
# ARCH and STREAM that differ between rows go last: they tell a rhel-10 or an arm64 pool apart, the
# difference a skew hold is about. What always stays: the name (whole: what tells the rows apart is
# never cut while anything else can go), its kind, its manager, and what will happen.
_UNIFORM_FIRST = ("PLATFORM", "ARCH", "STREAM", "VERIFIED")
_DROP_FIRST = ("CURRENT-IMAGE", "TARGET-IMAGE", "CURRENT-RHCOS", "TARGET-RHCOS", "VERIFIED")
_DROP_LAST: tuple[tuple[str, ...], ...] = (("PLATFORM",), ("REASON",), ("CURRENT", "TARGET"), ("ARCH",), ("STREAM",))
# MANAGER's short forms on a narrow terminal, said once above the table.
_SHORT_MANAGERS = {str(Manager.OURS): "ours"}
_MIN_NAME = 16
_ACTION_COLOURS = {"patch": "33", "noop": "32", "skip": "36", "error": "31;1", "conflict": "31;1"}  # ANSI SGR
# The table's KIND: short, so it stays at every width (JSON and YAML keep the full kind).
_KIND_LABELS = {MACHINESET_KIND: "MS", CPMS_KIND: "CPMS", CAPI_MACHINESET: "CAPI-MS", CAPI_MACHINEDEPLOYMENT: "CAPI-MD"}
ELLIPSIS = "\u2026"


def _releases(d: BootImageDecision) -> tuple[str | None, str | None]:
    """CURRENT and TARGET in one scheme per row: the OpenShift releases that shipped the two RHCOS
    builds when both are known (`4.16` -> `4.22`; builds of two numbering schemes, such as
    `416.94.202405291527-0` and `9.8.20260403-0`, cannot be compared by eye), else the builds."""
    index = bundled_index()
    current = index.openshift_release(d.current_release) if d.current_release else None
    target = index.openshift_release(d.target_release) if d.target_release else None
    if (current or not d.current_release) and (target or not d.target_release):
        return current, target
    return d.current_release, d.target_release


def _rows(decisions: Sequence[BootImageDecision], style: TableStyle | None = None,
          forecast: Forecast | None = None) -> list[str]:
    style = style or TableStyle()
    forecast = forecast or Forecast(OPEN_GATE, ())
    one_namespace = len({d.namespace for d in decisions}) == 1
    show_kind = any(d.kind != MACHINESET_KIND for d in decisions)
    header = ["NAME" if one_namespace else "NAMESPACE/NAME"]
    header += ["KIND"] if show_kind else []
    header += ["PLATFORM", "ARCH", "STREAM", "MANAGER", "ACTION", "REASON", "CURRENT", "TARGET", "VERIFIED",
               "CURRENT-RHCOS", "TARGET-RHCOS", "CURRENT-IMAGE", "TARGET-IMAGE"]
    rows = [header]
    for d in decisions:
        row: list[str | None] = [_display_name(d, one_namespace)]
        row += [_KIND_LABELS.get(d.kind, d.kind)] if show_kind else []
        current, target = _releases(d)
        # ACTION says what happens next: `patch` only for what this controller writes now.
        row += [d.platform, d.architecture, d.stream, str(d.manager), forecast.of(d).label, d.reason,
                current, target, (d.verified or {}).get("verdict", "unverified"), d.current_release,
                d.target_release, image_id(d.current), image_id(d.target)]
        rows.append([_cell(v) for v in row])
    prefix = ""
    if style.width is not None:
        rows, prefix = _fit(rows, style.width)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    action = rows[0].index("ACTION")
    out = [f"({prefix})"] if prefix else []
    for n, r in enumerate(rows):
        cells = [cell.ljust(w) for cell, w in zip(r, widths, strict=True)]
        if style.colour and n > 0 and r[action] in _ACTION_COLOURS:
            cells[action] = f"\x1b[{_ACTION_COLOURS[r[action]]}m{cells[action]}\x1b[0m"
        out.append("  ".join(cells).rstrip())
    return out


def _fit(rows: list[list[str]], width: int) -> tuple[list[list[str]], str]:
    """Drop the columns of `_UNIFORM_FIRST` that hold one value on every row (the value is said
    above the table), then `_DROP_FIRST`, then cut the prefix the names share (a cluster's
    MachineSets all start `<infra id>-worker-`; what tells them apart is at the end: the prefix is
    shown once above the table), then shorten MANAGER, then drop `_DROP_LAST`, and only then cut the
    names' middles, until the rows fit. Returns the rows and the legend ("" when none)."""

    def line_width(table: list[list[str]]) -> int:
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        return sum(widths) + 2 * (len(widths) - 1)

    def drop(table: list[list[str]], columns: tuple[str, ...]) -> list[list[str]]:
        for column in columns:
            if column in table[0]:
                i = table[0].index(column)
                table = [r[:i] + r[i + 1 :] for r in table]
        return table

    legend: list[str] = []
    for column in _UNIFORM_FIRST:
        if line_width(rows) > width and column in rows[0]:
            i = rows[0].index(column)
            values = {r[i] for r in rows[1:]}
            if len(values) == 1 and "-" not in values:
                rows = drop(rows, (column,))
                legend.append(f"{column} = {values.pop()}")
    for column in _DROP_FIRST:
        if line_width(rows) > width:
            rows = drop(rows, (column,))
    if line_width(rows) > width:
        prefix = _shared_prefix([r[0] for r in rows[1:]])
        if prefix:
            rows = [rows[0], *([ELLIPSIS + r[0][len(prefix):] if r[0].startswith(prefix) else r[0], *r[1:]]
                               for r in rows[1:])]
            legend.append(f"{ELLIPSIS} = {prefix}")
    if line_width(rows) > width and "MANAGER" in rows[0]:
        i = rows[0].index("MANAGER")
        used = {r[i] for r in rows[1:]} & set(_SHORT_MANAGERS)
        rows = [rows[0], *([*r[:i], _SHORT_MANAGERS.get(r[i], r[i]), *r[i + 1:]] for r in rows[1:])]
        legend += [f"{_SHORT_MANAGERS[m]} = {m}" for m in sorted(used)]
    for columns in _DROP_LAST:
        if line_width(rows) > width:
            rows = drop(rows, columns)
    excess = line_width(rows) - width
    if excess > 0:
        keep = max(_MIN_NAME, max(len(r[0]) for r in rows) - excess)
        rows = [rows[0], *([_elide(r[0], keep), *r[1:]] for r in rows[1:])]
    return rows, "; ".join(legend)


def _shared_prefix(names: list[str]) -> str:
    """The prefix, ending at a `-`, `/` or `.`, that the most names share (at least two; more than
    three characters), the longest of those: on one cluster, its infrastructure id and the pool's
    role. Linear in the names' length: a must-gather of thousands of MachineSets prints at once."""
    counts: Counter[str] = Counter()
    for name in set(names):
        counts.update(name[: i + 1] for i, ch in enumerate(name) if ch in "-/." and i >= 3)
    shared = [(n, len(p), p) for p, n in counts.items() if n >= 2]
    return max(shared)[2] if shared else ""


def _elide(name: str, keep: int) -> str:
    """`…worker-arm64-us-east-1c` -> `…arm64-us-east-1c`: the end says which pool, and MachineSet
    names differ at the end."""
    if len(name) <= keep:
        return name
    return ELLIPSIS + name[len(name) - (keep - 1):]


def image_id(value: Any) -> str | None:
    """The image a boot image field names, short: the AMI, the GCP image's name, the Azure
    marketplace version (or gallery image), the vSphere template; CAPI rows: the template's image."""
    if isinstance(value, Mapping) and set(value) == {"template", "image"}:
        value = value["image"]
    if isinstance(value, str):
        return value.rsplit("/", 1)[-1] or None
    if not isinstance(value, Mapping):
        return None
    for key in ("id", "template", "version"):
        found = value.get(key)
        if isinstance(found, str) and found:
            return found
    resource = value.get("resourceID")
    return resource.rsplit("/", 1)[-1] if isinstance(resource, str) and resource else None


def docs_link(page: str, section: str) -> str:
    """The URL of a section of the project's docs (`DOCS_BASE_URL`, or BOOTIMAGE_DOCS_URL), with the
    anchor a Markdown renderer gives the heading."""
    base = (os.environ.get(ENV_DOCS_URL) or DOCS_BASE_URL).rstrip("/")
    return f"{base}/{page}#{heading_anchor(section)}"


def heading_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _source_words(source: Any) -> str:
    try:
        return ReleaseSource(source).described
    except ValueError:
        return str(source)


def _display_name(d: BootImageDecision, one_namespace: bool) -> str:
    name = d.name or "<unnamed>"
    return name if one_namespace else f"{d.namespace}/{name}"


def _cell(value: str | None) -> str:
    return value if value else "-"


def _next_writes(forecast: Forecast, width: int) -> list[str]:
    """Every object whose boot image will change: who writes it and when (this controller's first),
    and for each writer conflict the ways out."""
    out: list[str] = []
    for w in forecast.changing():
        out.extend(_wrap(f"{_display_name(w.decision, False)}: {w.sentence()}", width, "  ", "    "))
        if w.conflict is not None:
            for fix in w.conflict.fixes():
                out.extend(_wrap(f"fix: {fix}", width, "    ", "      "))
    return out


def _details(decisions: Sequence[BootImageDecision], width: int) -> list[str]:
    """Why nothing is written for the skips and errors (every manager's: another manager's row says
    who would act and why); what will change is under "Next writes"."""
    out: list[str] = []
    for d in decisions:
        if d.current_deprecated is not None:
            out.extend(_wrap(f"{_display_name(d, False)}: its current boot image is deprecated: {d.current_deprecated}; "
                             "scale-up may fail until it is updated", width, "  ", "    "))
        if d.action not in (Action.SKIP, Action.ERROR):
            continue
        theirs = d.manager != Manager.OURS
        manager = f" (manager {d.manager}: {d.manager_why})" if theirs else ""
        out.extend(_wrap(f"{_display_name(d, False)}: {d.action} {d.reason}{manager}", width, "  ", "    "))
        out.extend(_wrap(d.message, width, "    ", "    "))
    return out


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    ) or [first.rstrip()]


def summary_line(decisions: Sequence[BootImageDecision], forecast: Forecast | None = None) -> str:
    """`Plan: this controller patches 1 now, the MCO 3; 0 up to date, ...; managed by mco 5, ...`:
    what happens next by writer (core.forecast), then what needs nothing, then every manager."""
    forecast = forecast or Forecast.build(decisions, OPEN_GATE)
    counts = Counter(d.action for d in decisions)
    line = "Plan: " + forecast.summary() + "; " + ", ".join(
        f"{counts.get(action, 0)} {words}" for action, words in _SUMMARY_WORDS if action is not Action.PATCH)
    managers = Counter(str(d.manager) for d in decisions)
    named = [m for m in Manager if m is not Manager.NOBODY and managers.get(m)]
    if named:
        line += "; managed by " + ", ".join(f"{m} {managers[m]}" for m in named)
    if managers.get(Manager.NOBODY):
        line += f"; {managers[Manager.NOBODY]} managed by nobody (not enrolled)"
    return line


def skew_lines(skew: Mapping[str, Any] | None, width: int, colour: bool = False) -> list[str]:
    if skew is None:
        return ["Skew: not evaluated"]
    image = skew.get("clusterBootImage") or {}
    limit = skew.get("limit") or {}
    found = image.get("rhcosVersion") or image.get("ocpVersion")
    parts = [f"Skew: mode {skew.get('mode')}"]
    if found:
        parts.append(f"cluster boot image {found} (known from {_source_words(image.get('source'))})")
    parts.append(f"limit OCP {limit.get('ocpVersion')} / RHEL {limit.get('rhelVersion')}")
    # `plan` judges files or a snapshot: it says what the daemon would make of them, not what holds.
    # Held: by whom (the daemon's ClusterOperator, Upgradeable=False), and what the writes planned
    # now change: the hold is the reason, not the limit (issue 47, item 3).
    if skew.get("upgradeable"):
        head = ", ".join(parts) + f": upgrades would be allowed ({skew.get('reason')})"
    else:
        head = (", ".join(parts) + f": upgrades would be HELD now ({skew.get('reason')}), by ClusterOperator "
                f"{DEFAULT_CLUSTER_OPERATOR} (Upgradeable=False)")
    lines = _wrap(head, width, "", "  ")
    if colour and not skew.get("upgradeable"):
        lines = [line.replace("upgrades would be HELD", "\x1b[31;1mupgrades would be HELD\x1b[0m") for line in lines]
    if skew.get("message"):
        lines += _wrap(str(skew["message"]), width, "  ", "  ")
    if not skew.get("upgradeable"):
        lines += _wrap(_after_planned_writes(skew.get("afterPlannedWrites")), width, "  ", "  ")
        lines += _wrap(f"What to do: {docs_link('runbooks.md', 'BootImageSkewHoldsUpgrades')}", width, "  ", "  ")
    return lines


def _after_planned_writes(after: Mapping[str, Any] | None) -> str:
    """Whether the writes planned now (this controller's and the MCO's) clear the hold."""
    if after is None:
        return "After the writes planned now: nothing planned now changes it (see Next writes)."
    if after.get("upgradeable"):
        return "After the writes planned now (this controller's and the MCO's): upgrades allowed again."
    return (f"After the writes planned now (this controller's and the MCO's): still HELD ({after.get('reason')}): "
            f"{after.get('message')}")


# ---- --write-patched ---------------------------------------------------------------------------

_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
ObjectKey = tuple[str, str, str]  # (kind, namespace, name)


def patched_manifest(obj: Mapping[str, Any], decision: BootImageDecision) -> dict[str, Any]:
    """The input object with only the boot image field changed (and server-owned metadata gone)."""
    patched = apply_changes(obj, decision.changes)
    meta = patched.get("metadata")
    if isinstance(meta, dict):
        for key in SERVER_OWNED_METADATA:
            meta.pop(key, None)
    return patched


def manifest_filename(decision: BootImageDecision) -> str:
    parts = [p for p in (decision.namespace, decision.name) if p]
    return "_".join(_UNSAFE_FILE_CHARS.sub("_", p) for p in parts) + ".yaml"


# The managers whose patches a manifest carries: ours (applied by hand or by us) and Git's.
CARRIED_BY_MANIFEST = frozenset({Manager.OURS, Manager.GITOPS})


def left_to_their_writers(decisions: Iterable[BootImageDecision]) -> int:
    """The patches `write_patched` leaves out: their writer (the MCO, Hive, a policy) writes them."""
    return sum(1 for d in decisions if d.action == Action.PATCH and d.changes and d.manager not in CARRIED_BY_MANIFEST)


def write_patched(
    decisions: Iterable[BootImageDecision], objects: Mapping[ObjectKey, Mapping[str, Any]], out_dir: Path
) -> list[Path]:
    """Write `DIR/<namespace>_<name>.yaml` for every `patch` decision this controller or Git must
    carry; returns the paths written. Not for the MCO's, Hive's or a policy's MachineSets: each
    writes its own, and Hive or the policy would put a manifest applied by hand back (issue 49)."""
    patches = [d for d in decisions if d.action == Action.PATCH and d.changes and d.manager in CARRIED_BY_MANIFEST]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(str(out_dir), None, f"--write-patched: cannot create the folder: {exc.strerror or exc}") from None
    written = []
    for decision in patches:
        obj = objects.get((decision.kind, decision.namespace, decision.name))
        if obj is None:
            continue
        outputs = [(out_dir / manifest_filename(decision), _header(decision) + _yaml(patched_manifest(obj, decision)))]
        if decision.capi is not None:
            # The new infrastructure template goes first (apply in file order): the patched object names it.
            template_file = out_dir / (_UNSAFE_FILE_CHARS.sub("_", f"{decision.namespace}_{decision.capi.new_name}") + ".yaml")
            header = (f"# Written by `bootimage-controller plan --write-patched`: {decision.capi.template_kind} "
                      f"{decision.capi.old_name} with only the boot image changed.\n")
            outputs.insert(0, (template_file, header + _yaml(decision.capi.new_template)))
        if decision.manager == Manager.GITOPS and decision.kind in _PATCH_TARGETS:
            # Git is the source of truth: the change as a kustomize JSON 6902 patch to commit.
            outputs.append((out_dir / kustomize_patch_filename(decision), kustomize_patch(decision)))
        for path, text in outputs:
            try:
                path.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise InputError(str(path), None, f"--write-patched: cannot write: {exc.strerror or exc}") from None
            written.append(path)
    return written


def kustomize_patch_filename(decision: BootImageDecision) -> str:
    return manifest_filename(decision).removesuffix(".yaml") + ".patch.yaml"


def kustomize_patch(decision: BootImageDecision) -> str:
    """A JSON 6902 patch file for kustomize's `patches:`, with the entry that names it in a comment.

    The ops are the ones the daemon proposes in its `BootImageUpdateProposed` Event: each `test`s
    the boot image planned from, then replaces it (claims.change_ops)."""
    group, version = _PATCH_TARGETS[decision.kind]
    target = {"group": group, "version": version, "kind": decision.kind, "namespace": decision.namespace,
              "name": decision.name}
    entry = yaml.safe_dump([{"path": kustomize_patch_filename(decision), "target": target}], sort_keys=False)
    header = (
        f"# Proposed by `bootimage-controller plan --write-patched` for a GitOps-managed {decision.kind}:\n"
        f"# {decision.field}: {decision.current_release or 'unknown release'} -> {decision.target_release or 'golden'} "
        f"(stream {decision.stream}).\n# Add to your kustomization.yaml:\n# patches:\n"
        + "".join(f"# {line}\n" for line in entry.splitlines())
    )
    return header + yaml.safe_dump(change_ops(decision.changes), sort_keys=False, default_flow_style=False)


def _yaml(obj: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(obj), sort_keys=False, default_flow_style=False, allow_unicode=True)


def _header(d: BootImageDecision) -> str:
    return (
        f"# Patched by `bootimage-controller plan --write-patched`: only {d.field} changed\n"
        f"# ({d.current_release or 'unknown release'} -> {d.target_release or 'golden boot image'}, stream {d.stream}).\n"
    )
