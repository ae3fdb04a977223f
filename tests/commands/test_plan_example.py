"""`plan` on the bundled example cluster (a must-gather-like tree): table, JSON, YAML, exit codes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .conftest import (
    EXAMPLE,
    EXAMPLE_MACHINESETS,
    ROOT,
    Run,
    aws_image,
    by_name,
    golden_stream,
    load_yaml,
)

INFRA = "prod-east-8h2kq"
ARCH = {"amd64": "x86_64", "arm64": "aarch64"}
DECISION_KEYS = {
    "namespace", "name", "kind", "platform", "architecture", "stream", "manager", "action", "reason", "message",
    "field", "current", "target", "currentRelease", "targetRelease", "alsoWrittenBy", "nextWrite", "currentDeprecated",
    "verified", "managerWhy", "downgrade",
}
SKEW_KEYS = {"mode", "clusterBootImage", "limit", "upgradeable", "reason", "message", "afterPlannedWrites"}


def example_machineset(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = load_yaml(EXAMPLE_MACHINESETS / f"{name}.yaml")
    return obj


def expected_target(name: str) -> str:
    """The AMI the golden data names for this MachineSet's stream, architecture and region."""
    ms = example_machineset(name)
    label = ms["metadata"].get("labels", {}).get("machineconfiguration.openshift.io/osstream")
    arch = ARCH[ms["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/labels"].split("=")[1]]
    region = ms["spec"]["template"]["spec"]["providerSpec"]["value"]["placement"]["region"]
    return aws_image(golden_stream(label), arch, region)


def test_json_plan_of_the_example(run: Run) -> None:
    result = run("plan", EXAMPLE, "-o", "json")
    assert result.code == 0, result.err
    plan = result.json()
    assert set(plan) == {"kind", "machineSets", "gate", "skew"}
    assert plan["gate"]["open"] is True and plan["gate"]["reason"] == "AsExpected"
    assert plan["kind"] == "BootImagePlan"
    for entry in plan["machineSets"]:
        assert set(entry) == DECISION_KEYS
        for key in ("namespace", "name", "kind", "action", "reason", "message"):
            assert isinstance(entry[key], str) and entry[key]
    names = [(m["namespace"], m["name"]) for m in plan["machineSets"]]
    assert names == sorted(names), "ordered by namespace, then name"

    rows = by_name(plan)
    for name in ("worker-us-east-1a", "worker-us-east-1b", "worker-arm64-us-east-1c", "worker-rhel10-us-east-1a"):
        row = rows[f"{INFRA}-{name}"]
        assert (row["action"], row["reason"]) == ("patch", "BootImageOutdated"), row["message"]
        assert row["field"] == "spec.template.spec.providerSpec.value.ami"
        assert row["current"] == example_machineset(row["name"])["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]
        assert row["target"] == {"id": expected_target(row["name"])}
        assert row["currentRelease"] == "416.94.202405291527-0"
    assert rows[f"{INFRA}-worker-arm64-us-east-1c"]["architecture"] == "aarch64"
    assert rows[f"{INFRA}-worker-rhel10-us-east-1a"]["stream"] == "rhel-10"
    assert rows[f"{INFRA}-worker-rhel10-us-east-1a"]["targetRelease"].startswith("10.")
    assert rows[f"{INFRA}-worker-us-east-1a"]["stream"] == "rhel-9"

    custom = rows[f"{INFRA}-worker-custom-us-east-1b"]
    assert (custom["action"], custom["reason"]) == ("skip", "UnknownBootImage")
    assert "ami-0a1b2c3d4e5f67890" in custom["message"]
    filtered = rows[f"{INFRA}-worker-encrypted-us-east-1c"]
    assert (filtered["action"], filtered["reason"]) == ("skip", "UnsupportedImageReference")
    cpms = rows["cluster"]
    assert (cpms["kind"], cpms["action"], cpms["reason"]) == ("ControlPlaneMachineSet", "skip", "NotEnrolled")


def test_json_skew_object_of_the_example(run: Run) -> None:
    skew = run("plan", EXAMPLE, "-o", "json").json()["skew"]
    assert set(skew) == SKEW_KEYS
    assert skew["mode"] == "Automatic"
    assert skew["limit"] == {"ocpVersion": "4.13.0", "rhelVersion": "9.2"}
    assert set(skew["clusterBootImage"]) == {"rhcosVersion", "ocpVersion", "source"}
    assert skew["clusterBootImage"]["rhcosVersion"] == "416.94.202405291527-0"
    # The rhel-10 MachineSet still boots a RHEL 9 image: a skew error whatever the limits.
    assert skew["upgradeable"] is False
    assert skew["reason"] == "ClusterBootImageSkewError"
    assert f"{INFRA}-worker-rhel10-us-east-1a" in skew["message"]
    # Held now; the writes planned now (ours to the rhel-10 pool, the MCO's) clear it (issue 47, item 3).
    assert skew["afterPlannedWrites"]["upgradeable"] is True
    assert skew["afterPlannedWrites"]["reason"] == "AsExpected"


def test_the_skew_paragraph_says_who_holds_now_and_what_the_planned_writes_change(run: Run, tmp_path: Path) -> None:
    """Issue 47, item 3: held now by which ClusterOperator, and whether the planned writes clear it."""
    flat = " ".join(run("plan", EXAMPLE).out.split())
    assert ("upgrades would be HELD now (ClusterBootImageSkewError), by ClusterOperator machine-config-bootimages "
            "(Upgradeable=False)") in flat
    assert "After the writes planned now (this controller's and the MCO's): upgrades allowed again." in flat
    # Nothing written now (the upgrade in progress closes the gate): the hold stays, and it says so.
    copy = tmp_path / "example"
    shutil.copytree(EXAMPLE, copy)
    cv = next(copy.rglob("clusterversions/version.yaml"))
    cv.write_text(cv.read_text().replace("state: Completed", "state: Partial", 1))
    held = run("plan", copy, "-o", "json").json()["skew"]
    assert held["upgradeable"] is False and held["afterPlannedWrites"] is None
    assert "After the writes planned now: nothing planned now changes it" in " ".join(run("plan", copy).out.split())


def test_skew_limit_flags_reach_the_verdict(run: Run, tmp_path: Path) -> None:
    # Without the mismatched rhel-10 MachineSet, the 4.16 boot images (RHEL 9.4) pass the default
    # RHEL 9.2 limit and fail a 9.6 one.
    skew = run("plan", *_example_without_rhel10(tmp_path), "-o", "json").json()["skew"]
    assert skew["upgradeable"] is True and skew["reason"] == "AsExpected"
    skew = run("plan", *_example_without_rhel10(tmp_path), "-o", "json", "--rhel-skew-limit", "9.6").json()["skew"]
    assert skew["upgradeable"] is False
    assert skew["limit"] == {"ocpVersion": "4.13.0", "rhelVersion": "9.6"}
    assert "9.4" in skew["message"]


def _example_without_rhel10(tmp_path: Path) -> list[Path]:
    keep = [p for p in EXAMPLE.rglob("*.yaml") if "rhel10" not in p.name]
    return keep


def test_fail_on_skew_exits_3_only_when_upgrades_are_held(run: Run, tmp_path: Path) -> None:
    held = run("plan", EXAMPLE, "--fail-on-skew")
    assert held.code == 3
    prose = " ".join(held.out.split())  # wrapped to the width it is given
    assert "upgrades would be HELD" in prose and "runbooks.md" in prose
    assert run("plan", EXAMPLE).code == 0, "without --fail-on-skew a held verdict is still a plan"
    assert run("plan", *_example_without_rhel10(tmp_path), "--fail-on-skew").code == 0


def test_yaml_output_is_the_json_object(run: Run) -> None:
    as_json = run("plan", EXAMPLE, "-o", "json").json()
    as_yaml = yaml.safe_load(run("plan", EXAMPLE, "-o", "yaml").out)
    assert as_yaml == as_json


def test_table_of_the_example(run: Run) -> None:
    result = run("plan", EXAMPLE)
    assert result.code == 0
    lines = result.out.splitlines()
    header = lines[0].split()
    # One namespace: NAME only; a ControlPlaneMachineSet is present: KIND shown. Not a terminal:
    # every column (the image ids beside the releases), plain.
    assert header == ["NAME", "KIND", "PLATFORM", "ARCH", "STREAM", "MANAGER", "ACTION", "REASON", "CURRENT",
                      "TARGET", "VERIFIED", "CURRENT-RHCOS", "TARGET-RHCOS", "CURRENT-IMAGE", "TARGET-IMAGE"]
    assert "\x1b[" not in result.out
    rows = {line.split()[0]: line.split() for line in lines[1:8]}
    assert set(rows) == {"cluster"} | {p.stem for p in EXAMPLE_MACHINESETS.glob("*.yaml")}
    name = f"{INFRA}-worker-arm64-us-east-1c"
    row = rows[name]
    current_ami = example_machineset(name)["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"]
    # The example's Machine Config Operator (4.22) updates its unowned rhel-9 MachineSets itself;
    # the rhel-10 one is this controller's (the MCO skips other streams).
    # CURRENT and TARGET as OpenShift releases (comparable), the RHCOS builds and images beside them.
    # No Machine booted from its image has been recorded: unverified (SPEC section 3b).
    assert row[1:] == ["MS", "AWS", "aarch64", "rhel-9", "mco", "mco-patch", "BootImageOutdated", "4.16", "4.22",
                       "unverified", "416.94.202405291527-0", golden_stream()["architectures"]["aarch64"]["artifacts"]["aws"]["release"],
                       current_ami, expected_target(name)]
    # An AMI nobody knows offline: whether the MCO writes it is EC2's to say (issue 49), not "never".
    assert rows[f"{INFRA}-worker-custom-us-east-1b"][6:8] == ["unknown", "UnknownBootImage"]
    assert rows[f"{INFRA}-worker-rhel10-us-east-1a"][5:7] == ["bootimage-controller", "patch"]
    # Skips are explained under the table, the summary counts every action, the verdict follows.
    details = result.out.split("Details:")[1]
    flat = " ".join(details.split())
    assert f"openshift-machine-api/{INFRA}-worker-custom-us-east-1b: skip UnknownBootImage (manager mco: " in flat
    assert "ami-0a1b2c3d4e5f67890" in details
    summary = " ".join(result.out.split("\nPlan: ")[1].split("\nSkew:")[0].split())
    assert summary == ("this controller patches 1 now, the MCO 3; 1 depends on what only the cloud can tell "
                       "(plan --cloud-verify); 0 up to date, 3 skipped, 0 errors; managed by mco 5, bootimage-controller 1; 1 managed by nobody (not enrolled)")
    assert any(line.startswith("Skew: mode Automatic") for line in lines)


def on_terminal(*argv: str, columns: int = 100, **env: str) -> str:
    """The command under a pseudo-terminal `columns` wide, as a person runs it; its screen text."""
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of `columns` columns
        os.environ.update({"COLUMNS": str(columns), "LINES": "40", "TERM": "xterm", **env})
        os.environ.pop("NO_COLOR", None) if "NO_COLOR" not in env else None
        os.execv(sys.executable, [sys.executable, "-m", "bootimage_controller", *argv])
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


def test_on_a_terminal_the_table_is_coloured_unless_no_color() -> None:
    """ACTION is coloured on a terminal; NO_COLOR turns colour off; -o wide keeps every column (the
    widths themselves: test_table_widths.py)."""
    out = on_terminal("plan", str(EXAMPLE))
    assert "\x1b[33mpatch" in out
    assert "\x1b[" not in on_terminal("plan", str(EXAMPLE), NO_COLOR="1")
    assert "TARGET-IMAGE" in on_terminal("plan", str(EXAMPLE), "-o", "wide").splitlines()[0]


def test_at_80_columns_fleet_keeps_the_note_under_the_row(tmp_path: Path) -> None:
    """fleet's NOTE (the error, who holds the upgrade) is what decides: wrapped under its row, never cut."""
    import re

    missing = tmp_path / "lost"
    out = on_terminal("fleet", str(EXAMPLE), str(missing), columns=80)
    plain = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", line) for line in out.splitlines()]
    table = [line for line in plain if not line.startswith("fleet:")]
    assert all(len(line) <= 80 for line in table if len(line.strip().split()) > 1), table
    assert "no such file or folder" in " ".join(table)
    assert "next upgrade held by openshift-machine-api/prod-east-8h2kq-worker-rhel10-us-east-1a" in " ".join(
        " ".join(table).split())


def test_table_wraps_messages_for_a_narrow_terminal(run: Run, monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "70")
    result = run("plan", EXAMPLE)
    details = result.out.split("Details:")[1].split("Plan:")[0]
    # Only a single word longer than the terminal (a long field path) may overflow it.
    assert all(len(line) <= 70 or len(line.split()) == 1 for line in details.splitlines())
    assert any(len(line) > 60 for line in details.splitlines()), "lines use the width they have"


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", "plan", str(EXAMPLE), "-o", "json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    import json

    assert json.loads(proc.stdout)["kind"] == "BootImagePlan"
    bad = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", "plan", "--output", "xml", str(EXAMPLE)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )
    assert bad.returncode == 2
    assert "invalid choice" in bad.stderr


def test_examples_readme_shows_what_plan_prints(run: Run, monkeypatch: Any) -> None:
    """The console block of examples/README.md is the real output (at 100 columns, from the repo root)."""
    readme = (ROOT / "examples" / "README.md").read_text()
    block = readme.split("$ bootimage-controller plan examples/aws-4.16-cluster\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(ROOT)
    assert run("plan", "examples/aws-4.16-cluster").out == block, (
        "examples/README.md is stale: paste the output of "
        "`COLUMNS=100 bootimage-controller plan examples/aws-4.16-cluster` (run from the repo root)"
    )


def test_bootimages_older_than_the_cluster_warn_and_fail_only_when_asked(run: Run) -> None:
    older = ROOT / "tests" / "fixtures" / "configmaps" / "coreos-bootimages-4.18.yaml"
    warned = run("plan", EXAMPLE, "--bootimages", str(older))
    assert warned.code == 0
    assert "older than the cluster's 4.22" in warned.err and "back" in warned.err
    assert run("plan", EXAMPLE, "--bootimages", str(older), "--fail-on-downgrade").code == 4
    same = run("plan", EXAMPLE, "--fail-on-downgrade")
    assert same.code == 0 and "older than" not in same.err


def test_the_table_json_and_summary_agree_on_who_writes_what(run: Run) -> None:
    """The example (4.22, MCO running): this controller patches the rhel-10 MachineSet, the MCO the
    three plain rhel-9 ones; every report says the same (issue 32)."""
    plan = run("plan", EXAMPLE, "-o", "json").json()
    writers = {m["name"].removeprefix(f"{INFRA}-"): m["nextWrite"] for m in plan["machineSets"]}
    assert {n for n, w in writers.items() if w["writer"] == "bootimage-controller"} == {"worker-rhel10-us-east-1a"}
    assert {n for n, w in writers.items() if w["writer"] == "mco" and w["when"] == "now"} == {
        "worker-us-east-1a", "worker-us-east-1b", "worker-arm64-us-east-1c"}
    # The custom AMI nobody knows offline: the MCO writes it only if EC2 says Red Hat owns it.
    unknown = writers["worker-custom-us-east-1b"]
    assert (unknown["writer"], unknown["when"]) == ("mco", "unknown") and "--cloud-verify" in unknown["because"]
    assert all(w["when"] in ("now", "unknown") for w in writers.values() if w["writer"] != "nobody")
    assert all(m["alsoWrittenBy"] == [] for m in plan["machineSets"])
    out = run("plan", EXAMPLE).out
    table = {line.split()[0]: line.split() for line in out.split("\n\n")[0].splitlines()[1:]}
    assert [n for n, r in table.items() if r[6] == "patch"] == [f"{INFRA}-worker-rhel10-us-east-1a"]
    assert sorted(n for n, r in table.items() if r[6] == "mco-patch") == sorted(
        f"{INFRA}-{n}" for n in ("worker-us-east-1a", "worker-us-east-1b", "worker-arm64-us-east-1c"))
    assert "Plan: this controller patches 1 now, the MCO 3;" in out
    # Every MachineSet that will change is listed, ours first.
    upcoming = out.split("Next writes (this controller's first):\n")[1].split("\n\n")[0]
    named = [line.split(":")[0].strip() for line in upcoming.splitlines() if not line.startswith("    ")]
    assert named[0] == f"openshift-machine-api/{INFRA}-worker-rhel10-us-east-1a"
    assert len(named) == 5  # the four certain writes and the one the cloud decides


def test_with_an_upgrade_in_progress_nothing_is_patched_until_it_completes(run: Run, example_copy: Path) -> None:
    """ClusterVersion Partial: the daemon writes nothing (SPEC section 3), and `plan` says so."""
    cv = next(example_copy.rglob("clusterversions/version.yaml"))
    cv.write_text(cv.read_text().replace("state: Completed", "state: Partial", 1))
    plan = run("plan", example_copy, "-o", "json").json()
    assert plan["gate"]["open"] is False and plan["gate"]["reason"] == "ClusterNotStable"
    assert "Partial" in plan["gate"]["message"]
    assert {m["nextWrite"]["when"] for m in plan["machineSets"] if m["action"] == "patch"} == {"after-upgrade"}
    out = run("plan", example_copy).out
    flat = " ".join(out.split())
    assert "Plan: nothing is patched until the upgrade completes (then this controller 1 and the MCO 3);" in flat
    assert "Gate: closed (ClusterNotStable): ClusterVersion status.history[0] is Partial" in flat
    table = out.split("\n\n")[0]
    assert " patch " not in table and "after-upgrade" in table


def test_fleet_reads_the_same_next_writes_as_plan(run: Run, example_copy: Path) -> None:
    """`fleet` reports from plan's model of the next writes, not a recount (issue 32)."""
    cv = next(example_copy.rglob("clusterversions/version.yaml"))
    for state in ("Completed", "Partial"):
        cv.write_text(cv.read_text().replace("state: Completed", f"state: {state}", 1))
        plan = run("plan", example_copy, "-o", "json").json()
        fleet = run("fleet", example_copy, "-o", "json").json()
        (row,) = fleet["clusters"]
        assert row["gate"] == plan["gate"]
        pools = {p["name"]: p for p in row["pools"]}
        for m in plan["machineSets"]:
            assert (pools[m["name"]]["nextWrite"], pools[m["name"]]["alsoWrittenBy"]) == (m["nextWrite"], m["alsoWrittenBy"])
    assert plan["gate"]["open"] is False


def test_an_opted_out_machineset_is_said_to_be_the_mcos_with_the_fix(run: Run) -> None:
    """examples/pinned-machineset.yaml beside the example (issue 49): the annotation opts it out of this
    controller only; the MCO, which covers it, patches it. The summary and "Next writes" say so, with
    the way to keep the image pinned."""
    result = run("plan", EXAMPLE, ROOT / "examples" / "pinned-machineset.yaml")
    assert result.code == 0, result.err
    name = f"{INFRA}-worker-pinned-us-east-1a"
    row = next(line.split() for line in result.out.splitlines() if line.startswith(name))
    assert row[5:8] == ["mco", "conflict", "BootImageOutdated"]
    summary = " ".join(result.out.split("\nPlan: ")[1].split("\nSkew:")[0].split())
    assert summary.startswith("this controller patches 1 now, the MCO 4;") and "1 writer conflict" in summary
    upcoming = " ".join(result.out.split("Next writes (this controller's first):\n")[1].split("\n\n")[0].split())
    said = upcoming.split(f"openshift-machine-api/{name}:")[1]
    assert said.startswith(" the Machine Config Operator patches it now")
    assert "although annotation machineconfiguration.openshift.io/boot-image-updates=Disabled opts it out" in said
    assert "label it machineconfiguration.openshift.io/boot-image-writer=pinned" in said
    doc = run("plan", EXAMPLE, ROOT / "examples" / "pinned-machineset.yaml", "-o", "json").json()
    pinned = next(m for m in doc["machineSets"] if m["name"] == name)
    assert pinned["nextWrite"] == {"writer": "mco", "when": "now", "action": "conflict"} and "opts it out of this controller only" in pinned["message"]


def test_one_vocabulary_for_the_next_write_from_the_table_to_the_page(run: Run, tmp_path: Path) -> None:
    """Issue 47, item 1: `patch` is this controller's write now, `mco-patch` the MCO's, in plan's table
    and JSON, fleet's POOLS and JSON, and the page's Action column alike (the page and fleet said
    `patch` for the MCO's pools)."""
    plan = run("plan", EXAMPLE, "-o", "json").json()
    words = {m["name"]: m["nextWrite"]["action"] for m in plan["machineSets"]}
    assert words[f"{INFRA}-worker-rhel10-us-east-1a"] == "patch"
    assert words[f"{INFRA}-worker-us-east-1a"] == "mco-patch" and words["cluster"] == "skip"
    lines = run("plan", EXAMPLE).out.splitlines()
    header = lines[0].split()
    rows = [line.split() for line in lines[1: lines.index("")]]
    assert {r[0]: r[header.index("ACTION")] for r in rows} == words
    page = tmp_path / "fleet.html"
    fleet = run("fleet", EXAMPLE, "-o", "json", "--html", str(page)).json()
    assert {p["name"]: p["nextWrite"]["action"] for p in fleet["clusters"][0]["pools"]} == words
    assert "7: 1 patch, 3 mco-patch, 1 unknown, 2 skip" in run("fleet", EXAMPLE).out
    html = page.read_text()
    assert "<th>Action</th>" in html and "<th>Decision</th>" not in html
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r'<tr class="pool-row">(.*?)</tr>', html)]
    action = html.split("<th>Action</th>")[0].split("<th>Pool</th>")[-1].count("<th>") + 1  # the column's index
    shown = {re.sub(r"<[^>]+>", "", c[0]): re.sub(r"<[^>]+>", "", c[action]).split()[0] for c in cells}
    assert {name.split("/")[-1]: word for name, word in shown.items()} == words
