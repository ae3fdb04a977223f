"""`/metrics` written while it is made: one family, or one slice of a large family, at a time.

prometheus-client's own aiohttp handler renders the whole registry into one list of lines, joins
it and encodes it before the first byte is sent. At 5,000 pools (15,000 per-pool series) that is
2.5 MB of text held three times over, plus every family's samples: one scrape raised the continuous
daemon's peak memory by about 9 MiB (issue 36). Here the same prometheus-client encoders render
each family (large gauge families in slices of `SLICE` samples) and the piece is written before
the next is made, so a scrape holds one family's samples and one slice's text. The bytes are the
library's own: tests compare the streamed body with `generate_latest` for both formats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

SLICE = 500  # samples rendered at once; 500 per-pool lines are about 100 KB of text
OPENMETRICS = "application/openmetrics-text"
EOF = b"# EOF\n"


class _OneFamily:
    """A registry of one family: what prometheus-client's encoders take."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> list[Metric]:
        return [self._family]


def _slices(family: Metric) -> Iterator[Metric]:
    # Only gauges are sliced: counters and histograms carry `_created` (and `_gsum`/`_gcount`)
    # samples that the text encoder moves after the family's own lines, once per family.
    if family.type != "gauge" or len(family.samples) <= SLICE:
        yield family
        return
    for start in range(0, len(family.samples), SLICE):
        part = Metric(family.name, family.documentation, family.type, family.unit)
        part.samples = family.samples[start:start + SLICE]
        yield part


def _without_header(text: bytes) -> bytes:
    """A slice after the first: its `# HELP`/`# TYPE`/`# UNIT` lines were already written (a sample
    line never starts with `#`)."""
    while text.startswith(b"#"):
        text = text[text.index(b"\n") + 1:]
    return text


def _family_pieces(family: Metric, encoder: Callable[[_OneFamily], bytes], openmetrics: bool) -> Iterator[bytes]:
    for i, part in enumerate(_slices(family)):
        text = encoder(_OneFamily(part))
        if openmetrics:
            text = text.removesuffix(EOF)
        yield _without_header(text) if i else text


def render(families: Iterable[Metric], accept: str) -> tuple[str, Iterator[bytes]]:
    """The content type the Accept header chose, and the body in pieces."""
    encoder, content_type = choose_encoder(accept)
    openmetrics = content_type.startswith(OPENMETRICS)

    def pieces() -> Iterator[bytes]:
        for family in families:
            yield from _family_pieces(family, encoder, openmetrics)
            del family  # not kept while the collector builds the next one
        if openmetrics:
            yield EOF

    return content_type, pieces()


def metrics_handler(registry: CollectorRegistry) -> Handler:
    """GET /metrics: content negotiation (OpenMetrics or text), `name[]` filters and gzip, as
    prometheus-client's `make_aiohttp_handler`, streamed."""

    async def handler(request: web.Request) -> web.StreamResponse:
        names = request.query.getall("name[]", [])
        source = registry.restricted_registry(names) if names else registry
        content_type, pieces = render(source.collect(), ",".join(request.headers.getall(hdrs.ACCEPT, [])))
        response = web.StreamResponse(headers={hdrs.CONTENT_TYPE: content_type})
        response.enable_compression()
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
        await response.write_eof()
        return response

    return handler
