"""govmomi's vCenter simulator on loopback for the vSphere tests (issue 15).

The binary is built by `hack/vcsim/build.sh` from Debian's golang-go and
golang-github-vmware-govmomi-dev (installed by the script when missing; about 15 seconds to build)
into `~/.cache/bootimage-controller/vcsim-<digest of main.go and build.sh>`, like the kube binaries.
Each test gets a fresh simulator (about a second to start): inventory DC0 / cluster DC0_C0 / host
DC0_C0_H0 / datastore LocalDS_0 / network "VM Network", one user `user` / `pass`, TLS with the
simulator's own certificate (the tests pass `--vsphere-insecure`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import select
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from .cluster import REPO_ROOT, _cache_lock, _die_with_parent_hook

VCSIM_DIR: Final = REPO_ROOT / "hack" / "vcsim"
USERNAME: Final = "user"
PASSWORD: Final = "pass"


class VcsimUnavailable(RuntimeError):
    """The simulator could not be built or started."""


def _cache_key() -> str:
    digest = hashlib.sha256()
    for name in ("main.go", "build.sh"):
        digest.update((VCSIM_DIR / name).read_bytes())
    return digest.hexdigest()[:12]


def binary_path() -> Path:
    base = Path(os.environ.get("BOOTIMAGE_TEST_CACHE_ROOT") or Path.home() / ".cache" / "bootimage-controller")
    return base / f"vcsim-{_cache_key()}" / "vcsim"


def locate_vcsim() -> Path:
    """The cached simulator, built first when missing."""
    path = binary_path()
    if path.is_file() and os.access(path, os.X_OK):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _cache_lock(path.parent):
        if not path.is_file():
            result = subprocess.run(["bash", str(VCSIM_DIR / "build.sh"), str(path)], capture_output=True, text=True)
            if result.returncode != 0 or not path.is_file():
                raise VcsimUnavailable(f"building vcsim failed:\n{result.stderr[-3000:]}")
    return path


@dataclass(frozen=True)
class Vcsim:
    url: str  # https://user:pass@127.0.0.1:PORT/sdk
    host: str
    port: int
    log: Path

    @property
    def server(self) -> str:
        return self.host


# OpenShift's Infrastructure accepts a vCenter port up to 32767 (openshift/api, the test CRD too):
# vcsim listens below it, where the kernel's ephemeral range (32768 and up) does not hand it out.
PORTS = range(20000, 32768)


def _free_port() -> int:
    for _ in range(50):
        port = random.choice(PORTS)
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise VcsimUnavailable("no free port below 32768 for vcsim")


@contextlib.contextmanager
def running_vcsim(workdir: Path) -> Iterator[Vcsim]:
    binary = locate_vcsim()
    log = workdir / "vcsim.log"
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            [str(binary), "-username", USERNAME, "-password", PASSWORD, "-listen", f"127.0.0.1:{_free_port()}"],
            stdout=subprocess.PIPE,
            stderr=errors,
            preexec_fn=_die_with_parent_hook(),
        )
    assert proc.stdout is not None
    try:
        deadline = time.monotonic() + 30
        line = b""
        while time.monotonic() < deadline and not line.endswith(b"\n"):
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                line += chunk
        text = line.decode().strip()
        if not text.startswith("URL "):
            raise VcsimUnavailable(f"vcsim did not start: {text!r}; {log.read_text()[-2000:]}")
        url = text.split(" ", 1)[1]
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        yield Vcsim(url, parts.hostname, parts.port, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
