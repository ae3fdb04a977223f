"""What `plan` prints (table, JSON, YAML) and the manifests `--write-patched` writes.

JSON and YAML are exactly the SPEC section 4 object; the table is for an administrator reading a
terminal: one row per MachineSet, the reasons for skips and errors spelled out below it, a
summary line and the skew verdict.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .constants import (
    CPMS_KIND,
    CPMS_VERSION,
    MACHINE_API_GROUP,
    MACHINESET_KIND,
    MACHINESET_VERSION,
    Action,
    Manager,
)
from .core.claims import change_ops
from .core.model import BootImageDecision
from .core.patching import apply_changes
from .errors import InputError

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

    @classmethod
    def build(
        cls, decisions: Iterable[BootImageDecision], skew: Mapping[str, Any] | None, context: Iterable[str] = ()
    ) -> PlanReport:
        return cls(sort_decisions(decisions), skew, tuple(context))

    @property
    def upgrades_held(self) -> bool:
        return self.skew is not None and self.skew.get("upgradeable") is False


def sort_decisions(decisions: Iterable[BootImageDecision]) -> tuple[BootImageDecision, ...]:
    return tuple(sorted(decisions, key=lambda d: (d.namespace, d.name, d.kind)))


def plan_document(report: PlanReport) -> dict[str, Any]:
    """The `plan -o json` object (SPEC section 4), field names exact, plain JSON types only."""
    doc = {
        "kind": PLAN_KIND,
        "machineSets": [d.to_json() for d in report.decisions],
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


def render_table(report: PlanReport, width: int = 100, style: TableStyle | None = None) -> str:
    style = style or TableStyle()
    width = max(60, width)
    lines: list[str] = []
    if report.decisions:
        lines.extend(_rows(report.decisions, style))
    else:
        lines.append("No MachineSets or ControlPlaneMachineSets found in the input.")
    details = _details(report.decisions, width)
    if details:
        lines += ["", "Details:", *details]
    lines += ["", summary_line(report.decisions), *skew_lines(report.skew, width, style.colour)]
    if report.context:
        lines += ["", "Inputs:"]
        for item in report.context:
            lines.extend(_wrap(item, width, "  ", "    "))
    return "\n".join(lines) + "\n"


# Columns dropped first when a terminal is too narrow (the rest always stay: the name, what will
# happen, why, and the releases).
_DROP_ORDER = ("ARCH", "STREAM", "CURRENT-IMAGE", "TARGET-IMAGE", "PLATFORM", "MANAGER", "KIND")
_MIN_NAME = 16
_ACTION_COLOURS = {"patch": "33", "noop": "32", "skip": "36", "error": "31;1"}  # ANSI SGR


def _rows(decisions: Sequence[BootImageDecision], style: TableStyle | None = None) -> list[str]:
    style = style or TableStyle()
    one_namespace = len({d.namespace for d in decisions}) == 1
    show_kind = any(d.kind != MACHINESET_KIND for d in decisions)
    header = ["NAME" if one_namespace else "NAMESPACE/NAME"]
    header += ["KIND"] if show_kind else []
    header += ["PLATFORM", "ARCH", "STREAM", "MANAGER", "ACTION", "REASON", "CURRENT", "CURRENT-IMAGE", "TARGET",
               "TARGET-IMAGE"]
    rows = [header]
    for d in decisions:
        row: list[str | None] = [_display_name(d, one_namespace)]
        row += [d.kind] if show_kind else []
        row += [d.platform, d.architecture, d.stream, str(d.manager), str(d.action), d.reason,
                d.current_release, image_id(d.current), d.target_release, image_id(d.target)]
        rows.append([_cell(v) for v in row])
    if style.width is not None:
        rows = _fit(rows, style.width)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    action = rows[0].index("ACTION")
    out = []
    for n, r in enumerate(rows):
        cells = [cell.ljust(w) for cell, w in zip(r, widths, strict=True)]
        if style.colour and n > 0 and r[action] in _ACTION_COLOURS:
            cells[action] = f"\x1b[{_ACTION_COLOURS[r[action]]}m{cells[action]}\x1b[0m"
        out.append("  ".join(cells).rstrip())
    return out


def _fit(rows: list[list[str]], width: int) -> list[list[str]]:
    """Drop columns in `_DROP_ORDER`, then shorten the names (with an ellipsis), until rows fit."""

    def line_width(table: list[list[str]]) -> int:
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        return sum(widths) + 2 * (len(widths) - 1)

    for column in _DROP_ORDER:
        if line_width(rows) <= width:
            return rows
        if column in rows[0]:
            i = rows[0].index(column)
            rows = [r[:i] + r[i + 1 :] for r in rows]
    excess = line_width(rows) - width
    if excess > 0:
        longest = max(len(r[0]) for r in rows)
        keep = max(_MIN_NAME, longest - excess)
        rows = [[_elide(r[0], keep), *r[1:]] for r in rows]
    return rows


def _elide(name: str, keep: int) -> str:
    """`prod-east-8h2kq-worker-arm64-us-east-1c` -> `prod-e…arm64-us-east-1c`: the start says which
    cluster, the end which pool, and MachineSet names differ at the end."""
    if len(name) <= keep:
        return name
    head = min(6, keep // 3)
    return f"{name[:head]}\u2026{name[len(name) - (keep - head - 1):]}"


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


def _display_name(d: BootImageDecision, one_namespace: bool) -> str:
    name = d.name or "<unnamed>"
    return name if one_namespace else f"{d.namespace}/{name}"


def _cell(value: str | None) -> str:
    return value if value else "-"


def _details(decisions: Sequence[BootImageDecision], width: int) -> list[str]:
    out: list[str] = []
    for d in decisions:
        theirs = d.manager != Manager.OURS
        if d.action not in (Action.SKIP, Action.ERROR) and not theirs:
            continue
        # Another manager's row says who acts and why: the daemon writes none of these.
        manager = f" (manager {d.manager}: {d.manager_why})" if theirs else ""
        out.extend(_wrap(f"{_display_name(d, False)}: {d.action} {d.reason}{manager}", width, "  ", "    "))
        out.extend(_wrap(d.message, width, "    ", "    "))
    return out


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=rest, break_long_words=False, break_on_hyphens=False
    ) or [first.rstrip()]


def summary_line(decisions: Sequence[BootImageDecision]) -> str:
    """`Plan: 2 to patch, ...; managed by bootimage-controller 3, mco 2` (every manager present)."""
    counts = Counter(d.action for d in decisions)
    line = "Plan: " + ", ".join(f"{counts.get(action, 0)} {words}" for action, words in _SUMMARY_WORDS)
    managers = Counter(str(d.manager) for d in decisions)
    if managers:
        line += "; managed by " + ", ".join(f"{m} {managers[m]}" for m in Manager if managers.get(m))
    return line


def skew_lines(skew: Mapping[str, Any] | None, width: int, colour: bool = False) -> list[str]:
    if skew is None:
        return ["Skew: not evaluated"]
    image = skew.get("clusterBootImage") or {}
    limit = skew.get("limit") or {}
    found = image.get("rhcosVersion") or image.get("ocpVersion")
    parts = [f"Skew: mode {skew.get('mode')}"]
    if found:
        parts.append(f"cluster boot image {found} (from {image.get('source')})")
    parts.append(f"limit OCP {limit.get('ocpVersion')} / RHEL {limit.get('rhelVersion')}")
    # `plan` judges files or a snapshot: it says what the daemon would make of them, not what holds.
    verdict = "upgrades would be allowed" if skew.get("upgradeable") else "upgrades would be HELD"
    head = ", ".join(parts) + f": {verdict} ({skew.get('reason')})"
    lines = _wrap(head, width, "", "  ")
    if colour and not skew.get("upgradeable"):
        lines = [line.replace("upgrades would be HELD", "\x1b[31;1mupgrades would be HELD\x1b[0m") for line in lines]
    if skew.get("message"):
        lines += _wrap(str(skew["message"]), width, "  ", "  ")
    if not skew.get("upgradeable"):
        lines += _wrap(
            "What to do: bootimage-controller's docs/runbooks.md, section BootImageSkewHoldsUpgrades", width, "  ", "  "
        )
    return lines


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


def write_patched(
    decisions: Iterable[BootImageDecision], objects: Mapping[ObjectKey, Mapping[str, Any]], out_dir: Path
) -> list[Path]:
    """Write `DIR/<namespace>_<name>.yaml` for every `patch` decision; returns the paths written."""
    patches = [d for d in decisions if d.action == Action.PATCH and d.changes]
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
