"""The golden boot images: the `coreos-bootimages` ConfigMap and CoreOS stream metadata.

Only the paths the platform rules use are modelled (reference/stream-metadata.md sections 1.2-1.4);
unknown keys are ignored because new artifacts keep appearing. Every error names the ConfigMap key
and the JSON path inside it, so an administrator can find the broken value.

Hostile until validated (issue 24): the text is bounded in size before it is parsed and every parse
error is caught (integer digit limits included); every value that can become a patch target is
checked to be a well-formed id for its platform (an AMI id, a GCP project and image name, Azure
marketplace fields, an OVA's https location and hex sha256), never an empty or odd string. A broken
entry (one AWS region, one architecture's GCP image, one Azure variant, one OVA) is kept aside in
`invalid` with its JSON path and the rules answer `error BootImagesConfigMapInvalid` for the
MachineSets that need it, while every other MachineSet is still planned. Architectures other than
the four RPM ones are ignored.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..constants import (
    BOOTIMAGES_CONFIGMAP,
    CM_KEY_RELEASE_VERSION,
    CM_KEY_STREAM,
    CM_KEY_STREAMS,
    RPM_ARCHES,
    UNKNOWN_RELEASE_VERSION,
)
from ..errors import GoldenDataError
from .skew.versions import rhel_major_of

AZURE_VARIANTS = ("no-purchase-plan", "ocp", "opp", "oke", "ocp-emea", "opp-emea", "oke-emea")
AZURE_GENERATIONS = ("hyperVGen1", "hyperVGen2")
# A ConfigMap holds at most 1 MiB and real streams are ~100 KiB; `plan --bootimages` reads files, so
# the bound is generous (a 50 MB test stream still parses) but there is one.
MAX_STREAM_JSON = 64 * 1024 * 1024
# What a patch target may look like, per platform (fullmatch).
AMI_ID = re.compile(r"ami-[0-9a-f]{8,17}")
GCP_PROJECT = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]")
GCP_IMAGE_NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
AZURE_FIELD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RELEASE_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,127}")
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
OVA_LOCATION = re.compile(r"https?://[^\s]{1,2040}")


@dataclass(frozen=True)
class AwsRegionImage:
    region: str
    image: str
    release: str


@dataclass(frozen=True)
class GcpImage:
    project: str
    name: str
    release: str

    @property
    def path(self) -> str:
        # The form the installer writes into MachineSets (pkg/asset/rhcos/image.go).
        return f"projects/{self.project}/global/images/{self.name}"


@dataclass(frozen=True)
class AzureMarketplaceImage:
    variant: str
    generation: str
    publisher: str
    offer: str
    sku: str
    version: str


@dataclass(frozen=True)
class VmwareArtifact:
    release: str
    location: str
    sha256: str


@dataclass(frozen=True)
class ArchBootImages:
    """The boot images one stream publishes for one architecture."""

    arch: str
    artifact_releases: Mapping[str, str]
    aws_regions: Mapping[str, AwsRegionImage] | None  # None: the stream has no images.aws
    gcp: GcpImage | None
    azure_marketplace: Mapping[str, Mapping[str, AzureMarketplaceImage]] | None
    vmware: VmwareArtifact | None
    # Entries that failed validation, by what they would have given: `aws`, `aws/<region>`, `gcp`,
    # `azure`, `azure/<variant>/<generation>`, `vmware`; the value names the ConfigMap and JSON path.
    invalid: Mapping[str, str] = field(default_factory=dict)

    def problem(self, *keys: str) -> str | None:
        """Why the first of `keys` that failed validation is unusable (None: none did)."""
        return next((self.invalid[k] for k in keys if k in self.invalid), None)

    @cached_property
    def aws_release_by_ami(self) -> Mapping[str, str]:
        """AMI id -> release over every region (the reverse of `aws_regions`), built once."""
        return {entry.image: entry.release for entry in (self.aws_regions or {}).values()}

    def azure_image(self, variant: str, generation: str) -> AzureMarketplaceImage | None:
        if self.azure_marketplace is None:
            return None
        return self.azure_marketplace.get(variant, {}).get(generation)


@dataclass(frozen=True)
class GoldenStream:
    """One parsed stream metadata document."""

    name: str
    rhel_major: int | None
    declared_stream: str | None  # the document's own `stream` field: informational, unreliable
    architectures: Mapping[str, ArchBootImages]
    source: str
    invalid_archs: Mapping[str, str] = field(default_factory=dict)  # arch -> why it is unusable

    def arch(self, arch: str) -> ArchBootImages | None:
        return self.architectures.get(arch)


@dataclass(frozen=True)
class StreamLookup:
    """The stream a MachineSet label resolves to, or why none does."""

    stream: GoldenStream | None
    name: str
    error: str | None = None  # set when the stream exists but its data is broken


@dataclass(frozen=True)
class GoldenBootImages:
    default: GoldenStream
    streams: Mapping[str, GoldenStream] = field(default_factory=dict)
    invalid_streams: Mapping[str, str] = field(default_factory=dict)
    streams_error: str | None = None  # `data.streams` as a whole did not parse
    release_version: str | None = None

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_configmap(cls, obj: Mapping[str, Any], source: str = "") -> GoldenBootImages:
        where = source or f"ConfigMap {BOOTIMAGES_CONFIGMAP}"
        data = obj.get("data") if isinstance(obj, Mapping) else None
        if not isinstance(data, Mapping):
            raise GoldenDataError(where, "data", "missing or not a map")
        release = data.get(CM_KEY_RELEASE_VERSION)
        release_version = release if isinstance(release, str) and release and release != UNKNOWN_RELEASE_VERSION else None
        streams, invalid, streams_error = _parse_streams(data.get(CM_KEY_STREAMS), where)
        raw_default = data.get(CM_KEY_STREAM)
        if raw_default is None:
            # Payloads that only carry `streams` (hypershift accepts them): rhel-9 is the default.
            if "rhel-9" in streams:
                return cls(streams["rhel-9"], streams, invalid, streams_error, release_version)
            raise GoldenDataError(where, f"data.{CM_KEY_STREAM}", "missing")
        if not isinstance(raw_default, str):
            raise GoldenDataError(where, f"data.{CM_KEY_STREAM}", "must be a JSON string")
        doc = _loads(raw_default, where, f"data.{CM_KEY_STREAM}")
        default = parse_stream(doc, name=None, source=f"{where} data.{CM_KEY_STREAM}")
        return cls(default, streams, invalid, streams_error, release_version)

    @classmethod
    def from_stream_json(cls, text: str, source: str = "stream JSON") -> GoldenBootImages:
        """A bare stream metadata document (`plan --bootimages stream.json`)."""
        doc = _loads(text, source, "")
        return cls(parse_stream(doc, name=None, source=source))

    # ---- lookups --------------------------------------------------------------------------
    def lookup(self, label: str | None) -> StreamLookup:
        """SPEC section 2 rule 4: which stream a MachineSet with this osstream label boots."""
        if label is None:
            return StreamLookup(self.default, self.default.name)
        for name in _candidate_names(label):
            if name in self.streams:
                return StreamLookup(self.streams[name], label)
            if name in self.invalid_streams:
                return StreamLookup(None, label, self.invalid_streams[name])
            if name == self.default.name:
                return StreamLookup(self.default, label)
        if self.streams_error is not None:
            return StreamLookup(None, label, self.streams_error)
        return StreamLookup(None, label)

    def all_streams(self) -> Iterator[GoldenStream]:
        yield self.default
        for stream in self.streams.values():
            if stream is not self.default:
                yield stream

    def known_release(self, predicate: Any) -> str | None:
        """Release of the first image in any stream for which `predicate(arch_images)` gives one."""
        for arch_images in self._every_arch:
            release = predicate(arch_images)
            if release:
                return str(release)
        return None

    def aws_release(self, ami_id: str) -> str | None:
        """`known_release` for an AMI id: one lookup, as every AWS MachineSet asks it."""
        return self._aws_release_by_ami.get(ami_id)

    @cached_property
    def _every_arch(self) -> tuple[ArchBootImages, ...]:
        """Every stream's images, default stream first (the order `known_release` searches in)."""
        return tuple(images for stream in self.all_streams() for images in stream.architectures.values())

    @cached_property
    def _aws_release_by_ami(self) -> Mapping[str, str]:
        index: dict[str, str] = {}
        for images in self._every_arch:
            for ami, release in images.aws_release_by_ami.items():
                if release:
                    index.setdefault(ami, release)  # the first in search order wins
        return index


def _candidate_names(label: str) -> list[str]:
    # Installer variants such as `rhel-10-nvidia` boot the `rhel-10` images (reference 13).
    names = [label]
    m = re.fullmatch(r"(rhel-\d+)-.+", label)
    if m:
        names.append(m.group(1))
    return names


def _loads(text: str, where: str, key: str) -> Any:
    if len(text) > MAX_STREAM_JSON:
        raise GoldenDataError(where, key or None, f"{len(text)} characters: more than a stream can be ({MAX_STREAM_JSON})")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GoldenDataError(
            where, key or None, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise GoldenDataError(where, key or None, "JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise GoldenDataError(where, key or None, f"unusable JSON: {str(exc)[:200]}") from None


def _parse_streams(
    raw: Any, where: str
) -> tuple[dict[str, GoldenStream], dict[str, str], str | None]:
    if raw is None:
        return {}, {}, None
    key = f"data.{CM_KEY_STREAMS}"
    try:
        if not isinstance(raw, str):
            raise GoldenDataError(where, key, "must be a JSON string")
        doc = _loads(raw, where, key)
        if not isinstance(doc, Mapping):
            raise GoldenDataError(where, key, "must be a JSON object of stream name -> stream")
    except GoldenDataError as exc:
        return {}, {}, str(exc)
    streams: dict[str, GoldenStream] = {}
    invalid: dict[str, str] = {}
    for name, stream_doc in doc.items():
        try:
            streams[name] = parse_stream(stream_doc, name=name, source=f"{where} {key}[{name!r}]")
        except GoldenDataError as exc:
            invalid[name] = str(exc)
    return streams, invalid, None


# ---- stream documents ---------------------------------------------------------------------------


class _Doc:
    """Typed reads from a JSON document that report the JSON path on failure."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> GoldenDataError:
        return GoldenDataError(self.source, path or "$", problem)

    def obj(self, value: Any, path: str, optional: bool = False) -> Mapping[str, Any] | None:
        if value is None and optional:
            return None
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {_type(value)}")
        return value

    def string(self, value: Any, path: str, optional: bool = False) -> str:
        if value is None and optional:
            return ""
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_type(value)}")
        return value

    def ident(self, value: Any, path: str, pattern: re.Pattern[str], what: str) -> str:
        """A string that can become a patch target: it must be a well-formed `what`."""
        text = self.string(value, path)
        if not pattern.fullmatch(text):
            shown = repr(text) if len(text) <= 80 else f"{text[:80]!r}... ({len(text)} characters)"
            raise self.fail(path, f"{shown} is not a well-formed {what}")
        return text

    def entry(self, invalid: dict[str, str], key: str, parse: Any) -> Any:
        """`parse()`, or None with the failure kept in `invalid[key]`: one bad entry spoils only itself."""
        try:
            return parse()
        except GoldenDataError as exc:
            invalid[key] = str(exc)
            return None


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def parse_stream(doc: Any, name: str | None, source: str) -> GoldenStream:
    """Parse one stream metadata document. `name=None` derives `rhel-<major>` from build ids."""
    d = _Doc(source)
    top = d.obj(doc, "")
    assert top is not None
    archs_raw = d.obj(top.get("architectures"), "architectures")
    assert archs_raw is not None
    archs: dict[str, ArchBootImages] = {}
    invalid: dict[str, str] = {}
    for arch, value in archs_raw.items():
        if arch not in RPM_ARCHES:
            continue  # an architecture no MachineSet can name (rule 5): not ours to judge
        parsed = d.entry(invalid, arch, lambda arch=arch, value=value: _parse_arch(d, arch, value))
        if parsed is not None:
            archs[arch] = parsed
    if invalid and not archs:
        # Nothing usable at all: the stream itself is broken, not one entry of it.
        raise GoldenDataError(source, None, "; ".join(invalid.values()))
    major = _stream_rhel_major(archs.values())
    declared = top.get("stream") if isinstance(top.get("stream"), str) else None
    if name is None:
        name = f"rhel-{major}" if major is not None else (declared or "default")
    return GoldenStream(name, major, declared, archs, source, invalid)


def _stream_rhel_major(archs: Any) -> int | None:
    # The `stream` field is unreliable (release-4.22 rhel-9 says rhcos-4.21); build ids are not.
    majors: Counter[int] = Counter()
    for arch_images in archs:
        for release in arch_images.artifact_releases.values():
            major = rhel_major_of(release)
            if major is not None:
                majors[major] += 1
    return majors.most_common(1)[0][0] if majors else None


def _parse_arch(d: _Doc, arch: str, value: Any) -> ArchBootImages:
    base = f"architectures.{arch}"
    node = d.obj(value, base)
    assert node is not None
    artifacts = d.obj(node.get("artifacts"), f"{base}.artifacts", optional=True) or {}
    releases: dict[str, str] = {}
    vmware = None
    invalid: dict[str, str] = {}
    for platform, art in artifacts.items():
        art_obj = d.obj(art, f"{base}.artifacts.{platform}")
        assert art_obj is not None
        releases[platform] = d.ident(art_obj.get("release"), f"{base}.artifacts.{platform}.release", RELEASE_ID,
                                     "release id")
        if platform == "vmware":
            vmware = d.entry(invalid, "vmware", lambda art_obj=art_obj: _parse_vmware(
                d, art_obj, f"{base}.artifacts.vmware", releases["vmware"]))
    images = d.obj(node.get("images"), f"{base}.images", optional=True) or {}
    exts = d.obj(node.get("rhel-coreos-extensions"), f"{base}.rhel-coreos-extensions", optional=True) or {}
    market = f"{base}.rhel-coreos-extensions.marketplace"
    return ArchBootImages(
        arch=arch,
        artifact_releases=releases,
        aws_regions=d.entry(invalid, "aws", lambda: _parse_aws(d, images.get("aws"), f"{base}.images.aws", invalid)),
        gcp=d.entry(invalid, "gcp", lambda: _parse_gcp(d, images.get("gcp"), f"{base}.images.gcp")),
        azure_marketplace=d.entry(invalid, "azure", lambda: _parse_azure(d, exts.get("marketplace"), market, invalid)),
        vmware=vmware,
        invalid=invalid,
    )


def _parse_aws(d: _Doc, value: Any, path: str, invalid: dict[str, str]) -> dict[str, AwsRegionImage] | None:
    aws = d.obj(value, path, optional=True)
    if aws is None:
        return None
    regions = d.obj(aws.get("regions"), f"{path}.regions", optional=True) or {}
    out = {}
    for region, entry in regions.items():
        p = f"{path}.regions.{region}"

        def one(region: str = region, entry: Any = entry, p: str = p) -> AwsRegionImage:
            e = d.obj(entry, p)
            assert e is not None
            return AwsRegionImage(region, d.ident(e.get("image"), f"{p}.image", AMI_ID, "AMI id"),
                                  d.ident(e.get("release"), f"{p}.release", RELEASE_ID, "release id"))

        parsed = d.entry(invalid, f"aws/{region}", one)
        if parsed is not None:
            out[region] = parsed
    return out


def _parse_gcp(d: _Doc, value: Any, path: str) -> GcpImage | None:
    gcp = d.obj(value, path, optional=True)
    if gcp is None:
        return None
    return GcpImage(
        project=d.ident(gcp.get("project"), f"{path}.project", GCP_PROJECT, "GCP project id"),
        name=d.ident(gcp.get("name"), f"{path}.name", GCP_IMAGE_NAME, "GCP image name"),
        release=d.ident(gcp.get("release"), f"{path}.release", RELEASE_ID, "release id"),
    )


def _parse_azure(
    d: _Doc, value: Any, path: str, invalid: dict[str, str]
) -> dict[str, dict[str, AzureMarketplaceImage]] | None:
    market = d.obj(value, path, optional=True)
    if market is None:
        return None
    azure = d.obj(market.get("azure"), f"{path}.azure", optional=True)
    if azure is None:
        return None
    out: dict[str, dict[str, AzureMarketplaceImage]] = {}
    for variant, gens in azure.items():
        gens_obj = d.obj(gens, f"{path}.azure.{variant}")
        assert gens_obj is not None
        out[variant] = {}
        for gen, img in gens_obj.items():
            p = f"{path}.azure.{variant}.{gen}"

            def one(variant: str = variant, gen: str = gen, img: Any = img, p: str = p) -> AzureMarketplaceImage:
                i = d.obj(img, p)
                assert i is not None
                return AzureMarketplaceImage(
                    variant=variant,
                    generation=gen,
                    **{k: d.ident(i.get(k), f"{p}.{k}", AZURE_FIELD, f"Azure marketplace {k}")
                       for k in ("publisher", "offer", "sku", "version")},
                )

            parsed = d.entry(invalid, f"azure/{variant}/{gen}", one)
            if parsed is not None:
                out[variant][gen] = parsed
    return out


def _parse_vmware(d: _Doc, art: Mapping[str, Any], path: str, release: str) -> VmwareArtifact:
    """The OVA: its location must be an http(s) URL and its sha256 64 hex digits (it names the
    cached file: a checksum is data, never a path), or both absent."""
    formats = d.obj(art.get("formats"), f"{path}.formats", optional=True) or {}
    ova = d.obj(formats.get("ova"), f"{path}.formats.ova", optional=True) or {}
    disk = d.obj(ova.get("disk"), f"{path}.formats.ova.disk", optional=True) or {}
    location, sha256 = disk.get("location"), disk.get("sha256")
    p = f"{path}.formats.ova.disk"
    return VmwareArtifact(
        release=release,
        location=d.ident(location, f"{p}.location", OVA_LOCATION, "http(s) URL") if location is not None else "",
        sha256=d.ident(sha256.lower() if isinstance(sha256, str) else sha256, f"{p}.sha256", SHA256_HEX,
                       "sha256 (64 hex digits)") if sha256 is not None else "",
    )


def merge_marketplace(stream_doc: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Merge an installer marketplace overlay (`{arch: {"azure": ...}}`) into a stream document.

    Mirrors installer `hack/build-coreos-manifest.go`: each architecture's overlay lands in
    `architectures.<arch>.rhel-coreos-extensions.marketplace`. Returns a new document.
    """
    merged: dict[str, Any] = json.loads(json.dumps(stream_doc))
    for arch, market in overlay.items():
        arch_node = merged.setdefault("architectures", {}).get(arch)
        if arch_node is None:
            continue
        arch_node.setdefault("rhel-coreos-extensions", {})["marketplace"] = market
    return merged
