"""Small, real OVAs for the vSphere tests: an OVF with a ProductSection and a tiny disk, in a tar,
and a loopback HTTP server for them (with Range, so resumed downloads are exercised)."""

from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

OVF_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
 xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"
 xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData"
 xmlns:vmw="http://www.vmware.com/schema/ovf">
  <References><File ovf:href="disk.vmdk" ovf:id="file1" ovf:size="{disk_size}"/></References>
  <DiskSection><Info>disks</Info>
    <Disk ovf:capacity="16" ovf:capacityAllocationUnits="byte * 2^30" ovf:diskId="vmdisk1" ovf:fileRef="file1"
      ovf:format="http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"/>
  </DiskSection>
  <NetworkSection><Info>networks</Info><Network ovf:name="VM Network"><Description>net</Description></Network></NetworkSection>
  <VirtualSystem ovf:id="rhcos">
    <Info>RHCOS</Info>
    <Name>rhcos</Name>
    <OperatingSystemSection ovf:id="80" vmw:osType="rhel9_64Guest"><Info>os</Info></OperatingSystemSection>
    <ProductSection><Info>product</Info><Product>Red Hat Enterprise Linux CoreOS</Product><Vendor>Red Hat</Vendor><Version>{release}</Version></ProductSection>
    <VirtualHardwareSection>
      <Info>hw</Info>
      <System><vssd:ElementName>Virtual Hardware Family</vssd:ElementName><vssd:InstanceID>0</vssd:InstanceID><vssd:VirtualSystemType>vmx-13</vssd:VirtualSystemType></System>
      <Item><rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits><rasd:ElementName>2 CPU</rasd:ElementName><rasd:InstanceID>1</rasd:InstanceID><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>2</rasd:VirtualQuantity></Item>
      <Item><rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits><rasd:ElementName>mem</rasd:ElementName><rasd:InstanceID>2</rasd:InstanceID><rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>4096</rasd:VirtualQuantity></Item>
      <Item><rasd:Address>0</rasd:Address><rasd:ElementName>SCSI</rasd:ElementName><rasd:InstanceID>3</rasd:InstanceID><rasd:ResourceSubType>VirtualSCSI</rasd:ResourceSubType><rasd:ResourceType>6</rasd:ResourceType></Item>
      <Item><rasd:AddressOnParent>0</rasd:AddressOnParent><rasd:ElementName>disk0</rasd:ElementName><rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource><rasd:InstanceID>4</rasd:InstanceID><rasd:Parent>3</rasd:Parent><rasd:ResourceType>17</rasd:ResourceType></Item>
      <Item><rasd:AddressOnParent>7</rasd:AddressOnParent><rasd:AutomaticAllocation>true</rasd:AutomaticAllocation><rasd:Connection>VM Network</rasd:Connection><rasd:ElementName>eth0</rasd:ElementName><rasd:InstanceID>5</rasd:InstanceID><rasd:ResourceSubType>VmxNet3</rasd:ResourceSubType><rasd:ResourceType>10</rasd:ResourceType></Item>
      <vmw:Config ovf:required="false" vmw:key="bootOptions.efiSecureBootEnabled" vmw:value="{secure_boot}"/>
      <vmw:Config ovf:required="false" vmw:key="firmware" vmw:value="efi"/>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
"""


def make_ova(path: Path, release: str, *, secure_boot: bool = True, disk_bytes: int = 8192) -> str:
    """Write an OVA for `release`; returns its sha256."""
    disk = (release.encode() * (disk_bytes // max(1, len(release)) + 1))[:disk_bytes]
    ovf = OVF_TEMPLATE.format(disk_size=len(disk), release=release, secure_boot="true" if secure_boot else "false").encode()
    with tarfile.open(path, "w") as tar:
        for name, data in (("rhcos.ovf", ovf), ("disk.vmdk", disk)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class OvaServer:
    url: str
    directory: Path
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    fail_after: dict[str, int] = field(default_factory=dict)  # path -> bytes to send, then drop

    def gets(self, name: str) -> int:
        return sum(1 for path, _ in self.requests if path.endswith(name))


@contextmanager
def serving(directory: Path) -> Iterator[OvaServer]:
    state = OvaServer("", directory)

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:  # quiet in test output
            pass

        def do_GET(self) -> None:
            state.requests.append((self.path, self.headers.get("Range")))
            target = directory / self.path.lstrip("/")
            if not target.is_file():
                self.send_error(404)
                return
            data = target.read_bytes()
            start = 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[len("bytes=") : -1])
                if start >= len(data):
                    self.send_response(416)
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            cut = state.fail_after.pop(self.path, None)
            self.wfile.write(body if cut is None else body[:cut])
            if cut is not None:
                self.close_connection = True

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
