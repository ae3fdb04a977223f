"""`plan` says the real cause (issue 27, item 3), each on the exact input that gave a misleading one."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from .conftest import EXAMPLE, EXAMPLE_MACHINESETS, ROOT, Run

BARE_STREAM = ROOT / "data" / "stream-metadata" / "installer-release-4.21-rhcos.json"


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def plan_stdin(text: str) -> subprocess.CompletedProcess[str]:
    """`plan -` as a user runs it, standard input piped in."""
    return subprocess.run([sys.executable, "-m", "bootimage_controller", "plan", "-"], input=text, cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_an_empty_input_says_there_is_nothing_to_plan(run: Run, tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    result = run("plan", tmp_path / "empty.yaml")
    # Naming what was read (issue 47): the file, or standard input.
    assert result.code == 1 and error_lines(result.err) == [
        f"error: {tmp_path / 'empty.yaml'}: plan: no Kubernetes objects in the input: nothing to plan (an empty file, "
        "folder or standard input?)"]
    piped = plan_stdin("")  # `plan - </dev/null` says the same of standard input
    assert piped.returncode == 1 and error_lines(piped.stderr) == [
        "error: standard input: plan: no Kubernetes objects in the input: nothing to plan (an empty file, folder or "
        "standard input?)"]


def test_an_input_without_machinesets_names_what_it_had(run: Run, tmp_path: Path) -> None:
    (tmp_path / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\n"
                                      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: x\n")
    result = run("plan", tmp_path / "ns.yaml")
    assert result.code == 1
    (line,) = error_lines(result.err)
    assert "the input had no MachineSet, only Namespace, Secret" in line and "coreos-bootimages" not in line.split(";")[0]


def test_two_manifests_joined_without_a_separator_are_an_error_naming_the_line() -> None:
    files = sorted(EXAMPLE_MACHINESETS.glob("*.yaml"))[:2]
    result = plan_stdin("".join(f.read_text() for f in files))  # `cat a.yaml b.yaml | plan -`
    assert result.returncode == 1, "the documents merged into one object and the plan went on"
    (line,) = error_lines(result.stderr)
    second = len(files[0].read_text().splitlines()) + 1
    first_key = next(i for i, text in enumerate(files[1].read_text().splitlines()) if text.startswith("apiVersion:"))
    assert f"at line {second + first_key}" in line and "'---'" in line


def test_fail_on_downgrade_that_cannot_judge_says_so_and_exits_5(run: Run) -> None:
    result = run("plan", EXAMPLE, "--bootimages", BARE_STREAM, "--fail-on-downgrade", "-o", "json")
    assert result.code == 5
    assert "--fail-on-downgrade cannot judge" in result.err and "names no OCP release" in result.err
    # Without the flag the same plan is a plain success, and a judged case keeps its own code.
    assert run("plan", EXAMPLE, "--bootimages", BARE_STREAM, "-o", "json").code == 0


def test_every_subcommand_has_a_description_and_its_exit_codes(run: Run) -> None:
    """Issue 27 item 2: `--help` of each subcommand says what it does and how it exits; release-claims
    says to scale the daemon to zero first."""
    for command in ("plan", "run", "aleph-report", "release-claims", "rollback"):
        result = run(command, "--help")
        assert result.code == 0
        text = " ".join(result.out.split())
        assert "exit status: 0" in text, command
        usage_end = result.out.index("\n\n")
        assert result.out[usage_end:].strip().split("\n")[0] not in ("options:", "positional arguments:"), command
    assert "--replicas=0" in " ".join(run("release-claims", "--help").out.split())


def test_warnings_are_sentences_unless_asked_for_json(run: Run, example_copy: Path) -> None:
    """SPEC section 6: one-shot commands print warnings as plain sentences; JSON with --log-format json."""
    first = sorted((example_copy / EXAMPLE_MACHINESETS.relative_to(EXAMPLE)).glob("*.yaml"))[0]
    # Each odd value is warned once per process (other tests in this worker may have used one): fresh ones.
    odd, odd_too = f"garbage-{uuid.uuid4().hex[:8]}", f"garbage-{uuid.uuid4().hex[:8]}"
    text = first.read_text().replace("  annotations:\n", f"  annotations:\n    machineconfiguration.openshift.io/boot-image-release: {odd}\n", 1)
    assert text != first.read_text(), "the fixture MachineSet has no annotations block"
    first.write_text(text)
    plain = run("plan", example_copy)
    warnings = [line for line in plain.err.splitlines() if line.strip()]
    assert warnings and all(line.startswith("warning: ") for line in warnings), plain.err
    assert odd in plain.err
    first.write_text(text.replace(odd, odd_too))
    as_json = run("plan", example_copy, "--log-format", "json")
    lines = [json.loads(line) for line in as_json.err.splitlines() if line.strip()]
    assert [line for line in lines if line["level"] == "warning" and odd_too in json.dumps(line)]
