"""The cluster-wide proxy (`proxies.config.openshift.io/cluster`) for the cloud and vCenter clients.

The Deployment is not managed by the cluster-version operator or OLM, so nothing injects the proxy
variables into it. The daemon reads the Proxy's `status` (what the network operator validated and
publishes: `httpProxy`, `httpsProxy`, `noProxy`) and sets `HTTP_PROXY`, `HTTPS_PROXY` and
`NO_PROXY` (and their lower-case twins) in its own environment, which boto3, the Google and Azure
SDKs and the OVA downloads read; the cloud clients are then rebuilt so a change takes effect.

The Kubernetes client is not affected: it resolved its proxy once at start (kube.client), and the
API server is in `noProxy` anyway. Variables set some other way (the pod spec) are left alone while
the Proxy says nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

_VARIABLES = {"http": "HTTP_PROXY", "https": "HTTPS_PROXY", "no": "NO_PROXY"}


@dataclass(frozen=True)
class ProxySettings:
    http: str = ""
    https: str = ""
    no_proxy: str = ""

    @classmethod
    def from_object(cls, proxy: Mapping[str, Any] | None) -> ProxySettings:
        status = (proxy or {}).get("status") if isinstance((proxy or {}).get("status"), Mapping) else {}
        assert status is not None

        def text(key: str) -> str:
            value = status.get(key)
            return value.strip() if isinstance(value, str) else ""

        return cls(text("httpProxy"), text("httpsProxy"), text("noProxy"))

    @property
    def empty(self) -> bool:
        return not (self.http or self.https)

    def values(self) -> dict[str, str]:
        return {"http": self.http, "https": self.https, "no": self.no_proxy}


class ProxyEnvironment:
    """Keeps the process environment in step with the cluster's Proxy."""

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self._ours: ProxySettings | None = None  # what we set last (None: nothing yet)

    def apply(self, settings: ProxySettings) -> bool:
        """Set (or clear) the variables; True when anything changed."""
        if settings.empty and self._ours is None:
            return False  # the Proxy says nothing and we never set anything: leave the pod's own
        if settings == self._ours:
            return False
        for key, value in settings.values().items():
            for name in (_VARIABLES[key], _VARIABLES[key].lower()):
                if value:
                    self.environ[name] = value
                else:
                    self.environ.pop(name, None)
        self._ours = None if settings.empty else settings
        return True
