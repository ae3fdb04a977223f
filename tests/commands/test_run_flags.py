"""`run`'s Lease timing flags take Go-style durations, as OpenShift components' flags do."""

from __future__ import annotations

import argparse

import pytest

from bootimage_controller.commands.cli import build_parser, duration_arg


@pytest.mark.parametrize(
    ("text", "seconds"), [("137s", 137.0), ("2m17s", 137.0), ("1.5m", 90.0), ("500ms", 0.5), ("26", 26.0), ("1h", 3600.0)]
)
def test_durations(text: str, seconds: float) -> None:
    assert duration_arg(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "10x", "5s junk", "-3s", "0"])
def test_bad_durations_are_usage_errors(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_arg(text)


def test_unset_timings_leave_the_choice_to_the_cluster_topology() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline, args.leader_elect_retry_period) == (
        None,
        None,
        None,
    )
    args = build_parser().parse_args(["run", "--leader-elect-lease-duration", "2m"])
    assert args.leader_elect_lease_duration == 120.0


@pytest.mark.parametrize("text", ["0", "65536", "-1", "443s", ""])
def test_a_vsphere_port_outside_1_to_65535_is_a_usage_error(text: str) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", "--vsphere-port", text])
    assert exited.value.code == 2
    assert build_parser().parse_args(["run", "--vsphere-port", "8443"]).vsphere_port == 8443
