"""docs/install.md uses the controller's exact names: an administrator greps for what it says."""

from __future__ import annotations

import re

from bootimage_controller.constants import (
    ACTIONABLE_SKIPS,
    ANNOTATION_BOOT_IMAGE_UPDATES,
    BOOT_IMAGE_UPDATES_DISABLED,
    CLAIM_FINALIZER,
    CLAIM_HOLDER_NAME,
    CO_AVAILABLE,
    CO_DEGRADED,
    CO_PROGRESSING,
    CO_UPGRADEABLE,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    DEFAULT_CLUSTER_OPERATOR,
    EVENT_FAILED,
    EVENT_HOT_LOOP,
    EVENT_SKIPPED,
    EVENT_UPDATED,
    LEASE_NAME,
    ConditionReason,
    Reason,
    SkewMode,
    SkewReason,
)

from .manifests import REPO

DOC = REPO / "docs" / "install.md"
CONDITION_TYPES = {
    CONDITION_PROGRESSING,
    CONDITION_DEGRADED,
    CO_AVAILABLE,
    CO_PROGRESSING,
    CO_DEGRADED,
    CO_UPGRADEABLE,
}
KNOWN_REASONS = {str(r) for enum in (Reason, ConditionReason, SkewReason) for r in enum}


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_condition_reason_event_and_actionable_skip_is_documented() -> None:
    text = DOC.read_text()
    names = {
        *CONDITION_TYPES,
        *(str(r) for r in ConditionReason),
        *(str(r) for r in SkewReason),
        *(str(r) for r in ACTIONABLE_SKIPS),
        *(str(m) for m in SkewMode),
        EVENT_UPDATED,
        EVENT_SKIPPED,
        EVENT_FAILED,
        EVENT_HOT_LOOP,
        CLAIM_HOLDER_NAME,
        CLAIM_FINALIZER,
        LEASE_NAME,
        DEFAULT_CLUSTER_OPERATOR,
        ANNOTATION_BOOT_IMAGE_UPDATES,
        BOOT_IMAGE_UPDATES_DISABLED,
    }
    missing = sorted(n for n in names if f"`{n}" not in text and f"{n}`" not in text)
    assert missing == []


def test_the_troubleshooting_tables_name_only_real_conditions_and_reasons() -> None:
    section = _section(DOC.read_text(), "Troubleshooting")
    unknown = []
    for row in (line for line in section.splitlines() if line.startswith("| `")):
        cells = row.split("|")[1:-1]
        # Condition tables: condition, reason, meaning, action. The reasons table: reason, action.
        first_cells = "|".join(cells[:2] if len(cells) >= 4 else cells[:1])
        for token in re.findall(r"`([^`]+)`", first_cells):
            name = token.split("=")[0]
            if name not in CONDITION_TYPES | KNOWN_REASONS:
                unknown.append(token)
    assert unknown == []
    assert section.count("| `") >= 20, "the tables were not found"


def test_uninstall_releases_claims_before_deleting_anything() -> None:
    section = _section(DOC.read_text(), "Uninstall")
    release = section.index("release-claims-job.yaml")
    assert section.index("--replicas=0") < release
    assert release < section.index("oc delete -k manifests/")
    assert release < section.index(f"delete configmap {CLAIM_HOLDER_NAME}")
    assert f"delete clusteroperator {DEFAULT_CLUSTER_OPERATOR}" in section
