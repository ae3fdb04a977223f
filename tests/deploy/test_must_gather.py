"""scripts/must-gather.sh collects what a bug report needs (issue 17), read-only, without Secrets."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE_OC = """#!/usr/bin/env bash
echo "$*" >> "$OC_CALLS"
if [ "$1" = "-n" ] && [ "$3" = "exec" ]; then echo '{"kind": "BootImagePlan", "machineSets": []}'; fi
if [ "$1 $2" = "adm inspect" ] && [[ "$*" == *nodes* ]]; then echo "no nodes here" >&2; exit 1; fi
"""


def test_it_inspects_our_objects_and_saves_the_plan_and_survives_a_failed_step(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "oc").write_text(FAKE_OC)
    (bin_dir / "oc").chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OC_CALLS": str(calls)}
    dest = tmp_path / "out"
    result = subprocess.run(["bash", str(REPO / "scripts" / "must-gather.sh"), str(dest)], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    made = calls.read_text()
    for wanted in ("lease/bootimage-controller", "clusteroperator.config.openshift.io/machine-config-bootimages",
                   "machineconfiguration.operator.openshift.io/cluster", "-n openshift-machine-api",
                   "-n openshift-cluster-api", "configmap/machineset-boot-image-controller", "events",
                   "configmap/coreos-bootimages", "plan --from-cluster -o json"):
        assert wanted in made, wanted
    assert "secret" not in made.lower()
    assert (dest / "plan.json").read_text().startswith('{"kind": "BootImagePlan"')
    assert "! failed" in (dest / "must-gather.log").read_text(), "the failed step is logged, the rest ran"
