"""Where the kubeconfig is, and what is wrong when there is none: plain file checks, kept apart from
`client` so that commands reading files (`fleet` on must-gathers) import no Kubernetes client."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def default_kubeconfig() -> Path:
    """Where kubectl looks without `--kubeconfig`: `$KUBECONFIG`'s first file, else ~/.kube/config
    (which may not exist)."""
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(os.path.expanduser(env or "~/.kube/config"))


def missing_kubeconfig() -> str | None:
    """What is wrong when no kubeconfig file can be found (None: one exists, or nothing was named).

    `KUBECONFIG=missing` is a different mistake from not setting it: say which files it names.
    """
    value = os.environ.get("KUBECONFIG", "")
    paths = [p for p in value.split(os.pathsep) if p]
    if paths:
        if any(Path(os.path.expanduser(p)).is_file() for p in paths):
            return None
        return f"$KUBECONFIG names {', '.join(paths)}, and no such file exists"
    if default_kubeconfig().is_file():
        return None
    return "no kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, or log in (~/.kube/config does not exist)"


def contexts_of(doc: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """A parsed kubeconfig's context names and its `current-context` (None when unset or not a
    string; it may name a context the file lacks)."""
    entries = doc.get("contexts") or []
    names = [str(c["name"]) for c in entries if isinstance(c, dict) and isinstance(c.get("name"), str)]
    current = doc.get("current-context")
    return names, current if isinstance(current, str) and current else None
