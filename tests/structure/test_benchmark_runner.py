"""benchmarks/run.py: writes docs/benchmarks.md only when asked, and Ctrl-C ends it cleanly (issue 17)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def run_module(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.syspath_prepend(str(BENCH.parent / "tests"))
    sys.modules.pop("run", None)
    import run

    yield run
    sys.modules.pop("run", None)


def test_the_doc_is_written_only_with_write_doc(run_module) -> None:  # type: ignore[no-untyped-def]
    assert run_module.parse_args([]).write_doc is False
    assert run_module.parse_args(["--write-doc"]).write_doc is True


def test_ctrl_c_ends_with_130_and_a_message(run_module, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    def interrupted(_argv: list[str] | None) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "_main", interrupted)
    assert run_module.main([]) == 130
    assert "interrupted: no figures written" in capsys.readouterr().err
