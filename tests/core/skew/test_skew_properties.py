"""Parsers raise only the project's error types on arbitrary text, and never hang."""

from __future__ import annotations

import json

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
