"""The OVA cache (download, verify, resume, bound) and the OVF facts the refresh reads."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bootimage_controller.cloud.credentials import CredentialsError, parse_vsphere_credentials
from bootimage_controller.constants import Reason
from bootimage_controller.core.vsphere.topology import OvaSource, leftover_names
from bootimage_controller.vsphere.ova import OvaCache, OvaError, mirror_url, parse_ovf, read_ovf
from bootimage_controller.vsphere.vcenter import release_of, with_record

from .ovas import OVF_TEMPLATE, make_ova, serving

RELEASE = "9.8.20260403-0"


def test_the_product_version_is_the_release_and_secure_boot_is_read() -> None:
    info = parse_ovf(OVF_TEMPLATE.format(disk_size=1, release=RELEASE, secure_boot="true"))
    assert (info.product_version, info.secure_boot, info.networks) == (RELEASE, True, ("VM Network",))
    assert info.files == {"file1": "disk.vmdk"}
    off = parse_ovf(OVF_TEMPLATE.format(disk_size=1, release=" ", secure_boot="false"))
    assert (off.product_version, off.secure_boot) == (None, False)


def test_a_descriptor_that_is_not_an_ovf_is_refused() -> None:
    with pytest.raises(ValueError, match="not XML"):
        parse_ovf("<Envelope")
    with pytest.raises(ValueError, match="not an OVF Envelope"):
        parse_ovf("<html/>")


def test_read_ovf_from_an_ova(tmp_path: Path) -> None:
    make_ova(tmp_path / "a.ova", RELEASE)
    assert read_ovf(tmp_path / "a.ova").product_version == RELEASE
    (tmp_path / "b.ova").write_bytes(b"not a tar")
    with pytest.raises(ValueError, match="not a readable OVA"):
        read_ovf(tmp_path / "b.ova")


def test_release_comes_from_the_product_version_else_our_record() -> None:
    assert release_of(RELEASE, None) == (RELEASE, "product version")
    assert release_of("", "notes\nmachineconfiguration.openshift.io/boot-image-release=1.2") == ("1.2", "record")
    assert release_of(None, "just notes") == (None, None)
    # Writing the record keeps the admin's notes and replaces an older record.
    assert with_record("notes\nmachineconfiguration.openshift.io/boot-image-release=1.2", "3.4") == (
        "notes\nmachineconfiguration.openshift.io/boot-image-release=3.4"
    )


def test_mirror_replaces_everything_up_to_the_last_slash() -> None:
    url = "https://rhcos.mirror.openshift.com/art/storage/prod/streams/rhel-9.6/builds/x/rhcos-x-vmware.x86_64.ova"
    assert mirror_url(url, "http://mirror.local/ova/") == "http://mirror.local/ova/rhcos-x-vmware.x86_64.ova"
    assert mirror_url(url, None) == url


def test_leftover_names_are_fixed_per_template_and_short() -> None:
    tmp, old = leftover_names("infra-rhcos-fd", RELEASE)
    assert (tmp, old) == leftover_names("infra-rhcos-fd", RELEASE)
    # Each release imports under a name of its own (the last one's datastore folder is still in use).
    assert leftover_names("infra-rhcos-fd", "9.6.20251212-1")[0] != tmp
    assert leftover_names("infra-rhcos-fd", "9.6.20251212-1")[1] == old
    assert len(leftover_names("x" * 80, "1" * 200)[0]) <= 80
    assert tmp != old and len(tmp) < 64 and tmp.startswith("bic-tmp-")


async def test_download_verifies_caches_and_is_shared(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    sha = make_ova(tmp_path / "srv" / "r.ova", RELEASE)
    with serving(tmp_path / "srv") as server:
        cache = OvaCache(tmp_path / "cache")
        source = OvaSource(f"{server.url}/r.ova", sha, RELEASE)
        first = await cache.fetch(source)
        again = await cache.fetch(source)
        assert first == again == tmp_path / "cache" / f"{sha}.ova"
        assert server.gets("r.ova") == 1
        assert not list((tmp_path / "cache").glob("*.part"))


async def test_a_checksum_mismatch_imports_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    make_ova(tmp_path / "srv" / "r.ova", RELEASE)
    with serving(tmp_path / "srv") as server:
        cache = OvaCache(tmp_path / "cache")
        with pytest.raises(OvaError) as err:
            await cache.fetch(OvaSource(f"{server.url}/r.ova", "0" * 64, RELEASE))
        assert err.value.reason is Reason.OVA_CHECKSUM_MISMATCH
        assert list((tmp_path / "cache").iterdir()) == []


async def test_an_interrupted_download_resumes(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    sha = make_ova(tmp_path / "srv" / "r.ova", RELEASE, disk_bytes=200_000)
    with serving(tmp_path / "srv") as server:
        server.fail_after["/r.ova"] = 50_000
        cache = OvaCache(tmp_path / "cache")
        source = OvaSource(f"{server.url}/r.ova", sha, RELEASE)
        with pytest.raises(OvaError) as err:
            await cache.fetch(source)
        assert err.value.reason is Reason.OVA_UNAVAILABLE
        # What arrived before the cut is kept (how much of the last chunk the client saw varies).
        kept = (tmp_path / "cache" / f"{sha}.part").stat().st_size
        assert 0 < kept <= 50_000
        path = await cache.fetch(source)
        assert path.read_bytes() == (tmp_path / "srv" / "r.ova").read_bytes()
        assert server.requests[-1][1] == f"bytes={kept}-"


async def test_unreachable_or_unverifiable_ovas_are_unavailable(tmp_path: Path) -> None:
    cache = OvaCache(tmp_path / "cache")
    with pytest.raises(OvaError) as err:
        await cache.fetch(OvaSource("http://127.0.0.1:9/r.ova", "a" * 64, RELEASE))
    assert err.value.reason is Reason.OVA_UNAVAILABLE and "127.0.0.1:9" in str(err.value)
    with pytest.raises(OvaError, match="no sha256"):
        await cache.fetch(OvaSource("http://127.0.0.1:9/r.ova", None, RELEASE))


async def test_the_cache_is_bounded_least_recently_used_first(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    shas = [make_ova(tmp_path / "srv" / f"{i}.ova", f"9.8.{i}", disk_bytes=30_000) for i in range(3)]
    with serving(tmp_path / "srv") as server:
        cache = OvaCache(tmp_path / "cache", max_bytes=90_000)  # room for two: each is 40 KiB as a tar
        for i, sha in enumerate(shas):
            await cache.fetch(OvaSource(f"{server.url}/{i}.ova", sha, f"9.8.{i}"))
    kept = sorted(p.name for p in (tmp_path / "cache").glob("*.ova"))
    assert kept == sorted(f"{sha}.ova" for sha in shas[1:])


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_vsphere_credentials_per_server_and_never_printed() -> None:
    secret = {
        "metadata": {"name": "vsphere-cloud-credentials", "namespace": "openshift-machine-api"},
        "data": {"vc1.example.com.username": _b64("admin"), "vc1.example.com.password": _b64("s3cret-value")},
    }
    creds = parse_vsphere_credentials(secret)
    assert creds.logins == {"vc1.example.com": ("admin", "s3cret-value")}
    assert "s3cret" not in repr(creds) and "s3cret" not in str(creds)
    del secret["data"]["vc1.example.com.password"]
    with pytest.raises(CredentialsError, match=r"data\.vc1\.example\.com\.password"):
        parse_vsphere_credentials(secret)


@pytest.mark.parametrize("sha", [
    "/etc/passwd", "../outside", "../../" + "a" * 64, "a" * 63 + "\x00", "a" * 4096, "A/" + "b" * 62, "g" * 64,
], ids=["absolute", "dot-dot", "dot-dot-hex", "nul", "over-long", "slash", "not-hex"])
async def test_a_checksum_is_data_never_a_path(tmp_path: Path, sha: str) -> None:
    """Whatever the stream says its sha256 is, nothing outside the cache is read, written or deleted
    (issue 24): the value is refused, naming the field, before any file is made for it."""
    outside = tmp_path / "outside.ova"
    outside.write_bytes(b"a foreign file")
    (tmp_path / "srv").mkdir()
    make_ova(tmp_path / "srv" / "r.ova", RELEASE)
    before = sorted(p.name for p in tmp_path.iterdir())
    with serving(tmp_path / "srv") as server:
        cache = OvaCache(tmp_path / "cache" / "ova")
        with pytest.raises(OvaError) as err:
            await cache.fetch(OvaSource(f"{server.url}/r.ova", sha, RELEASE))
        assert server.gets("r.ova") == 0
    assert err.value.reason is Reason.BOOT_IMAGES_CONFIGMAP_INVALID
    assert "artifacts.vmware.formats.ova.disk.sha256" in str(err.value)
    assert outside.read_bytes() == b"a foreign file"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not (tmp_path / "cache").exists()
