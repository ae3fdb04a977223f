"""The container image's recipe (the Dockerfile is not built here: no container engine runs on the
test machines) and the pins it installs from."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .manifests import REPO

BASE_IMAGE = "registry.access.redhat.com/ubi9/python-311"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    out: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip()))
    assert not pending, "Dockerfile ends inside a continuation"
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile((REPO / "Dockerfile").read_text())


def _all(instructions: list[Instruction], keyword: str) -> list[Instruction]:
    return [i for i in instructions if i.keyword == keyword]


def test_the_parser_joins_continuations_and_drops_comments() -> None:
    parsed = parse_dockerfile("# c\nFROM a\nRUN x \\\n  # inner\n  && y\nUSER 1001\n")
    assert parsed == [Instruction("FROM", "a"), Instruction("RUN", "x  && y"), Instruction("USER", "1001")]


def test_the_base_is_ubi9_python_311_pinned_by_digest(dockerfile: list[Instruction]) -> None:
    froms = _all(dockerfile, "FROM")
    assert froms, "no FROM"
    # The final stage is what runs; its image may come from a build ARG (with a default).
    image = froms[-1].args.split()[0]
    if image.startswith("${"):
        default = {i.args.split("=", 1)[0]: i.args.split("=", 1)[1] for i in _all(dockerfile, "ARG") if "=" in i.args}
        image = default[image.strip("${}")]
    name, _, digest = image.partition("@")
    assert name == BASE_IMAGE
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), "a rebuild must get the same base: pin it by digest"


def test_the_build_context_is_only_what_the_image_needs() -> None:
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules[0] == "*", "everything is excluded first, then what the Dockerfile copies is let back in"
    copied = {"pyproject.toml", "README.md", "LICENSE", "constraints.txt", "requirements.lock", "bootimage_controller/"}
    assert {r[1:] for r in rules if r.startswith("!")} == copied


def test_it_runs_as_a_non_root_user(dockerfile: list[Instruction]) -> None:
    users = _all(dockerfile, "USER")
    assert users, "no USER: the image would run as root"
    user = users[-1].args.split(":")[0]
    assert user not in ("0", "root")
    assert user.isdigit(), "a numeric UID lets the kubelet verify runAsNonRoot"
    assert dockerfile.index(users[-1]) > max(dockerfile.index(r) for r in _all(dockerfile, "RUN"))


def test_entrypoint_is_the_console_script_and_cmd_runs_the_daemon(dockerfile: list[Instruction]) -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert json.loads(_all(dockerfile, "ENTRYPOINT")[-1].args) == ["bootimage-controller"]
    assert "bootimage-controller" in scripts
    assert json.loads(_all(dockerfile, "CMD")[-1].args) == ["run"]


def test_dependencies_install_from_the_repository_pins(dockerfile: list[Instruction]) -> None:
    copies = [i for i in _all(dockerfile, "COPY") if "constraints.txt" in i.args.split()]
    assert copies, "constraints.txt is not copied into the image"
    installs = [i for i in _all(dockerfile, "RUN") if re.search(r"\bpip3? install\b", i.args)]
    assert installs, "no pip install"
    for run in installs:
        for command in re.split(r"&&|;", run.args):
            if re.search(r"\bpip3? install\b", command):
                # Every install is pinned: by the constraints, or by the hash lock made from them.
                assert "-c constraints.txt" in command or "--require-hashes -" in command, command
    assert dockerfile.index(copies[0]) < dockerfile.index(installs[0])
    package = [i for i in installs if re.search(r"install\b.*\s\.(\s|$)", i.args)]
    assert package, "the package itself is not installed"
    assert not _all(dockerfile, "ADD"), "ADD can fetch URLs at build time; use COPY"


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        assert match, f"not an exact pin: {line!r}"
        name = canonicalize_name(match.group(1))
        assert name not in pins, f"{name} pinned twice"
        pins[name] = Version(match.group(2))
    return pins


def _image_requirements() -> list[Requirement]:
    """What the image installs: the dependencies and the `cloud` extra (every cloud SDK)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    out = [Requirement(r) for r in project["dependencies"]]
    for name in ("aws", "gcp", "azure", "vsphere"):
        assert name in extras["cloud"][0], name
        out += [Requirement(r) for r in extras[name]]
    return out


def test_constraints_pin_every_runtime_dependency_within_its_bounds() -> None:
    pins = _pins()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    image = _image_requirements()
    for req in image:
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} (pyproject.toml) is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} violates {req}"
    test_only = {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["test"]}
    test_only -= {"bootimage-controller"}
    # A test-only package may be pinned only because the image needs it anyway (a transitive one).
    assert not (test_only & set(pins)) - {canonicalize_name(r.name) for r in image} - _transitive(pins), (
        "test-only packages do not belong in the image"
    )


def _transitive(pins: dict[str, Version]) -> set[str]:
    from importlib import metadata

    needed: set[str] = set()
    for name in pins:
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        needed |= {canonicalize_name(Requirement(r).name) for r in requires}
    return needed & set(pins)


def test_the_lock_pins_exactly_the_constraints_each_with_hashes(dockerfile: list[Instruction]) -> None:
    """requirements.lock (hack/gen_lock.py) is constraints.txt with a sha256 per wheel, and the
    image installs from it with --require-hashes."""
    entries = re.findall(r"^([A-Za-z0-9._-]+)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\\n)?)+)",
                         (REPO / "requirements.lock").read_text(), re.M)
    locked = {canonicalize_name(name): Version(version) for name, version, _ in entries}
    assert locked == _pins(), "requirements.lock is stale: run hack/gen_lock.py after hack/gen_constraints.py"
    assert all("--hash=sha256:" in hashes for _, _, hashes in entries)
    assert any("--require-hashes" in i.args and "requirements.lock" in i.args for i in _all(dockerfile, "RUN"))
