#!/usr/bin/env python3
"""Write the botocore data the daemon's boto3 clients load first: botocore's own, cut to what the
daemon calls.

botocore builds every EC2 client from the whole EC2 model (hundreds of operations, about 16 MiB
resident once parsed) and the endpoints of every AWS service (`endpoints.json`, about 7 MiB); the
daemon only ever calls EC2 DescribeImages (an AMI by id, the Marketplace AMIs of a product) and,
with web identity, STS. With these first on the loader's search path (`cloud/aws.py`), an EC2
client costs about 1 MiB instead of 23 (issue 48, docs/benchmarks.md "Footprint"):

- `ec2/<version>/service-2.json`: the DescribeImages operation and every shape it reaches;
- `endpoints.json`: every partition and region, with the `ec2` and `sts` services only.

The endpoint rules, paginators and waiters still come from botocore. Derived from botocore's data
(Apache-2.0), regenerated when botocore is upgraded (the test of cloud/aws.py runs `--check`).

    python hack/gen_botocore_data.py            # rewrite them from the installed botocore
    python hack/gen_botocore_data.py --check    # exit 1 if they differ from what the installed botocore gives
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import botocore
import botocore.loaders

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bootimage_controller.data import BOTOCORE_MODELS, EC2_API_VERSION  # noqa: E402

OPERATIONS = ("DescribeImages",)
SERVICES = ("ec2", "sts")  # the clients the daemon builds (STS: web identity credentials)
DATA = ROOT / "bootimage_controller" / "data" / BOTOCORE_MODELS


def reached_shapes(model: dict[str, Any], operations: dict[str, Any]) -> set[str]:
    """Every shape the operations' inputs, outputs and errors reach."""
    shapes = model["shapes"]
    stack = [ref["shape"] for op in operations.values()
             for ref in (op.get("input"), op.get("output"), *op.get("errors", ())) if ref]
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        shape = shapes[name]
        stack += [member["shape"] for member in shape.get("members", {}).values()]
        stack += [shape[part]["shape"] for part in ("member", "key", "value") if part in shape]
    return seen


def ec2_model(loader: botocore.loaders.Loader) -> dict[str, Any]:
    model = loader.load_service_model("ec2", "service-2", api_version=EC2_API_VERSION)
    operations = {name: model["operations"][name] for name in OPERATIONS}
    cut = {key: value for key, value in model.items() if key not in ("operations", "shapes")}
    cut["operations"] = operations
    cut["shapes"] = {name: model["shapes"][name] for name in sorted(reached_shapes(model, operations))}
    return cut


def endpoints(loader: botocore.loaders.Loader) -> dict[str, Any]:
    data = loader.load_data("endpoints")
    partitions = [{**p, "services": {name: p["services"][name] for name in SERVICES if name in p["services"]}}
                  for p in data["partitions"]]
    return {**data, "partitions": partitions}


def files() -> dict[Path, str]:
    """path -> text: sorted keys, one line (they are read, not edited)."""
    loader = botocore.loaders.Loader()  # botocore's own data only, not the cut one
    docs = {DATA / "ec2" / EC2_API_VERSION / "service-2.json": ec2_model(loader), DATA / "endpoints.json": endpoints(loader)}
    return {path: json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n" for path, doc in docs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed files are stale")
    args = parser.parse_args()
    stale = []
    for path, text in files().items():
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)} ({len(text)} bytes, botocore {botocore.__version__})")
    if stale:
        print(f"{', '.join(stale)}: not what botocore {botocore.__version__} gives; run hack/gen_botocore_data.py")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
