"""`bootimage-controller fleet`: wire sources, reading and outputs (SPEC section 4)."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

from ..core.fleet import ClusterRow, worst_first
from ..core.hypershift import PlatformImageCatalog, catalog_from_golden
from ..core.skew.verdict import SkewLimits
from ..core.skew.versions import OcpVersion
from ..data import bundled_index
from ..errors import InputError, VersionError
from ..plan.inputs import GoldenSource, load_bootimages_file
from . import render
from .read import FleetOptions
from .run import Progress, read_fleet
from .sources import discover

EXIT_OK, EXIT_UNREADABLE, EXIT_SKEW = 0, 1, 3


def load_fleet_bootimages(values: list[str]) -> tuple[GoldenSource | None, str, dict[str, GoldenSource]]:
    """`--bootimages FILE` (at most once: every cluster) and `--bootimages RELEASE=FILE` (the clusters,
    spokes and NodePools of exactly that release). A ConfigMap's own `data.releaseVersion` must be
    the release it is given for: data of one release passed off as another's would judge wrongly."""
    everyone: tuple[GoldenSource, str] | None = None
    by_release: dict[str, GoldenSource] = {}
    for value in values:
        release, sep, file = value.partition("=")
        if not sep or Path(value).exists():
            if everyone is not None:
                raise InputError(value, None, f"--bootimages FILE is given twice ({everyone[1]}); name the release "
                                 "of each file with --bootimages RELEASE=FILE")
            everyone = (load_bootimages_file(Path(value)), value)
            continue
        try:
            OcpVersion.parse(release)
        except VersionError as exc:
            raise InputError(value, None, f"--bootimages RELEASE=FILE: {exc}") from None
        if release.count(".") < 2:  # a minor's data is what the bundled index has; this is one release's
            raise InputError(value, None, "--bootimages RELEASE=FILE: RELEASE is a whole release, such as 4.16.3")
        source = load_bootimages_file(Path(file))
        named = source.golden.release_version
        if named is not None and named != release:
            raise InputError(file, "data.releaseVersion",
                             f"is {named}, not {release}: --bootimages {release}= takes that release's own data")
        if release in by_release:
            raise InputError(value, None, f"--bootimages {release}= is given twice")
        by_release[release] = source
    return (everyone[0] if everyone else None), (everyone[1] if everyone else ""), by_release


def main(args: argparse.Namespace) -> int:
    if args.html:
        render.check_html_available()
    live = args.paths or args.kubeconfig or args.context or args.all_contexts
    sources = discover(args.paths, args.kubeconfig, args.context, args.all_contexts) if live else []
    index = bundled_index()
    golden, golden_file, by_release = load_fleet_bootimages(args.bootimages)
    given = {release: catalog_from_golden(source.golden) for release, source in by_release.items()}
    if golden is not None:
        catalog = PlatformImageCatalog({}, catalog_from_golden(golden.golden), f"--bootimages {golden_file}", given)
    else:
        catalog = PlatformImageCatalog(index.release_streams, given=given)
    limits = SkewLimits.from_flags(args.ocp_skew_limit, args.rhel_skew_limit, ocp_flag="--ocp-skew-limit",
                                   rhel_flag="--rhel-skew-limit")
    options = FleetOptions(golden, limits, catalog, index, datetime.now(UTC), by_release)
    rows: list[ClusterRow] = []
    if args.prometheus:
        from .prometheus import PrometheusSource, read_prometheus  # aiohttp: only when asked

        rows += asyncio.run(read_prometheus(PrometheusSource(
            args.prometheus, args.bearer_token_file, args.ca_file, args.prometheus_job, args.cluster_label,
            args.timeout), index))
    if sources:
        asyncio.run(read_fleet(sources, options, parallel=args.parallel, timeout=args.timeout, on_rows=rows.extend,
                               progress=Progress(len(sources))))
    ordered = worst_first(rows)
    width = shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 10_000
    sys.stdout.write(render.to_json(ordered) if args.output == "json" else render.table(ordered, width))
    sys.stdout.flush()
    if args.html:
        # After the table: what was read is shown even when the page cannot be written.
        page = render.html_page(ordered, options.now)
        try:
            Path(args.html).write_text(page, encoding="utf-8")
        except OSError as exc:
            raise InputError(str(args.html), None, f"--html: cannot write the page: {exc.strerror or exc}") from None
        print(f"wrote {args.html}", file=sys.stderr)
    if args.fail_on_skew and any(r.upgrades_held for r in ordered):
        return EXIT_SKEW
    return EXIT_UNREADABLE if any(r.error is not None for r in ordered) else EXIT_OK
