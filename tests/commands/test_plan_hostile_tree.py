"""`plan` on a hostile tree (issue 14, item 4): special files, device symlinks, links out of the
tree and oversized files are skipped and said, never read; ordinary must-gather symlinks work."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bootimage_controller.plan import inputs as plan_inputs

from .conftest import EXAMPLE, ROOT, Run


def plan_json(run: Run, *paths: Path) -> tuple[dict[str, object], str]:
    result = run("plan", *paths, "-o", "json")
    assert result.code == 0, result.err
    return result.json(), result.err


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    dest = tmp_path / "must-gather"
    shutil.copytree(EXAMPLE, dest)
    return dest


def test_device_symlinks_are_skipped_and_said(run: Run, tree: Path) -> None:
    (tree / "zero.yaml").symlink_to("/dev/zero")
    (tree / "random.json").symlink_to("/dev/urandom")
    plan, err = plan_json(run, tree)
    assert plan == plan_json(run, EXAMPLE)[0]
    assert "zero.yaml" in err and "random.json" in err and "skipped" in err


def test_a_fifo_never_blocks(tree: Path) -> None:
    os.mkfifo(tree / "x.yaml")  # no writer: a plain open() would wait forever
    done = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", "plan", str(tree), "-o", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "x.yaml" in done.stderr and "not a regular file" in done.stderr


def test_symlinks_are_followed_only_inside_the_tree(run: Run, tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    shutil.copy(next(tree.rglob("machinesets/*.yaml")), outside)
    (tree / "escape.yaml").symlink_to(outside)
    plan, err = plan_json(run, tree)
    assert "escape.yaml" in err and "out of the tree" in err
    assert plan == plan_json(run, EXAMPLE)[0]
    # A must-gather's own link (here: a second name for a MachineSet file) is read as usual.
    inside = next(tree.rglob("machinesets/*.yaml"))
    (tree / "alias.yaml").symlink_to(inside)
    _plan, err = plan_json(run, tree)
    assert "alias.yaml" not in err


def test_an_oversized_file_is_skipped_without_being_read(
    run: Run, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 4 * 2**20  # above every file of the example, so only the huge one is refused
    monkeypatch.setattr(plan_inputs, "MAX_INPUT_BYTES", limit)
    with (tree / "huge.yaml").open("wb") as f:
        f.truncate(limit + 1)  # sparse: nothing is written, and nothing must be read
    _plan, err = plan_json(run, tree)
    assert "huge.yaml" in err and "larger than" in err


def test_a_special_file_named_on_the_command_line_is_an_error(run: Run, tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    result = run("plan", link)
    assert result.code == 1
    assert "zero.yaml" in result.err and "not a regular file" in result.err and "Traceback" not in result.err
