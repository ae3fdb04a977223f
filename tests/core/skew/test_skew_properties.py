"""Parsers raise only the project's error types on arbitrary text, and never hang."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootimage_controller.core.skew.aleph import parse_aleph
from bootimage_controller.core.skew.versions import OcpVersion, RhelVersion, parse_rhcos_version
from bootimage_controller.errors import AlephError, InputError, VersionError

# Text shaped like versions (digits, dots, dashes) finds more edge cases than uniform unicode.
versionish = st.text(alphabet=st.sampled_from("0123456789.-+v \n٣abc"), max_size=40)
# Long digit runs: int() refuses more than 4300 digits, a classic way for a parser to leak ValueError.
long_digits = st.builds(
    lambda n, digit, tail: digit * n + tail,
    st.integers(1, 6000),
    st.sampled_from("19٣"),
    st.sampled_from([".1", ".2.3", ".13.0-rc.1", ".94.202410090804-0", ".6.20250402-0", ""]),
)
any_text = st.one_of(st.text(max_size=300), versionish, long_digits)
fast = settings(max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(any_text)
def test_parse_rhcos_version_raises_only_version_error(text: str) -> None:
    try:
        v = parse_rhcos_version(text)
    except VersionError:
        return
    assert v.rhel.major >= 0 and v.text == text


@fast
@given(any_text)
def test_ocp_and_rhel_parse_raise_only_version_error(text: str) -> None:
    for parse in (OcpVersion.parse, RhelVersion.parse):
        try:
            v = parse(text)
        except VersionError:
            continue
        assert parse(str(v)) == v  # what parses prints back to the same version


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["version", "build", "ref", "x"]), children, max_size=4)
    ),
    max_leaves=12,
)


@fast
@given(st.one_of(st.text(max_size=300), json_values.map(json.dumps)))
def test_parse_aleph_raises_only_aleph_error(text: str) -> None:
    try:
        info = parse_aleph(text, "aleph.json")
    except AlephError as exc:
        assert exc.obj == "aleph.json"
        return
    assert info.build_id and len(info.build_id) <= 128
    assert isinstance(AlephError("f", None, "p"), InputError)


@given(st.text(alphabet="0123456789", min_size=8, max_size=8) | st.text(alphabet="0123456789", min_size=12, max_size=12))
def test_a_build_time_is_what_strptime_reads_from_the_stamp(stamp: str) -> None:
    """`built` reads the digits itself (strptime was the planner's largest own time): the same date,
    and None for a stamp that is not one (month 13, 30 February)."""
    build = parse_rhcos_version(f"9.6.{stamp}-0") if len(stamp) == 8 else parse_rhcos_version(f"416.94.{stamp}-0")
    fmt = "%Y%m%d%H%M" if len(stamp) == 12 else "%Y%m%d"
    try:
        expected: datetime | None = datetime.strptime(stamp, fmt).replace(tzinfo=UTC)
    except ValueError:
        expected = None
    assert build.built == expected
