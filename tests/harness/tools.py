"""Command-line tools the tests drive (promtool, Chromium), found on PATH or installed by the
project's own script under hack/. In CI a missing tool is a failure (the script has to work
there); elsewhere the test is skipped and says why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def tool(script: str, *, names: tuple[str, ...] = (), timeout: float = 300) -> str:
    """The path of a tool: the first of `names` on PATH, else what `hack/<script>` prints last."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    try:
        done = subprocess.run(["bash", str(REPO / "hack" / script)], capture_output=True, text=True,
                              timeout=timeout, check=True)
    except (subprocess.CalledProcessError, OSError) as exc:
        if os.environ.get("CI"):
            raise  # CI must run these: hack/<script> has to work there
        pytest.skip(f"not available (hack/{script}: {exc})")
    return done.stdout.strip().splitlines()[-1]
