"""`plan`'s table on a real terminal of 80, 100, 120 and 200 columns (issue 27, item 4; issue 33, item 3).

A pseudo-terminal of that size (its window size set with TIOCSWINSZ, no COLUMNS in the
environment), the bundled example cluster. What must hold at every width: every line fits; every
row can be told apart (a name shortened keeps what differs, the prefix it lost is printed once); the
ControlPlaneMachineSet is marked as one; CURRENT and TARGET are in one scheme per row (OpenShift
releases, where the RHCOS builds of two numbering schemes could not be compared by eye); no internal
word (an enum of the JSON output) reaches the reader.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "aws-4.16-cluster"
INTERNAL_WORDS = ("BundledIndex", "MachineSetRecord", "GoldenData", "InstallVersion", "NotOurs")
FULL_NAMES = {
    "cluster",
    *(f"prod-east-8h2kq-worker-{pool}" for pool in ("arm64-us-east-1c", "custom-us-east-1b", "encrypted-us-east-1c",
                                                    "rhel10-us-east-1a", "us-east-1a", "us-east-1b")),
}


def plan_on_terminal(columns: int) -> list[str]:
    """`plan` with its output on a pseudo-terminal `columns` wide (sized before it starts)."""
    return on_terminal(columns, "plan", str(EXAMPLE))


def on_terminal(columns: int, *argv: str) -> list[str]:
    """A command with its output on a pseudo-terminal `columns` wide (sized before it starts)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm", NO_COLOR="1")
    child = subprocess.Popen([sys.executable, "-m", "bootimage_controller", *argv],
                             stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        child.wait(60)
        os.close(master)
    return [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip("\r") for line in out.decode(errors="replace").splitlines()]


@pytest.mark.parametrize("columns", [80, 100, 120, 200])
def test_the_table_reads_well_at_every_width(columns: int) -> None:
    lines = plan_on_terminal(columns)
    said: dict[str, str] = {}
    if lines[0].startswith("(") and " = " in lines[0]:  # the shared prefix, MANAGER's short forms
        said = dict(part.split(" = ", 1) for part in lines[0].strip("()").split("; "))
        lines = lines[1:]
    prefix = said.get("\u2026", "")
    header, rows = lines[0].split(), [line.split() for line in lines[1: lines.index("")]]
    table = lines[: lines.index("")]
    assert all(len(line) <= columns for line in table), table
    assert len(rows) == len(FULL_NAMES)
    # Every row names exactly one MachineSet: a leading ellipsis stands for the prefix printed above
    # the table; a name cut further keeps an end that only one MachineSet has.
    shown = [r[0] for r in rows]
    for name in shown:
        whole = prefix + name[1:] if name.startswith("\u2026") else name
        if whole not in FULL_NAMES:
            tail = name.split("\u2026")[-1]
            assert sum(f.endswith(tail) for f in FULL_NAMES) == 1, (name, shown)
    assert len(set(shown)) == len(shown), shown
    # The ControlPlaneMachineSet is marked.
    kind = header.index("KIND")
    assert {r[0]: r[kind] for r in rows}["cluster"] == "CPMS"
    assert {r[kind] for r in rows if r[0] != "cluster"} == {"MS"}
    # Who updates each MachineSet stays at every width (issue 33): short forms said above the table.
    manager = header.index("MANAGER")
    assert {said.get(r[manager], r[manager]) for r in rows} == {"mco", "bootimage-controller", "nobody"}
    # The ControlPlaneMachineSet left out of enrollment is nobody's, not this controller's (issue 47).
    assert {r[0]: said.get(r[manager], r[manager]) for r in rows}["cluster"] == "nobody"
    # Every name whole: nothing that tells rows apart is cut while another column can go (issue 33).
    assert {prefix + r[0][1:] if r[0].startswith("\u2026") else r[0] for r in rows} == FULL_NAMES
    # One scheme per row: OpenShift releases on both sides (4.16 -> 4.22); at 80 columns they give
    # way to the whole names (Next writes says 4.16 -> 4.22 per MachineSet).
    if columns >= 100:
        current, target = header.index("CURRENT"), header.index("TARGET")
        for r in rows:
            assert all(re.fullmatch(r"4\.\d+|-", r[i]) for i in (current, target)), r
        assert {(r[current], r[target]) for r in rows} >= {("4.16", "4.22")}
    text = "\n".join(lines)
    for word in INTERNAL_WORDS:
        assert word not in text, word
    if columns >= 200:
        assert "CURRENT-RHCOS" in header and "416.94.202405291527-0" in text

    # Every line of the report fits, summaries wrapped; only a lone token (a URL, a path) may not.
    for line in lines:
        assert len(line) <= columns or " " not in line.strip(), line


@pytest.mark.parametrize("columns", [80, 100, 120, 200])
def test_the_fleet_table_keeps_the_note_at_every_width(columns: int, tmp_path: Path) -> None:
    """fleet at 80 columns once dropped NOTE (the error, who holds the upgrade): now it goes under the row."""
    trees = [tmp_path / "no-such-must-gather-with-a-long-name", EXAMPLE]
    lines = on_terminal(columns, "fleet", *map(str, trees))
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("CLUSTER")):]  # after the progress
    for line in lines:
        assert len(line) <= columns or " " not in line.strip(), line
    text = " ".join(line.strip() for line in lines)
    assert "no such file or folder" in text  # the missing path's NOTE, wrapped under its row if need be
    assert "next upgrade held by" in text  # the example cluster's held upgrade, and by which pools
    assert "aws-4.16-cluster" in text and "no-such-must-gather-with-a-long-name" in text


@pytest.mark.parametrize("columns", [80, 100, 120, 200])
def test_columns_go_by_meaning_stream_and_arch_stay_when_they_differ(columns: int) -> None:
    """Issue 47, item 2: what is the same on every row goes first and is said once above the table;
    ARCH and STREAM, which differ between the example's pools (an arm64 pool, a rhel-10 pool: the
    difference the skew hold is about), stay at every width; REASON (in Details for every skip)
    goes before the releases."""
    lines = plan_on_terminal(columns)
    said = dict(part.split(" = ", 1) for part in lines[0].strip("()").split("; ")) if lines[0].startswith("(") else {}
    header = lines[1 if said else 0].split()
    assert "ARCH" in header and "STREAM" in header, header
    assert "PLATFORM" not in header and said["PLATFORM"] == "AWS", (header, said)
    assert ("CURRENT" in header) == (columns >= 100), header
    assert ("REASON" in header) == (columns >= 120), header
    rows = lines[(2 if said else 1): lines.index("")]
    stream = header.index("STREAM")
    assert {r.split()[stream] for r in rows} == {"-", "rhel-9", "rhel-10"}
