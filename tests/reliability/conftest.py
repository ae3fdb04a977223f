"""Prints what each reliability scenario injected and how it ended (pasted into docs/reliability.md).

`RELIABILITY_REPORT=path.json` also writes the same numbers as JSON.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .scenario import REPORTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORTS:
        return
    terminalreporter.section("reliability: injected faults and outcomes")
    for report in REPORTS:
        terminalreporter.write_line(report.line())
    target = os.environ.get("RELIABILITY_REPORT")
    if target:
        Path(target).write_text(json.dumps([asdict(r) for r in REPORTS], indent=2, default=str) + "\n")
