"""No traceback where a message belongs (issue 14, item 5): a missing, malformed or unreachable
kubeconfig gives every subcommand one line naming the file or server, and exit code 1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

COMMANDS = {
    "rollback": ["rollback", "worker-a"],
    "release-claims": ["release-claims"],
    "aleph-report": ["aleph-report", "--node-name", "n", "--once"],
    "plan": ["plan", "--from-cluster"],
    "run --once": ["run", "--once", "--no-leader-elect", "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"],
}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens there


def kubeconfigs(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (kubeconfig, what the one line must say)."""
    malformed = tmp / "malformed"
    malformed.write_text("apiVersion: v1\nkind: Config\nclusters: [\n")
    port = closed_port()
    unreachable = tmp / "unreachable"
    unreachable.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: not-a-real-token}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return {
        "missing": (tmp / "missing", "no such file"),
        "malformed": (malformed, "not a usable kubeconfig"),
        "unreachable": (unreachable, f"127.0.0.1:{port}"),
    }


@pytest.mark.parametrize("kind", ["missing", "malformed", "unreachable"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_kubeconfig_problems_are_one_line_and_exit_1(command: str, kind: str, tmp_path: Path) -> None:
    if command == "aleph-report" and kind == "unreachable":
        pytest.skip("aleph-report reads its aleph file first; without one it exits 1 before any request")
    kubeconfig, says = kubeconfigs(tmp_path)[kind]
    env = {**os.environ, "POD_NAMESPACE": "openshift-machine-config-operator"}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    done = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", *COMMANDS[command], "--kubeconfig", str(kubeconfig)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=90, check=False,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert says in done.stderr + done.stdout, done.stderr[-2000:]
    # Every command, `run --once` included (issue 24), says it in exactly one `error:` line.
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], done.stderr
