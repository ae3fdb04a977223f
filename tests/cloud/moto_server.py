"""Run moto's ThreadedMotoServer in its own process (MOTO_AMIS_PATH must be set before moto loads).

Prints the port on the first stdout line, then serves until stdin closes.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def main() -> None:
    if "MOTO_AMIS_PATH" not in os.environ:
        raise SystemExit("MOTO_AMIS_PATH is not set")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _host, port = server.get_host_and_port()
    print(port, flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()


@contextlib.contextmanager
def running_moto(amis: list[dict[str, Any]], workdir: Path, log: Path | None = None) -> Iterator[str]:
    """moto's server in a process of its own, serving `amis` (MOTO_AMIS_PATH); yields its URL.
    `log`: where its request lines go (default: this process's stderr)."""
    path = workdir / "amis.json"
    path.write_text(json.dumps(amis))
    stderr = log.open("wb") if log is not None else None
    proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            env={**os.environ, "MOTO_AMIS_PATH": str(path)}, text=True)
    if stderr is not None:
        stderr.close()  # the child has its own copy
    assert proc.stdout is not None and proc.stdin is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        port = proc.stdout.readline().strip() if ready else ""
        assert port.isdigit(), f"moto did not start: {port!r}"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(10)


def point_boto3_at(url: str, workdir: Path, monkeypatch: Any) -> None:
    """boto3 (the daemon's, in this process) at moto only: nothing from the host's AWS setup."""
    for var in [v for v in os.environ if v.startswith("AWS_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)  # boto3's own endpoint override (SPEC section 4)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(workdir / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(workdir / "none"))


if __name__ == "__main__":
    main()
