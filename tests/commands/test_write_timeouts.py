"""Every one-shot write command has `--timeout` (issue 47, item 5): against an API server that
accepts connections and never answers, each ends in about that long with one line naming the
server, instead of waiting until it is killed."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A listening socket nobody accepts from: the kernel completes each TCP handshake, the TLS
    handshake then waits for ever."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": f"https://{server}", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }))
    return path


@pytest.mark.parametrize("argv", [["rollback", "worker-a"], ["hand-over", "worker-a", "--yes"],
                                  ["hand-back", "worker-a"], ["release-claims"]],
                         ids=["rollback", "hand-over", "hand-back", "release-claims"])
def test_a_write_command_gives_up_after_its_timeout_naming_the_server(
    tmp_path: Path, silent_server: str, argv: list[str]
) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bootimage_controller", *argv, "--timeout", "2s",
                           "--kubeconfig", str(kubeconfig(tmp_path, silent_server))],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert elapsed < 30, f"{elapsed:.1f}s"
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and silent_server in errors[0] and "within 2s (--timeout)" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def dead_server() -> str:
    """A loopback port nothing listens on: every connection is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"127.0.0.1:{port}"


@pytest.mark.parametrize("argv", [["rollback", "worker-a"], ["hand-over", "worker-a", "--yes"],
                                  ["hand-back", "worker-a"], ["release-claims"], ["verify-boot", "worker-a"]],
                         ids=["rollback", "hand-over", "hand-back", "release-claims", "verify-boot"])
def test_a_command_that_cannot_reach_the_server_names_the_kubeconfig_context_and_server(
    tmp_path: Path, dead_server: str, argv: list[str]
) -> None:
    """Issue 47, item 5: "cannot reach the Kubernetes API server" said which one, as `plan` does."""
    config = kubeconfig(tmp_path, dead_server)
    done = subprocess.run([sys.executable, "-m", "bootimage_controller", *argv, "--kubeconfig", str(config)],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert f"kubeconfig {config}, context c, server https://{dead_server}: " in errors[0], errors[0]
    assert "Traceback" not in done.stderr
