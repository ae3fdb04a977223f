"""The shipped alerts (manifests/prometheusrule.yaml) under `promtool test rules`, on series shaped
like the ones the daemon exports, and every metric they use is one the daemon registers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.tools import tool

from bootimage_controller import observability as obs
from bootimage_controller.constants import DOCS_BASE_URL

from .manifests import MANIFESTS, REPO

RULES = MANIFESTS / "prometheusrule.yaml"
NS = "openshift-machine-config-operator"


def promtool() -> str:
    return tool("install-promtool.sh", names=("promtool",))


def rules() -> dict[str, dict[str, Any]]:
    """The alerting rules by name (the recording rules are `recordings()`)."""
    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r for g in doc["spec"]["groups"] for r in g["rules"] if "alert" in r}


def recordings() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["record"]: r for g in doc["spec"]["groups"] for r in g["rules"] if "record" in r}


def annotations(alert: str, value: str) -> dict[str, str]:
    """The alert's annotations as Prometheus renders them for `value` (the templates used here)."""
    out = {}
    for key, text in rules()[alert]["annotations"].items():
        text = re.sub(r"\{\{ \$value( \| humanize)? \}\}", value, text)
        out[key] = text.strip()
    return out


def fires(alert: str, labels: dict[str, str], value: str = "") -> dict[str, Any]:
    return {"exp_labels": {"severity": "warning", **labels}, "exp_annotations": annotations(alert, value)}


def series(metric: str, values: str, **labels: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{text}}}", "values": values}


CASES: dict[str, dict[str, Any]] = {
    "skew: only the leader's gauge counts": {
        "input_series": [
            series("bootimage_controller_skew_upgradeable", "0x40", namespace=NS, pod="leader"),
            series("bootimage_controller_leader", "1x40", namespace=NS, pod="leader"),
            # a follower exports the gauge's default 0: not the cluster's state
            series("bootimage_controller_skew_upgradeable", "0x40", namespace=NS, pod="follower"),
            series("bootimage_controller_leader", "0x40", namespace=NS, pod="follower"),
        ],
        "alert_rule_test": [
            {"eval_time": "10m", "alertname": "BootImageSkewHoldsUpgrades", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "BootImageSkewHoldsUpgrades",
             "exp_alerts": [fires("BootImageSkewHoldsUpgrades", {"namespace": NS, "pod": "leader"})]},
        ],
    },
    "skew: upgradeable again ends it": {
        "input_series": [
            series("bootimage_controller_skew_upgradeable", "0x20 1x20", namespace=NS, pod="leader"),
            series("bootimage_controller_leader", "1x40", namespace=NS, pod="leader"),
        ],
        "alert_rule_test": [{"eval_time": "30m", "alertname": "BootImageSkewHoldsUpgrades", "exp_alerts": []}],
    },
    "degraded MachineSets, and a hot loop": {
        "input_series": [
            series("bootimage_controller_machinesets", "2x40", namespace=NS, pod="leader", action="error", reason="PatchFailed"),
            series("bootimage_controller_machinesets", "1x40", namespace=NS, pod="leader", action="error", reason="HotLoop"),
            series("bootimage_controller_machinesets", "40x40", namespace=NS, pod="leader", action="noop", reason="UpToDate"),
        ],
        "alert_rule_test": [
            {"eval_time": "3m", "alertname": "BootImageHotLoop", "exp_alerts": []},
            {"eval_time": "6m", "alertname": "BootImageHotLoop",
             "exp_alerts": [fires("BootImageHotLoop", {"namespace": NS}, "1")]},
            {"eval_time": "20m", "alertname": "BootImageMachineSetsDegraded", "exp_alerts": []},
            {"eval_time": "35m", "alertname": "BootImageMachineSetsDegraded",
             "exp_alerts": [fires("BootImageMachineSetsDegraded", {"namespace": NS}, "3")]},
        ],
    },
    "403s rising": {
        "input_series": [
            series("bootimage_controller_api_requests_total", "0+1x60", namespace=NS, pod="leader", verb="patch",
                   resource="machinesets", code="403"),
            series("bootimage_controller_api_requests_total", "0+50x60", namespace=NS, pod="leader", verb="get",
                   resource="machinesets", code="200"),
        ],
        "alert_rule_test": [
            {"eval_time": "10m", "alertname": "BootImageControllerForbidden", "exp_alerts": []},
            {"eval_time": "40m", "alertname": "BootImageControllerForbidden",
             "exp_alerts": [fires("BootImageControllerForbidden", {"namespace": NS}, "15")]},
        ],
    },
    "no replica up, then none leading": {
        "input_series": [
            series("up", "0x40", job="bootimage-controller-metrics", namespace=NS, pod="a"),
            series("bootimage_controller_leader", "0x40", namespace=NS, pod="b"),
            series("bootimage_controller_leader", "0x40", namespace=NS, pod="c"),
        ],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "BootImageControllerDown",
             "exp_alerts": [fires("BootImageControllerDown", {"job": "bootimage-controller-metrics", "namespace": NS})]},
            {"eval_time": "20m", "alertname": "BootImageControllerNotLeading",
             "exp_alerts": [fires("BootImageControllerNotLeading", {"namespace": NS})]},
        ],
    },
    "no target at all": {
        "input_series": [series("bootimage_controller_leader", "1x40", namespace=NS, pod="elsewhere")],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "BootImageControllerDown",
             "exp_alerts": [fires("BootImageControllerDown", {"job": "bootimage-controller-metrics", "namespace": NS})]},
        ],
    },
    "a pool 6 minor releases behind, on the leader only; the fleet series per cluster": {
        "input_series": [
            series("bootimage_controller_machineset_boot_image_releases_behind", "6x90", namespace=NS, pod="leader",
                   exported_namespace="openshift-machine-api", name="old-workers", kind="MachineSet"),
            series("bootimage_controller_machineset_boot_image_releases_behind", "2x90", namespace=NS, pod="leader",
                   exported_namespace="openshift-machine-api", name="fresh-workers", kind="MachineSet"),
            # a follower's stale view of the same pool is not the cluster's state
            series("bootimage_controller_machineset_boot_image_releases_behind", "9x90", namespace=NS, pod="follower",
                   exported_namespace="openshift-machine-api", name="older", kind="MachineSet"),
            series("bootimage_controller_machineset_boot_image_age_seconds", "78624000x90", namespace=NS, pod="leader",
                   exported_namespace="openshift-machine-api", name="old-workers", kind="MachineSet"),
            series("bootimage_controller_machineset_boot_image_age_seconds", "86400x90", namespace=NS, pod="leader",
                   exported_namespace="openshift-machine-api", name="fresh-workers", kind="MachineSet"),
            series("bootimage_controller_machineset_boot_image_age_seconds", "99999999x90", namespace=NS, pod="follower",
                   exported_namespace="openshift-machine-api", name="older", kind="MachineSet"),
            series("bootimage_controller_leader", "1x90", namespace=NS, pod="leader"),
            series("bootimage_controller_leader", "0x90", namespace=NS, pod="follower"),
        ],
        "alert_rule_test": [
            {"eval_time": "50m", "alertname": "BootImageReleasesBehind", "exp_alerts": []},
            {"eval_time": "70m", "alertname": "BootImageReleasesBehind", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": NS, "pod": "leader",
                               "exported_namespace": "openshift-machine-api", "name": "old-workers",
                               "kind": "MachineSet"},
                "exp_annotations": {
                    "summary": "A pool boots an image 6 OpenShift minor releases older than the golden one.",
                    "description": ("MachineSet openshift-machine-api/old-workers boots a boot image 6 minor releases "
                                    "behind the one the release ships. New nodes take longer to join, and past the "
                                    "skew limit upgrades are held."),
                    "runbook_url": f"{DOCS_BASE_URL}/runbooks.md#bootimagereleasesbehind",
                }}]},
        ],
        "promql_expr_test": [
            {"expr": "cluster:bootimage_controller_oldest_boot_image_age_seconds:max", "eval_time": "10m",
             "exp_samples": [{"labels": "cluster:bootimage_controller_oldest_boot_image_age_seconds:max",
                              "value": 78624000}]},
            {"expr": "cluster:bootimage_controller_boot_image_releases_behind:max", "eval_time": "10m",
             "exp_samples": [{"labels": "cluster:bootimage_controller_boot_image_releases_behind:max", "value": 6}]},
        ],
    },
    "a boot image that failed its first boot, on the leader only": {
        "input_series": [
            series("bootimage_controller_boot_image_verified", "-1x20", namespace=NS, pod="leader",
                   exported_namespace="openshift-machine-api", name="gpu", kind="MachineSet"),
            series("bootimage_controller_boot_image_verified", "1x20", namespace=NS, pod="leader",
                   exported_namespace="openshift-machine-api", name="workers", kind="MachineSet"),
            series("bootimage_controller_boot_image_verified", "0x20", namespace=NS, pod="leader",
                   exported_namespace="openshift-machine-api", name="infra", kind="MachineSet"),
            # a follower's stale view is not the cluster's state
            series("bootimage_controller_boot_image_verified", "-1x20", namespace=NS, pod="follower",
                   exported_namespace="openshift-machine-api", name="workers", kind="MachineSet"),
            series("bootimage_controller_leader", "1x20", namespace=NS, pod="leader"),
            series("bootimage_controller_leader", "0x20", namespace=NS, pod="follower"),
        ],
        "alert_rule_test": [
            {"eval_time": "2m", "alertname": "BootImageFirstBootFailed", "exp_alerts": [{
                "exp_labels": {"severity": "warning", "namespace": NS, "pod": "leader",
                               "exported_namespace": "openshift-machine-api", "name": "gpu", "kind": "MachineSet"},
                "exp_annotations": {
                    "summary": "A boot image failed its first boot: MachineSet gpu cannot scale up from it.",
                    "description": ("A Machine of MachineSet openshift-machine-api/gpu created from a boot image never "
                                    "joined (or the cloud refused the image). bootimage-controller rolled back what it "
                                    "wrote; an image another writer put there is reported with the fix (Event "
                                    "BootImageFirstBootFailed on the MachineSet)."),
                    "runbook_url": f"{DOCS_BASE_URL}/runbooks.md#bootimagefirstbootfailed",
                }}]},
        ],
    },
    "a leader and an up replica: quiet": {
        "input_series": [
            series("up", "1x40", job="bootimage-controller-metrics", namespace=NS, pod="a"),
            series("bootimage_controller_leader", "1x40", namespace=NS, pod="a"),
            series("bootimage_controller_leader", "0x40", namespace=NS, pod="b"),
        ],
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": "BootImageControllerDown", "exp_alerts": []},
            {"eval_time": "30m", "alertname": "BootImageControllerNotLeading", "exp_alerts": []},
        ],
    },
}


@pytest.mark.parametrize("case", list(CASES))
def test_alert_rules_fire_as_the_runbooks_say(case: str, tmp_path: Path) -> None:
    doc = yaml.safe_load(RULES.read_text())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{"interval": "1m", **CASES[case]}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run([promtool(), "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_runbook_section() -> None:
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    for name, rule in rules().items():
        assert f"\n## {name}\n" in runbooks, name
        # A link that works where the alert is read (the project's docs, DOCS_BASE_URL), to its section.
        assert rule["annotations"]["runbook_url"] == f"{DOCS_BASE_URL}/runbooks.md#{name.lower()}"


def test_the_rules_use_only_metrics_the_daemon_exports() -> None:
    families = list(obs.REGISTRY.collect())
    # A counter's family is named without `_total`; its series (none yet, when no request was made) have it.
    exported = {m.name + ("_total" if m.type == "counter" else "") for m in families} | {m.name for m in families}
    used = set()
    for rule in [*rules().values(), *recordings().values()]:
        used |= set(re.findall(r"(?<![:\w])(bootimage_controller_[a-z_]+)", rule["expr"]))
    assert used and used <= exported, used - exported


def test_the_acm_allowlist_names_exported_or_recorded_series_only() -> None:
    doc = yaml.safe_load((MANIFESTS / "optional" / "acm-metrics-allowlist.yaml").read_text())
    assert doc["metadata"] == {"name": "observability-metrics-custom-allowlist",
                               "namespace": "open-cluster-management-observability",
                               "labels": {"app.kubernetes.io/name": "bootimage-controller"}}
    names = yaml.safe_load(doc["data"]["metrics_list.yaml"])["names"]
    exported = {m.name + ("_total" if m.type == "counter" else "") for m in obs.REGISTRY.collect()}
    exported |= {m.name for m in obs.REGISTRY.collect()} | {f"{m.name}_info" for m in obs.REGISTRY.collect()}
    assert set(names) <= exported | set(recordings()), set(names) - exported - set(recordings())
    assert "bootimage_controller_machineset_boot_image_info" in names
