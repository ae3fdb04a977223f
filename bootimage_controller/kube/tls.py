"""The API client's TLS context: kubernetes_asyncio's settings, with session resumption.

The daemon opens about 20 HTTPS connections to the API server as it starts: each informer's watch
holds one (HTTP/1.1 cannot share a connection between streams; client-go's HTTP/2 can). Every full
TLS 1.3 handshake costs the server a signature with its key and the client a verification of the
certificate chain. Resuming a session from the ticket the server sent on an earlier connection
skips both. Measured against the loopback kube-apiserver 1.34 (RSA-2048 serving certificate, as
OpenShift's; OpenSSL 3.0 on the client), per connection: a full handshake 2.4 ms of wall time and
0.95 ms of client CPU, a resumed one 1.2 ms and 0.75 ms; and 9 ms less from start to the first
patch at N = 100 (issue 36).

A resumed session is as authenticated as the full handshake that issued its ticket: the ticket is
only offered to the same server name, by the same context (CA, client certificate, verification
flags). A ticket the server no longer accepts (expired, its keys rotated) costs nothing: the server
answers with a full handshake, whose own ticket is then kept.
"""

from __future__ import annotations

import ssl
from collections import deque
from typing import Any

# The newest connections whose tickets may be taken. A TLS 1.3 ticket arrives after the handshake,
# with the first bytes read, so the session is taken from a connection opened earlier, which may
# be closed by then: these are kept (not weakly) for that, four small objects at most.
_RECENT = 4


class ResumingTLSContext(ssl.SSLContext):
    """A client context that offers each new connection the newest session ticket it has seen."""

    _sessions: dict[str | None, ssl.SSLSession]
    _recent: dict[str | None, deque[ssl.SSLObject]]

    def wrap_bio(  # type: ignore[override]  # typeshed's stub names the parameters differently
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        """asyncio's TLS transport calls this for every connection it opens."""
        if server_side:
            return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        if session is None:
            session = self._resumable(server_hostname)
        try:
            obj = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        except ValueError:  # a session OpenSSL will not take: never worth a connection not opened
            self._sessions.pop(server_hostname, None)
            obj = super().wrap_bio(incoming, outgoing, server_side, server_hostname)
        self._recent.setdefault(server_hostname, deque(maxlen=_RECENT)).append(obj)
        return obj

    def recent_connections(self) -> list[ssl.SSLObject]:
        """The TLS objects of the newest connections opened with this context (at most four per
        server), oldest first: whether each resumed a session is `session_reused`."""
        return [obj for recent in self._recent.values() for obj in recent]

    def _resumable(self, server_hostname: str | None) -> ssl.SSLSession | None:
        for obj in reversed(self._recent.get(server_hostname, ())):
            session = _finished_session(obj)
            if session is not None and session.has_ticket:
                self._sessions[server_hostname] = session
                break
        return self._sessions.get(server_hostname)


def _finished_session(obj: ssl.SSLObject) -> ssl.SSLSession | None:
    """The session of a connection whose handshake completed; None for any other. A connection
    given up in its handshake (a timeout while the API server is stopped) holds a half-made session
    that OpenSSL cannot even copy: reading it raises ValueError ("i2d() failed")."""
    if obj.version() is None:  # the handshake has not completed
        return None
    try:
        return obj.session
    except ValueError:
        return None


def api_tls_context(configuration: Any) -> ssl.SSLContext:
    """What kubernetes_asyncio's `RESTClientObject` builds from `configuration` (its rest.py; the
    tests compare the two), as a `ResumingTLSContext`.

    `create_default_context` is kept for everything it sets (protocol, options, verification, the
    default CA paths when no CA is given) and only the class of its result changes: a subclass with
    the same layout, which `ssl.SSLContext` allows.
    """
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    context.__class__ = ResumingTLSContext
    resuming: Any = context
    resuming._sessions = {}
    resuming._recent = {}
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context
