"""A 403 said as what was refused: the verb, the resource, the user, and the role that grants it.

The API server's Forbidden message has a fixed shape (k8s.io/apiserver, `forbiddenMessage`):
`User "alice" cannot list resource "machinesets" in API group "machine.openshift.io" in the
namespace "openshift-machine-api"`. Commands read it back into a `Refusal` so a person without
rights learns which right, and which of the project's ClusterRoles (manifests/rbac-users.yaml)
holds it, in one sentence instead of one warning per read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..constants import MCO_NAMESPACE, ROLE_DAEMON, ROLE_OPERATOR, ROLE_READER

_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?(?: in the namespace "(?P<namespace>[^"]+)")?'
)

# The commands that only read, and the role to name for them; every other command writes.
READ_ONLY_COMMANDS = frozenset({"plan", "fleet"})


@dataclass(frozen=True)
class Refusal:
    """One refused request, as the API server's message states it."""

    verb: str
    resource: str  # "machinesets.machine.openshift.io", or "configmaps" for the core group
    namespace: str | None
    user: str | None

    @classmethod
    def from_message(cls, message: str) -> Refusal | None:
        m = _FORBIDDEN.search(message or "")
        if m is None:
            return None
        group = m.group("group")
        resource = f"{m.group('resource')}.{group}" if group else m.group("resource")
        return cls(m.group("verb"), resource, m.group("namespace"), m.group("user") or None)

    @property
    def action(self) -> str:
        """`list machinesets.machine.openshift.io in openshift-machine-api`."""
        return f"{self.verb} {self.resource}" + (f" in {self.namespace}" if self.namespace else "")


# command -> (the ClusterRole that grants what it does, what that is, the manifest defining it)
_ROLES = {
    "read": (ROLE_READER, "plan and fleet read", "manifests/rbac-users.yaml"),
    "write": (ROLE_OPERATOR, "rollback, hand-over, hand-back and release-claims need", "manifests/rbac-users.yaml"),
    "run": (ROLE_DAEMON, "the daemon needs", "manifests/rbac-controller.yaml, with its Roles"),
}


def role_for(command: str | None) -> str:
    return _ROLES[_use(command)][0]


def _use(command: str | None) -> str:
    if command == "run":
        return "run"
    return "read" if command in READ_ONLY_COMMANDS else "write"


def refused_sentence(refusals: Sequence[Refusal], command: str | None, *, unparsed: Sequence[str] = ()) -> str:
    """`user "alice" may not list machinesets... (403 Forbidden); the ClusterRole ... grants ...`."""
    actions = list(dict.fromkeys([r.action for r in refusals] + list(unparsed)))
    user = next((r.user for r in refusals if r.user), None)
    who = f'user "{user}"' if user else "this user"
    use = _use(command)
    role, grants, manifest = _ROLES[use]
    shown = ", ".join(actions[:4]) + (f" and {len(actions) - 4} more" if len(actions) > 4 else "")
    text = f"{who} may not {shown} (403 Forbidden); the ClusterRole {role} grants what {grants}"
    if use == "run":  # a ClusterRole and namespaced Roles, bound to the ServiceAccount by the install
        return f"{text} ({manifest}): run it as the ServiceAccount {MCO_NAMESPACE}/{role} the install binds them to"
    grant = f"oc adm policy add-cluster-role-to-user {role} {user}" if user else f"bind the ClusterRole {role}"
    return f"{text} ({manifest}): {grant}"


def answer_sentence(exc: BaseException, command: str | None) -> str | None:
    """An answer of the API server (a typed `ApiError`, or a raw `ApiException` with a status) in the
    words an administrator can act on: a 403 names the permission to grant, a 401 the credentials,
    any other the server's own status and message. None when `exc` is no answer at all (nothing
    came back, or a fault of ours). Here so that only kube/ reads HTTP statuses."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from .api_errors import ApiError, status_of
    from .retry import describe

    if isinstance(exc, ApiError):
        status, message = exc.status, exc.message
    elif isinstance(exc, ApiException) and exc.status:
        status, message = int(exc.status), status_of(exc)[1]
    else:
        return None
    text = describe(exc)
    refusal = Refusal.from_message(message or "") if status == 403 else None
    if refusal is not None:
        return refused_sentence([refusal], command)
    if status == 401:
        return f"the API server did not accept the credentials ({text}): log in again or check the kubeconfig"
    return f"the API server answered {text}"
