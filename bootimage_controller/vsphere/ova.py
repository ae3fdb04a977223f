"""The stream's OVA on local disk: downloaded once, verified by sha256, kept in a bounded cache.

- Entries are named by their sha256 (`<sha256>.ova`), so a file in the cache is the file the stream
  names, whatever URL (or mirror) it came from. A download goes to `<sha256>.part` and is renamed
  only after its hash matched: a crash leaves a `.part`, which the next fetch resumes (HTTP Range)
  or, when the server will not resume, restarts. A mismatch deletes the `.part` and is an error:
  nothing unverified is ever imported.
- A stream entry without a sha256 is refused (`OvaUnavailable`): there is nothing to verify against.
- The cache is bounded (`max_bytes`): after a download, the least recently used entries go until
  the rest fit; the entry just fetched always stays.
- Disconnected clusters: `mirror` replaces the scheme, host and path prefix of the stream's URL up
  to its last `/` (SPEC section 4, `--ova-mirror`). Downloads honour the proxy environment.
- One download per entry at a time across the process (MachineSets sharing a template, or two
  templates of one stream, share it).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import structlog

from .. import observability as obs
from ..constants import Reason
from ..core.golden import SHA256_HEX
from ..core.vsphere.topology import OvaSource

log = structlog.get_logger(__name__)

CHUNK = 1 << 20
PROGRESS_EVERY = 64 << 20  # a log line per 64 MiB downloaded
DEFAULT_MAX_BYTES = 8 << 30  # about four RHCOS OVAs
SHA256_FIELD = "artifacts.vmware.formats.ova.disk.sha256"


class OvaError(Exception):
    """The OVA cannot be used: `reason` is OvaUnavailable (retry later) or OvaChecksumMismatch."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def mirror_url(url: str, mirror: str | None) -> str:
    """The stream's URL with everything up to its last `/` replaced by the mirror's."""
    if not mirror:
        return url
    return f"{mirror.rstrip('/')}/{url.rsplit('/', 1)[-1]}"


@dataclass(frozen=True)
class OvfInfo:
    """What the refresh needs from the OVA's OVF descriptor."""

    descriptor: str
    product_version: str | None  # ProductSection/Version: the RHCOS build id
    secure_boot: bool  # vmw:Config bootOptions.efiSecureBootEnabled = true
    networks: tuple[str, ...]
    files: dict[str, str]  # OVF file id -> member name in the OVA


_OVF = "{http://schemas.dmtf.org/ovf/envelope/1}"
_VMW = "{http://www.vmware.com/schema/ovf}"


def parse_ovf(descriptor: str) -> OvfInfo:
    """Raises ValueError on a descriptor that is not an OVF envelope."""
    import xml.etree.ElementTree as ET  # imported here: only vSphere reads OVAs (0.9 MiB with tarfile)

    try:
        root = ET.fromstring(descriptor)
    except ET.ParseError as exc:
        raise ValueError(f"OVF descriptor is not XML: {exc}") from None
    if root.tag != f"{_OVF}Envelope":
        raise ValueError(f"OVF descriptor's root is {root.tag}, not an OVF Envelope")
    version = root.find(f".//{_OVF}ProductSection/{_OVF}Version")
    product = version.text.strip() if version is not None and version.text and version.text.strip() else None
    secure = any(
        c.get(f"{_VMW}key") == "bootOptions.efiSecureBootEnabled" and (c.get(f"{_VMW}value") or "").lower() == "true"
        for c in root.iter(f"{_VMW}Config")
    )
    networks = tuple(n.get(f"{_OVF}name") or "" for n in root.iter(f"{_OVF}Network"))
    files = {f.get(f"{_OVF}id") or "": f.get(f"{_OVF}href") or "" for f in root.iter(f"{_OVF}File")}
    return OvfInfo(descriptor, product, secure, tuple(n for n in networks if n), files)


def read_ovf(path: Path) -> OvfInfo:
    """The OVF inside an OVA (a tar whose first `.ovf` member is the descriptor)."""
    import tarfile  # imported here, like xml.etree in parse_ovf

    try:
        with tarfile.open(path, "r:") as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith(".ovf")), None)
            if member is None:
                raise ValueError(f"{path.name} holds no .ovf descriptor")
            handle = tar.extractfile(member)
            assert handle is not None
            return parse_ovf(handle.read().decode("utf-8"))
    except (tarfile.TarError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path.name} is not a readable OVA: {exc}") from None


class OvaCache:
    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        mirror: str | None = None,
        read_timeout: float = 120.0,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.mirror = mirror
        self.read_timeout = read_timeout
        self._locks: dict[str, asyncio.Lock] = {}
        self._verified: set[Path] = set()

    def path_for(self, sha256: str) -> Path:
        """The cache file of a validated digest: a checksum is data, never a path (issue 24)."""
        if not SHA256_HEX.fullmatch(sha256):
            raise OvaError(Reason.BOOT_IMAGES_CONFIGMAP_INVALID, f"{SHA256_FIELD} {_shown(sha256)} is not a sha256 "
                           "(64 hex digits): nothing is read, written or deleted for it")
        path = self.directory / f"{sha256}.ova"
        assert path.parent == self.directory  # 64 hex digits cannot leave the directory
        return path

    async def fetch(self, ova: OvaSource) -> Path:
        """The verified OVA on disk. Raises `OvaError`."""
        if not ova.sha256:
            raise OvaError(Reason.OVA_UNAVAILABLE, f"the stream gives no sha256 for {ova.url}: refusing an OVA "
                           "that cannot be verified")
        sha = ova.sha256.lower()
        self.path_for(sha)  # validated before any lock, file or download is made for it
        lock = self._locks.setdefault(sha, asyncio.Lock())
        async with lock:
            final = self.path_for(sha)
            if final.exists():
                if final not in self._verified:
                    # Verified when written; once per process again, in case the volume was tampered with.
                    if await asyncio.to_thread(_file_sha256, final) != sha:
                        final.unlink(missing_ok=True)
                        return await self._download(ova, sha)
                    self._verified.add(final)
                os.utime(final)
                obs.OVA_DOWNLOADS.labels(result="cached").inc()
                return final
            return await self._download(ova, sha)

    async def _download(self, ova: OvaSource, sha: str) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        url = mirror_url(ova.url, self.mirror)
        part = self.path_for(sha).with_suffix(".part")
        try:
            await self._get(url, part)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            obs.OVA_DOWNLOADS.labels(result="failed").inc()
            reason = str(exc) or type(exc).__name__
            raise OvaError(Reason.OVA_UNAVAILABLE, f"cannot fetch OVA {url}: {reason}") from None
        got = await asyncio.to_thread(_file_sha256, part)
        if got != sha:
            part.unlink(missing_ok=True)
            obs.OVA_DOWNLOADS.labels(result="checksum_mismatch").inc()
            raise OvaError(Reason.OVA_CHECKSUM_MISMATCH, f"OVA {url} has sha256 {got}, the stream says {sha}; "
                           "deleted, nothing imported")
        final = self.path_for(sha)
        part.replace(final)
        self._verified.add(final)
        obs.OVA_DOWNLOADS.labels(result="downloaded").inc()
        self._evict(keep=final)
        return final

    async def _get(self, url: str, part: Path) -> None:
        have = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=self.read_timeout)
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=True) as session,
            session.get(url, headers=headers) as resp,
        ):
            code = resp.status  # HTTP from the mirror, not the Kubernetes API
            if code == 416 and have:  # the part is already whole (crash before the rename)
                return
            if code not in (200, 206):
                raise aiohttp.ClientResponseError(resp.request_info, (), status=code, message=resp.reason or "")
            resumed = code == 206 and have > 0
            total = (resp.content_length or 0) + (have if resumed else 0)
            log.info("downloading OVA", url=url, resumed_at=have if resumed else 0, total_bytes=total or None)
            done = have if resumed else 0
            next_report = done + PROGRESS_EVERY
            with part.open("ab" if resumed else "wb") as out:
                async for chunk in resp.content.iter_chunked(CHUNK):
                    await asyncio.to_thread(out.write, chunk)
                    done += len(chunk)
                    obs.OVA_DOWNLOAD_BYTES.inc(len(chunk))
                    if done >= next_report:
                        log.info("downloading OVA", url=url, bytes=done, total_bytes=total or None)
                        next_report = done + PROGRESS_EVERY
            log.info("OVA downloaded", url=url, bytes=done)

    def _evict(self, keep: Path) -> None:
        entries = sorted(
            (p for p in self.directory.glob("*.ova") if p != keep), key=lambda p: p.stat().st_mtime
        )
        total = keep.stat().st_size + sum(p.stat().st_size for p in entries)
        for path in entries:
            if total <= self.max_bytes:
                break
            total -= path.stat().st_size
            path.unlink(missing_ok=True)
            self._verified.discard(path)
            log.info("OVA cache entry evicted", path=str(path), limit_bytes=self.max_bytes)


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 80 else f"{value[:80]!r}... ({len(value)} characters)"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
