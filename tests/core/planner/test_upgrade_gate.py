"""The upgrade gate as a pure function of the ClusterVersion (SPEC section 3)."""

from __future__ import annotations

from typing import Any

from harness.objects import cluster_version

from bootimage_controller.core.cluster import upgrade_blocker


def test_a_completed_and_settled_clusterversion_opens_the_gate() -> None:
    assert upgrade_blocker(cluster_version()) is None


def test_a_missing_clusterversion_is_unknown_and_closes_the_gate() -> None:
    assert "not found" in (upgrade_blocker(None) or "")


def test_no_history_closes_the_gate() -> None:
    cv: dict[str, Any] = cluster_version()
    cv["status"]["history"] = []
    assert "no status.history" in (upgrade_blocker(cv) or "")
    cv["status"] = "garbage"
    assert "no status.history" in (upgrade_blocker(cv) or "")


def test_a_partial_newest_entry_closes_the_gate_whatever_desired_says() -> None:
    cv = cluster_version()
    cv["status"]["history"][0]["state"] = "Partial"
    assert cv["status"]["desired"]["version"] == cv["status"]["history"][0]["version"]
    assert "history[0] is Partial for version 4.22.0" in (upgrade_blocker(cv) or "")


def test_progressing_true_closes_the_gate_even_with_completed_history() -> None:
    cv = cluster_version()
    progressing = next(c for c in cv["status"]["conditions"] if c["type"] == "Progressing")
    progressing.update(status="True", message="Working towards 4.22.1")
    assert "Progressing (Working towards 4.22.1)" in (upgrade_blocker(cv) or "")
