"""`fleet`'s outputs: the table (one row per cluster, worst first), `-o json` (SPEC section 4) and
the `--html` page (a Jinja2 template, the chart written here as inline SVG: the page needs no network
when it is opened, and the `fleet` extra is Jinja2 alone)."""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from ..core.fleet import STATUS_ORDER, ClusterRow, PoolRow
from ..core.times import format_time
from ..errors import InputError

if TYPE_CHECKING:
    from markupsafe import Markup

HTML_EXTRA = "bootimage-controller[fleet]"  # what `--html` needs installed
CHART_CLUSTERS = 40  # the chart shows the clusters with the oldest boot images; the page lists all
# One colour per status, told apart also by hue for the common colour blindnesses (error purple,
# held red, invalid-image brown, degraded orange, outdated yellow, ok green), and always beside the
# status word: never colour alone. The ink keeps each badge's text at WCAG AA contrast or better.
STATUS_COLOURS = {"error": "#6a1b9a", "held": "#c9190b", "invalid-image": "#8a4f00", "degraded": "#ec7a08",
                  "outdated": "#f0ab00", "ok": "#3e8635"}
STATUS_INK = {"error": "#ffffff", "held": "#ffffff", "invalid-image": "#ffffff", "degraded": "#151515",
              "outdated": "#151515", "ok": "#ffffff"}


def to_json(rows: Sequence[ClusterRow]) -> str:
    return json.dumps({"kind": "BootImageFleet", "clusters": [r.to_json() for r in rows]}, indent=2) + "\n"


def _pools_summary(row: ClusterRow) -> str:
    total, breakdown = _pools_parts(row)
    return total + (f": {breakdown}" if breakdown else "")


def _pools_parts(row: ClusterRow) -> tuple[str, str]:
    """(`7`, `1 patch, 3 mco-patch, 1 unknown, 2 skip`): the pools, then by the next write in plan's
    ACTION words: who acts, not only the planner's decision, which says `patch` for the MCO's pools
    too (issue 47). No-ops are the rest of the total."""
    pools = row.every_pool
    if not pools:
        return "-", ""
    counts = Counter(next_action(p) for p in pools)
    parts = [f"{n} {a}" for a, n in sorted(counts.items(), key=lambda item: _ACTION_ORDER.get(item[0], 99))
             if a != "noop"]
    return str(len(pools)), ", ".join(parts)


_ACTION_ORDER = {a: i for i, a in enumerate(("patch", "downgrade", "after-upgrade", "mco-patch", "mco-downgrade",
                                             "mco-after-upgrade", "propose", "conflict", "unknown", "error", "skip"))}


def next_action(pool: PoolRow) -> str:
    """The pool's ACTION as `plan` prints it: its next write's, else the decision's."""
    if pool.next_write is not None and pool.next_write.get("action"):
        return pool.next_write["action"]
    return pool.action or "-"


def verified_summary(row: ClusterRow) -> str:
    """`2/3`: the machine pools whose boot image a joined node has proven, of those judged."""
    judged = [p for p in row.pools if p.verified is not None]
    if not judged:
        return "-"
    return f"{sum(p.verdict == 'verified' for p in judged)}/{len(judged)}"


def _oldest(row: ClusterRow) -> str:
    """`812 d (4.16)`: the oldest pool's age and the release that shipped its boot image."""
    aged = [p for p in row.every_pool if p.boot_image_age_days is not None]
    if not aged:
        return "-"
    oldest = max(aged, key=lambda p: p.boot_image_age_days or 0)
    shipped = f" ({oldest.current_openshift})" if oldest.current_openshift else ""
    return f"{oldest.boot_image_age_days} d{shipped}"


_URL = re.compile(r"https?://[^\s<>\"')]+[^\s<>\"').,;:]")


def linked(text: str | None) -> Markup:
    """Text with its URLs as links (the skew message's documentation, runbooks): escaped first, so
    a name is never markup."""
    from markupsafe import Markup
    from markupsafe import escape as html_escape

    out, last = [], 0
    value = text or ""
    for m in _URL.finditer(value):
        out += [html_escape(value[last:m.start()]),
                Markup('<a href="{0}" rel="noreferrer">{0}</a>').format(m.group(0))]
        last = m.end()
    out.append(html_escape(value[last:]))
    return Markup("").join(out)


def _anchors(rows: Sequence[ClusterRow]) -> dict[str, str]:
    """A stable element id per cluster name (names may hold anything; ids must not)."""
    return {r.name: f"cluster-{i}" for i, r in enumerate(rows, 1)}


def note(row: ClusterRow) -> str:
    """What to look at first: the error, the pools holding upgrades, the missing images."""
    if row.error is not None:
        return row.error
    if row.upgrades_held:
        return f"next upgrade held by {', '.join(row.held_by) or 'skew'}"
    missing = [f"{p.name}: {p.missing_platform_image}" for p in row.every_pool if p.valid_platform_image is False]
    if missing:
        return "no platform image: " + "; ".join(missing)
    failed = [f"{p.name} ({(p.verified or {}).get('image') or p.current_release or 'its image'})"
              for p in row.boot_failures]
    if failed:
        return "boot image failed its first boot: " + "; ".join(failed)
    errors = [f"{p.name}: {p.reason}" for p in row.every_pool if p.action == "error"]
    moving = [p for p in row.every_pool if p.stream_after_upgrade]
    if moving:
        lacking = [p.name for p in moving if (p.stream_after_upgrade or {}).get("validPlatformImage") is False]
        after = moving[0].stream_after_upgrade or {}
        errors.append(f"{len(moving)} NodePool(s) move to {after.get('stream')} at {after.get('at', '')[:3]}"
                      + (f", no image for {', '.join(lacking)}" if lacking else ""))
    return "; ".join(errors)


# Dropped, in this order, when a terminal is too narrow for the rest: what stays tells the clusters
# apart (CLUSTER, never cut), says how they stand (STATUS, POOLS, OLDEST) and what decides (NOTE).
_FLEET_DROP = ("INSTALLED", "PLATFORM", "RELEASE", "VERIFIED")


def table(rows: Sequence[ClusterRow], width: int = 160) -> str:
    header = ["CLUSTER", "STATUS", "PLATFORM", "RELEASE", "INSTALLED", "POOLS", "VERIFIED", "OLDEST", "NOTE"]
    body = [[r.name, r.status, r.platform or "-", r.release or "-", r.install_release or "-", _pools_summary(r),
             verified_summary(r), _oldest(r), note(r)] for r in rows]

    def fixed_width(columns: list[list[str]]) -> int:
        return sum(max(len(line[i]) for line in columns) for i in range(len(columns[0]) - 1)) + 2 * (len(columns[0]) - 1)

    table_rows = [header, *body]
    for column in _FLEET_DROP:
        if fixed_width(table_rows) <= width:
            break
        i = table_rows[0].index(column)
        table_rows = [line[:i] + line[i + 1:] for line in table_rows]
    if fixed_width(table_rows) > width:
        # Still too wide: POOLS keeps its total and the breakdown goes under the row, before the NOTE.
        i = table_rows[0].index("POOLS")
        for line, row in zip(table_rows[1:], rows, strict=True):
            total, breakdown = _pools_parts(row)
            line[i] = total
            line[-1] = "; ".join(part for part in (breakdown, line[-1]) if part)
    widths = [max(len(line[i]) for line in table_rows) for i in range(len(table_rows[0]) - 1)]
    out = []
    for n, line in enumerate(table_rows):
        cells = [c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)]
        text = "  ".join([*cells, line[-1]]).rstrip()
        if len(text) <= width or n == 0:
            out.append(text if len(text) <= width else "  ".join(cells).rstrip())
            continue
        # Too wide: the NOTE (what decides: the error, who holds the upgrade) goes under the row,
        # wrapped at spaces, never cut.
        out.append("  ".join(cells).rstrip())
        out.extend(textwrap.wrap(line[-1], width=max(width, 40), initial_indent="    ", subsequent_indent="    ",
                                 break_long_words=False, break_on_hyphens=False))
    counts = Counter(r.status for r in rows)
    summary = ", ".join(f"{counts[s]} {s}" for s in STATUS_ORDER if counts[s])
    noun = "cluster" if len(rows) == 1 else "clusters"
    return "\n".join(out) + f"\n\n{len(rows)} {noun}: {summary}\n"


# ---- the page ---------------------------------------------------------------------------------


def charted(rows: Sequence[ClusterRow]) -> list[ClusterRow]:
    """The clusters the chart draws: those with a dated boot image, the oldest first."""
    aged = [r for r in rows if r.oldest_age_days is not None]
    return sorted(aged, key=lambda r: -(r.oldest_age_days or 0))[:CHART_CLUSTERS]


# The chart's geometry (px): a label line above each bar, so a name is never cut, at a readable size.
CHART_WIDTH, CHART_LABEL_HEIGHT, CHART_BAR_HEIGHT, CHART_GAP = 1000, 18, 14, 8
CHART_BAR_SPACE = 820  # the longest bar; the rest of the row holds its value
CHART_FONT = 14  # px in a 1000 px wide drawing: readable at 1280 px and up


def age_chart_svg(rows: Sequence[ClusterRow]) -> str:
    """Horizontal bars, written as SVG here: each pool's boot image age in days, grouped by cluster
    (the clusters with the oldest boot images first), coloured by the cluster's status and named
    with it (not colour alone). Every name is text: XML-escaped, never read as markup or TeX."""
    bars: list[tuple[str, int, str]] = []
    for r in charted(rows):
        for p in r.every_pool:
            if p.boot_image_age_days is not None:
                shipped = f", {p.current_openshift}" if p.current_openshift else ""
                bars.append((f"{r.name} / {p.name} ({r.status}{shipped})", p.boot_image_age_days, r.status))
    longest = max((b[1] for b in bars), default=1) or 1
    row = CHART_LABEL_HEIGHT + CHART_BAR_HEIGHT + CHART_GAP
    top = 40
    height = top + row * len(bars) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{height}" '
           f'viewBox="0 0 {CHART_WIDTH} {height}" font-family="sans-serif" font-size="{CHART_FONT}" role="img">',
           '<title>Boot image age per cluster and pool</title>',
           '<text x="0" y="18" font-size="16" font-weight="bold">Boot image age per cluster and pool '
           '(days since the RHCOS build)</text>']
    for i, (label, days, status) in enumerate(bars):
        y = top + i * row
        width = max(1, round(CHART_BAR_SPACE * days / longest))
        out.append(f'<g id="age-bar-{i}"><text x="0" y="{y + CHART_LABEL_HEIGHT - 4}">{escape(label)}</text>'
                   f'<rect x="0" y="{y + CHART_LABEL_HEIGHT}" width="{width}" height="{CHART_BAR_HEIGHT}" '
                   f'fill="{STATUS_COLOURS[status]}"/>'
                   f'<text x="{width + 6}" y="{y + CHART_LABEL_HEIGHT + CHART_BAR_HEIGHT - 2}">{days} d</text></g>')
    out.append("</svg>")
    return "\n".join(out)


def check_html_available() -> None:
    """`--html` needs the `fleet` extra (Jinja2): say so before any cluster is read."""
    try:
        import jinja2  # noqa: F401
    except ImportError as exc:
        raise InputError("--html", None, f"needs Jinja2 ({exc.name} is missing): pip install '{HTML_EXTRA}'") from None


def html_page(rows: Sequence[ClusterRow], generated: datetime) -> str:
    check_html_available()
    import jinja2
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bootimage_controller.fleet", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )
    counts = Counter(r.status for r in rows)
    context: dict[str, Any] = {
        "rows": rows,
        "generated": format_time(generated),
        "summary": [(s, counts[s], STATUS_COLOURS[s], STATUS_INK[s]) for s in STATUS_ORDER if counts[s]],
        "errors": [r for r in rows if r.error is not None],
        "held": [r for r in rows if r.upgrades_held],
        "undated": [(r, p) for r in rows for p in r.every_pool if p.boot_image_age_days is None],
        "anchors": _anchors(rows),
        "inks": STATUS_INK,
        "linked": linked,
        "oldest": _oldest,
        "chart_limit": CHART_CLUSTERS,
        "invalid": [(r, p) for r in rows for p in r.every_pool if p.valid_platform_image is False],
        "pools": sum(len(r.every_pool) for r in rows),
        "chart": age_chart_svg(rows),
        "charted": len(charted(rows)),
        "colours": STATUS_COLOURS,
        "note": note,
        "pool_cells": _pool_cells,
    }
    return env.get_template("fleet.html.j2").render(context)


def _pool_cells(p: PoolRow) -> list[Markup]:
    def release(build: str | None, ocp: str | None) -> str:
        return f"{build} ({ocp})" if build and ocp else build or "-"

    manager = f"{p.manager} ({p.writer_name})" if p.manager and p.writer_name else p.manager or "-"
    cells = [f"{p.namespace}/{p.name}", p.kind, p.stream or "-", p.architecture or "-", manager,
             release(p.current_release, p.current_openshift), release(p.target_release, p.target_openshift),
             "-" if p.boot_image_age_days is None else str(p.boot_image_age_days),
             f"{next_action(p)} {p.reason}" if p.action else "-",
             _verdict_cell(p),
             "" if p.valid_platform_image is None else ("yes" if p.valid_platform_image else
                                                        f"no: {p.missing_platform_image}")]
    return [breakable(cell) for cell in cells]


# Where a long name may wrap (issue 47, item 4): after `-`, `/`, `.`, `_` and `:`, and between the
# words of a CamelCase reason or kind; never inside a word, as `overflow-wrap: anywhere` did
# ("bootima ge-controlle r" at 1280 px).
_BREAK_AFTER = re.compile(r"(?<=[-/._:])(?=[^\s<])|(?<=[a-z])(?=[A-Z])")


def breakable(text: str) -> Markup:
    """`text` escaped for HTML, with `<wbr>` where it may wrap."""
    from markupsafe import Markup, escape

    return Markup(_BREAK_AFTER.sub("<wbr>", str(escape(text))))


def _verdict_cell(p: PoolRow) -> str:
    """The pool's boot verdict and what proved it (`verified: node n1`), `-` for a NodePool."""
    v = p.verified
    if v is None:
        return "-"
    proof = f": node {v['node']}" if v.get("node") else f": {v['reason']}" if v.get("reason") else ""
    return f"{v.get('verdict')}{proof}"
