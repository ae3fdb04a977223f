"""The data files shipped in the package, and their one reader.

`published-images.json` is the bundled index of published RHCOS boot images
(`scripts/generate_index.py`); the pure core takes it as a `PublishedImageIndex` from its callers.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..core.index import PublishedImageIndex

INDEX_RESOURCE = "published-images.json"


@lru_cache(maxsize=1)
def bundled_index() -> PublishedImageIndex:
    """The bundled index, read once (an empty one when the package was built without it)."""
    try:
        text = resources.files(__name__).joinpath(INDEX_RESOURCE).read_text()
    except FileNotFoundError:
        return PublishedImageIndex()
    return PublishedImageIndex.from_json(json.loads(text))


__all__ = ["INDEX_RESOURCE", "bundled_index"]
