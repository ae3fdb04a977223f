"""`run`, `release-claims`, `rollback` and `aleph-report` reach their modules with every flag parsed."""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from bootimage_controller.errors import InputError

from .conftest import Run

DAEMON = "bootimage_controller.daemon.run"
COMMANDS = "bootimage_controller.commands.release_claims"


@pytest.fixture
def fake_daemon(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.Namespace]:
    """Replace the daemon and commands modules with ones recording the arguments each entry point gets."""
    calls: dict[str, argparse.Namespace] = {}
    module = types.ModuleType(DAEMON)
    commands = types.ModuleType(COMMANDS)

    def entry(name: str, code: int = 0) -> Any:
        def f(args: argparse.Namespace) -> int:
            calls[name] = args
            return code
        return f

    module.run_daemon = entry("run_daemon")  # type: ignore[attr-defined]
    commands.release_claims = entry("release_claims", 0)  # type: ignore[attr-defined]
    commands.rollback = entry("rollback", 1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, DAEMON, module)
    monkeypatch.setitem(sys.modules, COMMANDS, commands)
    monkeypatch.delenv("BOOTIMAGE_GCP_ENDPOINT", raising=False)
    monkeypatch.delenv("BOOTIMAGE_AZURE_ENDPOINT", raising=False)
    return calls


def test_run_defaults(run: Run, fake_daemon: dict[str, argparse.Namespace]) -> None:
    assert run("run").code == 0
    args = fake_daemon["run_daemon"]
    assert args.leader_elect is True
    assert args.dry_run is False and args.once is False
    assert args.cluster_operator == "machine-config-bootimages"
    assert args.kubeconfig is None
    assert (args.ocp_skew_limit, args.rhel_skew_limit) == ("4.13.0", "9.2")
    assert args.gcp_endpoint is None and args.azure_endpoint is None
    assert args.concurrency >= 1 and args.qps > 0 and args.burst >= 1


def test_run_flags(run: Run, fake_daemon: dict[str, argparse.Namespace], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOOTIMAGE_GCP_ENDPOINT", "http://127.0.0.1:1/gcp")
    code = run(
        "run", "--kubeconfig", "/k", "--dry-run", "--once", "--no-leader-elect", "--cluster-operator", "",
        "--health-addr", ":9440", "--metrics-addr", "127.0.0.1:9441", "--concurrency", "8", "--qps", "5.5",
        "--burst", "11", "--log-format", "console", "--ocp-skew-limit", "4.14", "--rhel-skew-limit", "9.4",
        "--azure-endpoint", "http://127.0.0.1:2/azure",
    ).code
    assert code == 0
    a = fake_daemon["run_daemon"]
    assert (a.kubeconfig, a.dry_run, a.once, a.leader_elect, a.cluster_operator) == ("/k", True, True, False, "")
    assert (a.health_addr, a.metrics_addr, a.concurrency, a.qps, a.burst) == (":9440", "127.0.0.1:9441", 8, 5.5, 11)
    assert a.log_format == "console"
    assert (a.ocp_skew_limit, a.rhel_skew_limit) == ("4.14.0", "9.4")
    assert a.gcp_endpoint == "http://127.0.0.1:1/gcp", "the environment gives the default"
    assert a.azure_endpoint == "http://127.0.0.1:2/azure"


def test_release_claims_and_rollback(run: Run, fake_daemon: dict[str, argparse.Namespace]) -> None:
    assert run("release-claims", "--kubeconfig", "/k").code == 0
    assert fake_daemon["release_claims"].kubeconfig == "/k"
    assert run("rollback", "my-ms", "--dry-run").code == 1, "the entry point's exit code is returned"
    args = fake_daemon["rollback"]
    assert (args.name, args.namespace, args.dry_run) == ("my-ms", "openshift-machine-api", True)


def test_bad_input_from_a_command_is_one_line(run: Run, fake_daemon: dict[str, argparse.Namespace],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: argparse.Namespace) -> int:
        raise InputError("MachineSet openshift-machine-api/x", "metadata.annotations", "no previous boot image")

    monkeypatch.setattr(sys.modules[COMMANDS], "rollback", broken)
    result = run("rollback", "x")
    assert result.code == 1
    assert result.err == "error: MachineSet openshift-machine-api/x: metadata.annotations: no previous boot image\n"


def test_aleph_report_reaches_the_agent(run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import bootimage_controller.commands.aleph_report as agent
    import bootimage_controller.kube.client as kube_client

    seen: dict[str, Any] = {}

    class FakeApi:
        async def __aenter__(self) -> FakeApi:
            return self

        async def __aexit__(self, *exc: object) -> None:
            seen["closed"] = True

    async def fake_client(kubeconfig: str | None, **_: Any) -> FakeApi:
        seen["kubeconfig"] = kubeconfig
        return FakeApi()

    async def fake_report(node_name: str, aleph_path: Path, api: Any, *, interval: float, once: bool) -> int:
        seen.update(node=node_name, path=aleph_path, interval=interval, once=once)
        return 0

    monkeypatch.setattr(kube_client, "make_api_client", fake_client)
    monkeypatch.setattr(agent, "run_aleph_report", fake_report)
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert run("aleph-report", "--once").code == 2, "a node name is required"
    monkeypatch.setenv("NODE_NAME", "master-0")
    assert run("aleph-report", "--once", "--kubeconfig", "/k").code == 0
    assert seen == {"kubeconfig": "/k", "node": "master-0", "path": Path("/sysroot/.coreos-aleph-version.json"),
                    "interval": 600.0, "once": True, "closed": True}
    assert run("aleph-report", "--node-name", "master-1", "--aleph-path", tmp_path, "--interval", "5").code == 0
    assert (seen["node"], seen["path"], seen["interval"], seen["once"]) == ("master-1", tmp_path, 5.0, False)


def _command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[name]
    return found


@pytest.mark.parametrize("name", ["plan", "run", "aleph-report", "release-claims", "rollback", "hand-over",
                                  "hand-back", "fleet"])
def test_the_parser_built_for_one_command_reads_it_as_the_whole_one_does(name: str) -> None:
    """`main` builds only the command it is given (issue 36: argparse was 6 ms of every start); that
    command's help, and so its arguments and defaults, must be the whole parser's, and a name that is
    not a command gets every command (the top level's help and errors list them)."""
    from bootimage_controller.commands.cli import build_parser

    whole, one = build_parser(), build_parser(name)
    assert _command_parser(one, name).format_help() == _command_parser(whole, name).format_help()
    sub = next(a for a in one._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) <= {name, "hand-over", "hand-back"}
    assert build_parser("--help").format_help() == whole.format_help()
