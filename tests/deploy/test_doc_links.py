"""Links that work where the reader is (issue 27, item 2).

- Every relative link in the Markdown a user reads (README, docs/, the examples', the stream data's
  and the bundle's) names a file of the repository and, with `#anchor`, a heading of it.
- Every `docs/<page>.md, "<Section>"` pointer in the code, the manifests and the scripts names a
  heading that exists, as does every runbook link and `plan`'s "What to do" anchor.
- Nothing the user gets points outside the repository (the steering checkout beside it is not theirs).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bootimage_controller.plan.output import heading_anchor

from .manifests import REPO

MARKDOWN = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "examples" / "README.md",
            REPO / "data" / "stream-metadata" / "README.md", REPO / "bundle" / "description.md"]
SHIPPED = ["README.md", "docs", "examples", "data", "bootimage_controller", "scripts", "manifests", "bundle",
           "Dockerfile", "bundle.Dockerfile", "pyproject.toml"]
OUTSIDE = re.compile(r"\.\./shared|shared/(reference|fixtures|tools)|steering (repo|checkout)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
POINTER = re.compile(r"(docs/[a-z-]+\.md),\s*(?:#\s*)?\"([^\"]+)\"")


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # headings inside code blocks are not headings
    return {heading_anchor(h) for h in re.findall(r"(?m)^#{1,6}\s+(.+?)\s*$", text)}


def headings(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"(?m)^#{1,6}\s+(.+?)\s*$", text)


@pytest.mark.parametrize("doc", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_names_a_file_and_a_heading(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists() or (REPO.resolve() not in file.parents and file != REPO.resolve()) or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            broken.append(target)
    assert broken == []


def test_every_section_pointer_names_a_heading() -> None:
    found, broken = 0, []
    for part in SHIPPED:
        root = REPO / part
        for path in [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]:
            if path.suffix in (".json", ".png", ".svg") or "__pycache__" in path.parts:
                continue
            text = re.sub(r"\n\s*#\s*", " ", path.read_text(errors="replace"))  # pointers wrapped in comments
            for page, section in POINTER.findall(text):
                found += 1
                if not any(h.startswith(section) for h in headings(REPO / page)):
                    broken.append((str(path.relative_to(REPO)), page, section))
    assert found >= 3 and broken == []


def test_nothing_shipped_points_outside_the_repository() -> None:
    hits = []
    for part in SHIPPED:
        root = REPO / part
        for path in [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]:
            if "__pycache__" in path.parts or path.suffix == ".json":
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if OUTSIDE.search(line):
                    hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert hits == []


def test_the_runbook_links_and_plans_what_to_do_name_runbook_sections() -> None:
    runbooks = anchors(REPO / "docs" / "runbooks.md")
    rules = (REPO / "manifests" / "prometheusrule.yaml").read_text()
    linked = re.findall(r"runbook_url: \S+/runbooks\.md#(\S+)", rules)
    assert linked and set(linked) <= runbooks
    assert heading_anchor("BootImageSkewHoldsUpgrades") in runbooks
