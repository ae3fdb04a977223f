#!/usr/bin/env python3
"""Generate `bootimage_controller/data/published-images.json`, the bundled index of published images.

Reads every `*.json` under `data/stream-metadata/` (SPEC section 5):

* stream metadata documents (they have `architectures`): every AWS AMI of every region of every
  architecture (`images.aws.regions.<region>.image` -> its `release`), every Windows License
  Included AMI (`rhel-coreos-extensions.aws-winli`, kept apart), every GCP image name
  (`images.gcp.name` -> `release`), and any Azure marketplace block already merged in;
* installer marketplace overlays (no `architectures`; `{arch: {"azure": {set: {gen: image}}}}`):
  every Azure image URN `publisher:offer:sku:version` -> its marketplace version.

Azure versions are not RHCOS build ids (`9.6.20251015`, `4.18.2025031114`); they are recorded as
published, unchanged, because that is the only thing known about them and what Azure itself
reports. No build id is invented for them.

It also records, per OpenShift release and OS stream (`release-streams`, for `fleet`'s HyperShift
NodePools), which platform images each architecture has: `{"4.22": {"rhel-10": {"x86_64": {"aws":
{region: AMI}, "gcp": name, "azure": true}}}}`. The release comes from the file name, the stream from
its builds' RHEL major (`rhel-9`, `rhel-10`); a later file of the same release and stream wins (the
`installer-release-4.16` file over the 4.16 GA one); marketplace overlays set `azure`. A GA file
(`installer-4.16-<build>-rhcos.json`) is also recorded under its `.0` release (`4.16.0`): the only
z-release whose own images the data knows exactly.

Output is deterministic (sorted keys, fixed indentation, trailing newline). The same key with two
different releases in two files is an error: the index would otherwise depend on file order.

    python scripts/generate_index.py            # rewrite the index
    python scripts/generate_index.py --check    # exit 1 if the committed index is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STREAM_DIR = ROOT / "data" / "stream-metadata"
DEFAULT_OUTPUT = ROOT / "bootimage_controller" / "data" / "published-images.json"
SECTIONS = ("aws", "aws-winli", "gcp", "azure")


class IndexError_(Exception):
    """Stream data the index cannot be built from (names the file and JSON path)."""


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _stream_entries(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """(section, key, release, json path) for every image of a stream document."""
    for arch, node in sorted(_obj(doc.get("architectures")).items()):
        node = _obj(node)
        images = _obj(node.get("images"))
        regions = _obj(_obj(images.get("aws")).get("regions"))
        for region, entry in sorted(regions.items()):
            entry = _obj(entry)
            path = f"architectures.{arch}.images.aws.regions.{region}"
            yield "aws", _str(entry.get("image")), _str(entry.get("release")), path
        gcp = _obj(images.get("gcp"))
        if gcp:
            yield "gcp", _str(gcp.get("name")), _str(gcp.get("release")), f"architectures.{arch}.images.gcp"
        ext = _obj(node.get("rhel-coreos-extensions"))
        winli = _obj(_obj(ext.get("aws-winli")).get("regions"))
        for region, entry in sorted(winli.items()):
            entry = _obj(entry)
            path = f"architectures.{arch}.rhel-coreos-extensions.aws-winli.regions.{region}"
            yield "aws-winli", _str(entry.get("image")), _str(entry.get("release")), path
        market = _obj(ext.get("marketplace"))
        yield from _azure_entries(_obj(market.get("azure")), f"architectures.{arch}.rhel-coreos-extensions.marketplace")


def _overlay_entries(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    for arch, node in sorted(doc.items()):
        yield from _azure_entries(_obj(_obj(node).get("azure")), arch)


def _azure_entries(azure: Mapping[str, Any], base: str) -> Iterator[tuple[str, str, str, str]]:
    for variant, gens in sorted(azure.items()):
        for gen, image in sorted(_obj(gens).items()):
            image = _obj(image)
            parts = [_str(image.get(k)) for k in ("publisher", "offer", "sku", "version")]
            urn = ":".join(parts) if all(parts) else ""
            yield "azure", urn, parts[3], f"{base}.azure.{variant}.{gen}"


# The OpenShift release a stream file ships with, from its name (`installer-release-4.19-rhcos.json`,
# `installer-4.16-<build>-rhcos.json`); `openshift-installer-main-...` names none.
_RELEASE_IN_NAME = re.compile(r"^installer-(?:release-)?(\d+)\.(\d+)-")


# `installer-4.16-<build>-rhcos.json`: the installer's data at the minor's GA (not a release branch tip).
_GA_FILE = re.compile(r"^installer-\d+\.\d+-\d")


def _release_of_file(name: str) -> tuple[int, int] | None:
    found = _RELEASE_IN_NAME.match(name)
    return (int(found.group(1)), int(found.group(2))) if found else None


def build_index(stream_dir: Path) -> dict[str, Any]:
    index: dict[str, dict[str, str]] = {section: {} for section in SECTIONS}
    origin: dict[tuple[str, str], str] = {}
    # RHCOS build (or marketplace version) -> the first OpenShift release whose installer shipped it:
    # what `plan` prints beside a build id, so builds of two numbering schemes can be compared.
    first_shipped: dict[str, tuple[int, int]] = {}
    sources = []
    for path in sorted(stream_dir.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise IndexError_(f"{path.name}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
        if not isinstance(doc, Mapping):
            raise IndexError_(f"{path.name}: expected a JSON object")
        sources.append(path.name)
        entries = _stream_entries(doc) if "architectures" in doc else _overlay_entries(doc)
        for section, key, release, where in entries:
            if not key or not release:
                raise IndexError_(f"{path.name}: {where}: image or release missing")
            seen = index[section].get(key)
            if seen is not None and seen != release:
                raise IndexError_(
                    f"{path.name}: {where}: {key} has release {release}, but {origin[section, key]} says {seen}"
                )
            index[section][key] = release
            origin.setdefault((section, key), f"{path.name} {where}")
            shipped = _release_of_file(path.name)
            if shipped is not None and (release not in first_shipped or shipped < first_shipped[release]):
                first_shipped[release] = shipped
    ocp = {build: f"{major}.{minor}" for build, (major, minor) in sorted(first_shipped.items())}
    return {"sources": sources, **index, "ocp-releases": ocp, "release-streams": release_streams(stream_dir)}


def _stream_of(doc: Mapping[str, Any]) -> str | None:
    """`rhel-N` from the first build id of the document (RHEL-aligned `9.6.…` or OCP-encoded `416.94.…`)."""
    for node in _obj(doc.get("architectures")).values():
        release = _str(_obj(_obj(_obj(node).get("artifacts")).get("qemu")).get("release")) or next(
            (_str(_obj(a).get("release")) for a in _obj(_obj(node).get("artifacts")).values()), "")
        parts = release.split(".")
        if len(parts) > 1 and parts[0].isdigit() and parts[1][:1].isdigit():
            # OCP-encoded `416.94.…`: RHEL 9.4 is the second part; RHEL-aligned `9.6.…`: the first.
            return f"rhel-{parts[1][0] if len(parts[0]) == 3 else parts[0]}"
    return None


def release_streams(stream_dir: Path) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    overlays: list[tuple[str, str, Mapping[str, Any]]] = []
    for path in sorted(stream_dir.glob("*.json")):
        shipped = _release_of_file(path.name)
        if shipped is None:
            continue
        release = f"{shipped[0]}.{shipped[1]}"
        doc = json.loads(path.read_text())
        if "architectures" not in doc:
            overlays.append((release, "rhel-10" if "rhel-10" in path.name else "rhel-9", doc))
            continue
        stream = _stream_of(doc)
        if stream is None:
            continue
        archs: dict[str, dict[str, Any]] = {}
        for arch, node in sorted(_obj(doc.get("architectures")).items()):
            images = _obj(_obj(node).get("images"))
            regions = _obj(_obj(images.get("aws")).get("regions"))
            entry: dict[str, Any] = {"aws": {r: _str(_obj(e).get("image")) for r, e in sorted(regions.items())}}
            gcp = _str(_obj(images.get("gcp")).get("name"))
            if gcp:
                entry["gcp"] = gcp
            if _obj(_obj(_obj(node).get("rhel-coreos-extensions")).get("marketplace")).get("azure"):
                entry["azure"] = True
            archs[arch] = entry
        out.setdefault(release, {})[stream] = archs
        if _GA_FILE.match(path.name):
            # What the minor's installer shipped at GA is what its `.0` release boots: the one
            # z-release whose own images are known exactly (Hive spokes are judged by their release).
            out.setdefault(f"{release}.0", {})[stream] = archs
    for release, stream, doc in overlays:
        for arch, node in doc.items():
            if _obj(node).get("azure") and arch in out.get(release, {}).get(stream, {}):
                out[release][stream][arch]["azure"] = True
    return out


def render(index: Mapping[str, Any]) -> str:
    return json.dumps(index, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--stream-dir", type=Path, default=DEFAULT_STREAM_DIR, help="folder of stream JSON files")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="index file to write or check")
    parser.add_argument("--check", action="store_true", help="exit 1 if the index file is missing or stale")
    args = parser.parse_args(argv)
    try:
        text = render(build_index(args.stream_dir))
    except IndexError_ as exc:
        print(f"generate_index: {exc}", file=sys.stderr)
        return 1
    if args.check:
        current = args.output.read_text() if args.output.exists() else None
        if current != text:
            print(
                f"{args.output} is stale or missing: run `python scripts/generate_index.py` and commit the result",
                file=sys.stderr,
            )
            return 1
        return 0
    args.output.write_text(text)
    counts = ", ".join(f"{s}: {len(json.loads(text)[s])}" for s in SECTIONS)
    print(f"wrote {args.output} ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
