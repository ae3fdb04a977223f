"""One SDK client per set of credentials, shared by the GCP and Azure lookups."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

C = TypeVar("C")


class RebuildableClient(Generic[C]):
    """Builds the SDK client on first use; a credentials change (a rotated Secret) drops it."""

    def __init__(self, credentials: C, endpoint: str | None, build: Callable[[C, str | None], Any]) -> None:
        self._credentials = credentials
        self._endpoint = endpoint
        self._build = build
        self._lock = threading.Lock()
        self._client: Any = None

    @property
    def credentials(self) -> C:
        return self._credentials

    @property
    def endpoint(self) -> str | None:
        return self._endpoint

    def set_credentials(self, credentials: C) -> bool:
        with self._lock:
            if credentials == self._credentials:
                return False
            self._credentials = credentials
            # Not closed: a lookup may still be using it; it goes with its last reference.
            self._client = None
            return True

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._build(self._credentials, self._endpoint)
            return self._client

    def _take_client(self) -> Any:
        with self._lock:
            old, self._client = self._client, None
        return old
