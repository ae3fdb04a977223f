"""The data files shipped in the package, and their one reader.

`published-images.json` is the bundled index of published RHCOS boot images
(`scripts/generate_index.py`); the pure core takes it as a `PublishedImageIndex` from its callers.
`botocore/` holds botocore's EC2 model cut to DescribeImages and its endpoints cut to EC2 and STS
(`hack/gen_botocore_data.py`), put first on the search path of the daemon's boto3 clients
(`cloud/aws.py`): botocore's whole files cost about 22 MiB more per process.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..core.index import PublishedImageIndex

INDEX_RESOURCE = "published-images.json"
BOTOCORE_MODELS = "botocore"
EC2_API_VERSION = "2016-11-15"  # the EC2 API version botocore has shipped since 2016


@lru_cache(maxsize=1)
def bundled_index() -> PublishedImageIndex:
    """The bundled index, read once (an empty one when the package was built without it)."""
    try:
        text = resources.files(__name__).joinpath(INDEX_RESOURCE).read_text()
    except FileNotFoundError:
        return PublishedImageIndex()
    return PublishedImageIndex.from_json(json.loads(text))


def botocore_models() -> str:
    """The folder botocore's loader searches first for the daemon's cut service models."""
    return str(resources.files(__name__).joinpath(BOTOCORE_MODELS))


__all__ = ["BOTOCORE_MODELS", "EC2_API_VERSION", "INDEX_RESOURCE", "botocore_models", "bundled_index"]
