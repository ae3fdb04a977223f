"""What a CAPI patch decision asks the controller to write (pure data, carried on the decision)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CapiWork:
    """Create `new_template` (a copy of `old_name` with only the boot image changed), then point the
    object's infrastructureRef at it. `replaces` names the template the old one replaced, if we
    wrote it: two generations old after this update, deleted once nothing references it."""

    template_kind: str
    template_api_version: str
    namespace: str
    old_name: str
    new_name: str
    new_template: Mapping[str, Any] = field(repr=False)
    rollout: bool = False  # a MachineDeployment: the patch rolls out new Machines
