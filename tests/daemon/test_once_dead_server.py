"""`run --once` against an API server that does not answer: one `error:` line, exit 1, nothing
started first (issue 33: it printed a log line per informer and lookup, 59 in all, before it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.objects import plain_kubeconfig

REPO = Path(__file__).resolve().parents[2]


def test_run_once_against_a_dead_server_says_it_in_one_line(tmp_path: Path) -> None:
    kubeconfig = plain_kubeconfig(tmp_path, "http://127.0.0.1:9")
    done = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", "run", "--once", "--kubeconfig", str(kubeconfig),
         "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-format", "json"],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    # The kubeconfig, its context and the server, as every command says them (issue 47, item 5).
    assert errors == [lines[-1]] and f"error: kubeconfig {kubeconfig}, context " in errors[0]
    assert "server http://127.0.0.1:9: cannot reach the Kubernetes API server" in errors[0]
    assert "wrote nothing" in errors[0]
    # Only the retries of that one question come first: no informer, no lookup, no server started.
    assert all('"get /version"' in line for line in lines[:-1]), lines
