"""The bundled index of published boot images and its generator (SPEC section 5)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bootimage_controller.core.index import PublishedImageIndex
from bootimage_controller.data import bundled_index

from .support import ROOT, STREAMS

INDEX_FILE = ROOT / "bootimage_controller" / "data" / "published-images.json"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_index", ROOT / "scripts" / "generate_index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def _stream_files() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, json.loads(p.read_text())) for p in sorted(STREAMS.glob("*.json"))]


def test_committed_index_is_current() -> None:
    assert GEN.main(["--check"]) == 0, "run `python scripts/generate_index.py` and commit the result"


def test_check_fails_on_a_stale_or_missing_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "index.json"
    doc = json.loads(INDEX_FILE.read_text())
    doc["aws"].popitem()
    stale.write_text(json.dumps(doc))
    assert GEN.main(["--check", "--output", str(stale)]) == 1
    assert "stale" in capsys.readouterr().err
    assert GEN.main(["--check", "--output", str(tmp_path / "missing.json")]) == 1


def test_generation_is_deterministic(tmp_path: Path) -> None:
    out = tmp_path / "index.json"
    assert GEN.main(["--output", str(out)]) == 0
    first = out.read_text()
    assert GEN.main(["--output", str(out)]) == 0
    assert out.read_text() == first == INDEX_FILE.read_text()


def test_bundled_index_covers_every_published_image() -> None:
    index = bundled_index()
    amis = gcp = azure = 0
    for name, doc in _stream_files():
        if "architectures" in doc:
            for arch, node in doc["architectures"].items():
                images = node.get("images", {})
                for region, entry in images.get("aws", {}).get("regions", {}).items():
                    assert index.aws_release(entry["image"]) == entry["release"], (name, arch, region)
                    amis += 1
                if "gcp" in images:
                    path = f"projects/{images['gcp']['project']}/global/images/{images['gcp']['name']}"
                    assert index.gcp_release(path) == images["gcp"]["release"], (name, arch)
                    gcp += 1
        else:
            for arch, node in doc.items():
                for variant, gens in node["azure"].items():
                    for gen, i in gens.items():
                        version = i["version"]
                        found = index.azure_release(i["publisher"], i["offer"], i["sku"], version)
                        assert found == version, (name, arch, variant, gen)
                        azure += 1
    # Every stream file, every arch: 4.16 GA has 31 regions, 4.16-4.21 36, 4.22 34 (x86_64 + aarch64).
    assert amis == 2 * (31 + 36 * 4 + 34 * 2)
    assert (gcp, azure) == (14, 15 + 15 + 14)  # the rhel-10 overlay has no Gen1 unpaid image


def test_windows_license_included_amis_are_kept_apart() -> None:
    index = bundled_index()
    doc = json.loads((STREAMS / "installer-release-4.19-rhcos.json").read_text())
    entry = doc["architectures"]["x86_64"]["rhel-coreos-extensions"]["aws-winli"]["regions"]["us-east-1"]
    assert index.aws_winli_release(entry["image"]) == entry["release"]
    assert index.aws_release(entry["image"]) is None


def _write(folder: Path, name: str, doc: Any) -> None:
    (folder / name).write_text(json.dumps(doc))


def _stream(ami: str, release: str) -> dict[str, Any]:
    return {
        "stream": "x",
        "architectures": {"x86_64": {"images": {"aws": {"regions": {"us-east-1": {"image": ami, "release": release}}}}}},
    }


def test_conflicting_releases_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "a.json", _stream("ami-1", "9.6.20250101-0"))
    _write(tmp_path, "b.json", _stream("ami-1", "9.6.20250202-0"))
    assert GEN.main(["--stream-dir", str(tmp_path), "--output", str(tmp_path / "out.json")]) == 1
    err = capsys.readouterr().err
    assert "ami-1" in err and "a.json" in err and "b.json" in err
    assert not (tmp_path / "out.json").exists()


def test_broken_stream_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "a.json", _stream("ami-1", ""))
    assert GEN.main(["--stream-dir", str(tmp_path), "--output", str(tmp_path / "o.json")]) == 1
    assert "image or release missing" in capsys.readouterr().err
    (tmp_path / "a.json").write_text("{")
    assert GEN.main(["--stream-dir", str(tmp_path), "--output", str(tmp_path / "o.json")]) == 1


def test_new_stream_data_makes_the_committed_index_stale(tmp_path: Path) -> None:
    streams = tmp_path / "streams"
    shutil.copytree(STREAMS, streams)
    _write(streams, "zz-new.json", _stream("ami-0new", "9.8.20260601-0"))
    assert GEN.main(["--check", "--stream-dir", str(streams), "--output", str(INDEX_FILE)]) == 1
    out = tmp_path / "index.json"
    assert GEN.main(["--stream-dir", str(streams), "--output", str(out)]) == 0
    index = PublishedImageIndex.from_json(json.loads(out.read_text()))
    assert index.aws_release("ami-0new") == "9.8.20260601-0"
    assert "zz-new.json" in json.loads(out.read_text())["sources"]
