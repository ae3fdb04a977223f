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


def target_of(kubeconfig: str | None, context: str | None = None) -> str:
    """`kubeconfig K, context C, server S`: what every error of a command that talks to a cluster
    names (SPEC section 4), read from the file itself, without a client; an unreadable file names
    what it can (its own error says why)."""
    import yaml

    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):  # in a pod: as kube/client decides
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return f"in-cluster service account, server https://{host}:{port}"
    path = kubeconfig or str(default_kubeconfig())
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        doc = None
    doc = doc if isinstance(doc, Mapping) else {}
    name = context or contexts_of(doc)[1]
    ctx = next((c.get("context") for c in doc.get("contexts") or [] if isinstance(c, Mapping) and c.get("name") == name),
               None)
    cluster_name = ctx.get("cluster") if isinstance(ctx, Mapping) else None
    cluster = next((c.get("cluster") for c in doc.get("clusters") or []
                    if isinstance(c, Mapping) and c.get("name") == cluster_name), None)
    server = cluster.get("server") if isinstance(cluster, Mapping) else None
    return f"kubeconfig {path}, context {name or '(none)'}, server {server or '(unknown)'}"
