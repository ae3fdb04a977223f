"""The real Machine Config Operator boot image controller (../shared/tools/mco), run beside the daemon.

An unmodified build of openshift/machine-config-operator 7ff337a's `pkg/controller/bootimage`, with
openshift/api's real CRDs. This module finds and unpacks it (sha256 checked, cached), plays the part
of the MCO operator that the binary lacks (MachineConfiguration status, written once and again when
the spec changes, as the operator copies it), and runs it as its own process with its own user
(`machine-config-controller`), so managedFields and the audit log tell its writes from the daemon's.
Where ../shared is absent, `require_real_mco` skips with the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import lzma
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from .cluster import SHARED_TOOLS, TestCluster, cache_dir

MCO_DIR: Final = SHARED_TOOLS / "mco"
MCO_COMMIT: Final = "7ff337a"
MCO_XZ: Final = MCO_DIR / f"mco-bootimage-controller-{MCO_COMMIT}-linux-amd64.xz"
MCO_CRDS: Final = MCO_DIR / "crds"
# ../shared/tools/mco/README.md
MCO_SHA256: Final = "8a6ab81319c4e889d500c0f672e8f44e226299763aa37eac1e199e81dc11fd3b"
MCO_USER: Final = "machine-config-controller"


def require_real_mco() -> Path:
    """The unpacked binary; skips (reason printed) where ../shared/tools/mco is not beside the repo."""
    if not MCO_XZ.is_file() or not MCO_CRDS.is_dir():
        pytest.skip(f"the real MCO controller is not here ({MCO_XZ} and {MCO_CRDS} come with ../shared)")
    target = cache_dir() / f"mco-bootimage-controller-{MCO_COMMIT}"
    if target.is_file() and _sha256(target) == MCO_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with lzma.open(MCO_XZ) as src, open(tmp, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    if _sha256(tmp) != MCO_SHA256:
        tmp.unlink()
        raise AssertionError(f"{MCO_XZ}: sha256 differs from {MCO_SHA256} (../shared/tools/mco/README.md)")
    tmp.chmod(0o755)
    tmp.rename(target)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def printed(binary: Path, *flags: str) -> Any:
    """What `--print-featuregate-status 4.22.0` / `--print-node-disruption-status` print (JSON)."""
    out = subprocess.run([str(binary), *flags], check=True, capture_output=True, text=True, timeout=30).stdout
    return json.loads(out)


def operator_status(mc: dict[str, Any], node_disruption: Any, install_version: str) -> dict[str, Any]:
    """MachineConfiguration `status` as the MCO operator writes it from `mc`'s spec: its enrollment
    (the spec's, else All MachineSets), its skew setting (Manual/None as the spec says, else
    Automatic at the install version), `observedGeneration`, and the node disruption policy status
    without which the CRD refuses the controller's own status writes."""
    spec = mc.get("spec") or {}
    managers = (spec.get("managedBootImages") or {}).get("machineManagers")
    if managers is None:
        managers = [{"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]
    skew = spec.get("bootImageSkewEnforcement") or {}
    if skew.get("mode") == "Manual":
        skew_status: dict[str, Any] = {"mode": "Manual", "manual": skew["manual"], "automatic": None}
    elif skew.get("mode") == "None":
        skew_status = {"mode": "None", "automatic": None}
    else:
        skew_status = {"mode": "Automatic", "automatic": {"ocpVersion": install_version}}
    return {
        "observedGeneration": mc["metadata"]["generation"],
        "managedBootImagesStatus": {"machineManagers": managers},
        "bootImageSkewEnforcementStatus": skew_status,
        "nodeDisruptionPolicyStatus": node_disruption,
    }


@contextlib.contextmanager
def running_real_mco(binary: Path, cluster: TestCluster, ec2_url: str, log_path: Path,
                     resync: str = "20s") -> Iterator[subprocess.Popen[bytes]]:
    """The controller as its own process and user, EC2 served by moto through its loopback redirect."""
    argv = [str(binary), "--kubeconfig", str(cluster.kubeconfig_for(MCO_USER)), "--aws-ec2-redirect", ec2_url,
            "--resync", resync, "-v", "2"]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


__all__ = ["MCO_CRDS", "MCO_USER", "operator_status", "printed", "require_real_mco", "running_real_mco"]
