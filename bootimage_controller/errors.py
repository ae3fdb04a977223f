"""The project's own error types.

Every error raised on bad input names where the problem is: the object (or file), and the field
(a dotted path or JSON path). Parsers raise only these types, so callers can turn any of them into
a clear message or a per-MachineSet `error` decision without catching broad exceptions.
"""

from __future__ import annotations


class BootImageControllerError(Exception):
    """Base of every error this project raises on purpose."""


class InputError(BootImageControllerError):
    """Input that cannot be parsed: names the object, the field and what is wrong."""

    def __init__(self, obj: str, field: str | None, problem: str) -> None:
        self.obj = obj
        self.field = field
        self.problem = problem
        where = f"{obj}: {field}" if field else obj
        super().__init__(f"{where}: {problem}")

    def located(self, origin: str | None) -> InputError:
        """The same error naming where the object came from (a file), when that is known."""
        return type(self)(f"{origin}: {self.obj}", self.field, self.problem) if origin else self


class GoldenDataError(InputError):
    """The coreos-bootimages ConfigMap or a stream JSON document is unusable."""


class ProviderSpecError(InputError):
    """A MachineSet's providerSpec lacks or mistypes a field the platform rules need."""


class VersionError(InputError):
    """A version string (RHCOS build id or OCP version) that does not parse."""


class SelectorError(InputError):
    """A label selector that does not parse."""


class AlephError(InputError):
    """An aleph file that is not one of the known formats."""


class UserDataError(InputError):
    """A user-data secret's Ignition config that cannot be parsed, or cannot be carried to spec 3."""
