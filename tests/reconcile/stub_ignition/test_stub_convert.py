"""convert_stub_ignition: spec 2.x stubs become valid spec 3.5.0, 3.x stays byte-for-byte."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from bootimage_controller.constants import USER_DATA_SECRET_KEY
from bootimage_controller.core.ignition import convert_stub_ignition
from bootimage_controller.errors import InputError, UserDataError

from .ign35_shape import problems

SOURCE = "secret openshift-machine-api/worker-user-data"
MCS = "https://api-int.ci-op-abc123.example.com:22623/config/worker"
PEM = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIDEDCCAfigAwIBAgIIZ2K4kMw0lJ0wDQYJKoZIhvcNAQELBQAwJjESMBAGA1UE\n"
    "CxMJb3BlbnNoaWZ0MRAwDgYDVQQDEwdyb290LWNhMB4XDTIwMDkxNDEwMzQwOFoX\n"
    "-----END CERTIFICATE-----\n"
)
CA = "data:text/plain;charset=utf-8;base64," + base64.b64encode(PEM.encode()).decode()


def installer_stub(version: str = "2.2.0") -> dict[str, Any]:
    """The worker pointer config an OpenShift 4.1-4.5 installer wrote (spec 2.2.0)."""
    return {
        "ignition": {
            "config": {"append": [{"source": MCS, "verification": {}}]},
            "security": {"tls": {"certificateAuthorities": [{"source": CA, "verification": {}}]}},
            "timeouts": {},
            "version": version,
        },
        "networkd": {},
        "passwd": {},
        "storage": {},
        "systemd": {},
    }


def spec2(version: str = "2.2.0", **sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": version}, **sections}


def convert(cfg: dict[str, Any]) -> dict[str, Any]:
    result = convert_stub_ignition(json.dumps(cfg).encode(), SOURCE)
    assert result.changed
    out: dict[str, Any] = json.loads(result.user_data)
    assert problems(out) == []
    return out


def error(cfg: dict[str, Any] | bytes) -> UserDataError:
    raw = cfg if isinstance(cfg, bytes) else json.dumps(cfg).encode()
    with pytest.raises(UserDataError) as exc:
        convert_stub_ignition(raw, SOURCE)
    assert exc.value.obj == SOURCE
    return exc.value


def rooted(path: str, **extra: Any) -> dict[str, Any]:
    return {"filesystem": "root", "path": path, **extra}


def data(text: str) -> dict[str, Any]:
    return {"source": "data:," + text}


# --- the real stub ----------------------------------------------------------------------------


def test_installer_worker_stub_becomes_the_spec_3_pointer_config() -> None:
    result = convert_stub_ignition(json.dumps(installer_stub()).encode(), SOURCE)

    assert (result.changed, result.from_version, result.to_version) == (True, "2.2.0", "3.5.0")
    # The same shape the 4.6+ installer and the MCO's PointerConfig write for spec 3.
    assert json.loads(result.user_data) == {
        "ignition": {
            "config": {"merge": [{"source": MCS}]},
            "security": {"tls": {"certificateAuthorities": [{"source": CA}]}},
            "version": "3.5.0",
        }
    }
    assert problems(json.loads(result.user_data)) == []


@pytest.mark.parametrize("version", ["2.0.0", "2.1.0", "2.2.0", "2.3.0", "2.4.0"])
def test_every_spec_2_version_converts(version: str) -> None:
    cfg = spec2(version, ignition={"version": version, "config": {"append": [{"source": MCS}]}})
    cfg["storage"] = {"files": [rooted("/etc/motd", contents=data("hi"), mode=420)]}
    cfg["systemd"] = {"units": [{"name": "a.service", "enable": True, "contents": "[Unit]"}]}
    cfg["passwd"] = {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA core"]}]}

    out = convert(cfg)

    assert out["ignition"] == {"config": {"merge": [{"source": MCS}]}, "version": "3.5.0"}
    assert out["storage"]["files"] == [
        {"path": "/etc/motd", "overwrite": True, "contents": {"source": "data:,hi"}, "mode": 420}
    ]
    assert out["systemd"]["units"] == [{"name": "a.service", "enabled": True, "contents": "[Unit]"}]
    assert out["passwd"]["users"] == [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA core"]}]


def test_replace_timeouts_verification_and_headers_are_kept() -> None:
    sha = "sha512-" + "ab" * 64
    cfg = spec2(
        "2.4.0",
        ignition={
            "version": "2.4.0",
            "config": {
                "replace": {
                    "source": MCS,
                    "verification": {"hash": sha},
                    "httpHeaders": [{"name": "X-A", "value": "1"}],
                }
            },
            "timeouts": {"httpResponseHeaders": 20, "httpTotal": 0},
            "proxy": {
                "httpProxy": "http://proxy:3128",
                "httpsProxy": "http://proxy:3128",
                "noProxy": [".cluster.local"],
            },
        },
    )

    ign = convert(cfg)["ignition"]

    assert ign["config"] == {
        "replace": {
            "source": MCS,
            "httpHeaders": [{"name": "X-A", "value": "1"}],
            "verification": {"hash": sha},
        }
    }
    assert ign["timeouts"] == {"httpResponseHeaders": 20, "httpTotal": 0}
    assert ign["proxy"] == {
        "httpProxy": "http://proxy:3128",
        "httpsProxy": "http://proxy:3128",
        "noProxy": [".cluster.local"],
    }


def test_repeated_ca_source_is_kept_once() -> None:
    ca = {"source": CA}
    out = convert(
        spec2(ignition={"version": "2.2.0", "security": {"tls": {"certificateAuthorities": [ca, ca]}}})
    )
    assert out["ignition"]["security"]["tls"]["certificateAuthorities"] == [{"source": CA}]


# --- spec 3 is left alone ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b'{"ignition":{"config":{"merge":[{"source":"https://api-int.x:22623/config/worker"}]},"version":"3.1.0"}}',
        b'{\n  "ignition": {"version": "3.2.0"},\n  "passwd": {"users": [{"name": "core"}]}\n}\n',
        '{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/\u00e9t\u00e9"}]}}'.encode(),
        b'{"ignition":{"version":"3.0.0"},"unknownFutureKey":{"a":1}}',
        b'{"ignition":{"version":"3.6.0-experimental"}}',
    ],
)
def test_spec_3_is_returned_byte_for_byte(raw: bytes) -> None:
    result = convert_stub_ignition(raw, SOURCE)

    assert result.changed is False
    assert result.user_data is raw
    assert result.from_version == result.to_version == json.loads(raw)["ignition"]["version"]


def test_converted_output_is_a_fixed_point() -> None:
    once = convert_stub_ignition(json.dumps(installer_stub()).encode(), SOURCE)
    again = convert_stub_ignition(once.user_data, SOURCE)
    assert again.changed is False and again.user_data == once.user_data


# --- files --------------------------------------------------------------------------------------


def test_file_fields_are_kept_and_overwrite_is_explicit() -> None:
    sha = "sha512-" + "cd" * 64
    cfg = spec2(
        storage={
            "files": [
                rooted(
                    "/etc/kubernetes/kubelet.conf",
                    contents={
                        "source": "https://example.com/k.conf",
                        "verification": {"hash": sha},
                        "compression": "gzip",
                    },
                    mode=384,
                    user={"name": "core"},
                    group={"id": 1000},
                ),
                rooted("/etc/keep-if-present", overwrite=False, contents=data("default")),
                rooted("/etc/empty"),
            ]
        }
    )

    files = convert(cfg)["storage"]["files"]

    assert files == [
        {
            "path": "/etc/kubernetes/kubelet.conf",
            # spec 2 files overwrite by default, spec 3 files do not: the default is written out
            "overwrite": True,
            "contents": {
                "source": "https://example.com/k.conf",
                "compression": "gzip",
                "verification": {"hash": sha},
            },
            "mode": 384,
            "user": {"name": "core"},
            "group": {"id": 1000},
        },
        {"path": "/etc/keep-if-present", "overwrite": False, "contents": {"source": "data:,default"}},
        {"path": "/etc/empty", "overwrite": True, "contents": {"source": ""}},
    ]


def test_appended_entries_become_one_file_with_an_append_list() -> None:
    cfg = spec2(
        storage={
            "files": [
                rooted("/etc/hosts.extra", append=True, contents=data("a")),
                rooted("/etc/hosts.extra", append=True, contents=data("b"), mode=420),
            ]
        }
    )

    assert convert(cfg)["storage"]["files"] == [
        {
            "path": "/etc/hosts.extra",
            "overwrite": False,
            "append": [{"source": "data:,a"}, {"source": "data:,b"}],
            "mode": 420,
        }
    ]


def test_a_written_file_followed_by_appends_keeps_both() -> None:
    cfg = spec2(
        storage={
            "files": [
                rooted("/etc/f", contents=data("base")),
                rooted("/etc/f", append=True, contents=data("more")),
            ]
        }
    )
    assert convert(cfg)["storage"]["files"] == [
        {
            "path": "/etc/f",
            "overwrite": True,
            "contents": {"source": "data:,base"},
            "append": [{"source": "data:,more"}],
        }
    ]


def test_duplicate_files_last_one_wins() -> None:
    # Ignition 2.x wrote the entries in order (overwriting by default), so the last write is what
    # a machine got; the MCO's removeIgnDuplicateFilesUnitsUsers keeps the last one too.
    cfg = spec2(
        storage={
            "files": [
                rooted("/etc/f", append=True, contents=data("lost")),
                rooted("/etc/f", contents=data("first"), mode=420),
                rooted("/etc/g", contents=data("g")),
                rooted("/etc//f", contents=data("second"), mode=384),
            ]
        }
    )

    files = convert(cfg)["storage"]["files"]

    assert files == [
        {"path": "/etc/f", "overwrite": True, "contents": {"source": "data:,second"}, "mode": 384},
        {"path": "/etc/g", "overwrite": True, "contents": {"source": "data:,g"}},
    ]


def test_file_on_another_filesystem_is_an_error_naming_the_file() -> None:
    cfg = spec2(
        storage={
            "filesystems": [{"name": "var", "mount": {"device": "/dev/disk/by-label/VAR", "format": "xfs"}}],
            "files": [rooted("/etc/ok"), {"filesystem": "var", "path": "/lib/data"}],
        }
    )

    exc = error(cfg)

    assert exc.field == f"{USER_DATA_SECRET_KEY}.storage.files[1].filesystem"
    assert "/lib/data" in str(exc) and "'var'" in str(exc)


def test_a_later_entry_with_overwrite_false_after_a_write_is_an_error() -> None:
    cfg = spec2(storage={"files": [rooted("/etc/f", contents=data("a")), rooted("/etc/f", overwrite=False)]})
    assert error(cfg).field == "userData.storage.files[1].overwrite"


# --- directories and links ---------------------------------------------------------------------


def test_directories_and_links_are_kept_last_one_wins() -> None:
    cfg = spec2(
        storage={
            "directories": [
                rooted("/var/lib/a", mode=448),
                rooted("/var/lib/a", mode=493, user={"id": 0}, overwrite=True),
            ],
            "links": [
                rooted("/usr/local/bin/k", target="/usr/bin/kubectl"),
                rooted("/etc/hard", target="/etc/hosts", hard=True, group={"name": "wheel"}),
            ],
        }
    )

    storage = convert(cfg)["storage"]

    assert storage["directories"] == [
        {"path": "/var/lib/a", "overwrite": True, "mode": 493, "user": {"id": 0}}
    ]
    assert storage["links"] == [
        {"path": "/usr/local/bin/k", "target": "/usr/bin/kubectl"},
        {"path": "/etc/hard", "group": {"name": "wheel"}, "target": "/etc/hosts", "hard": True},
    ]


@pytest.mark.parametrize(
    ("storage", "systemd", "needle"),
    [
        ({"files": [rooted("/etc/x")], "directories": [rooted("/etc/x")]}, None, "/etc/x"),
        ({"files": [rooted("/opt/l/f")], "links": [rooted("/opt/l", target="/tmp")]}, None, "/opt/l/f"),
        (
            {"files": [rooted("/etc/systemd/system/a.service")]},
            {"units": [{"name": "a.service", "contents": "[Unit]"}]},
            "/etc/systemd/system/a.service",
        ),
        ({"directories": [rooted("/d")], "links": [rooted("/h", target="/d", hard=True)]}, None, "/h"),
    ],
)
def test_path_collisions_spec_3_forbids_are_errors(
    storage: dict[str, Any], systemd: dict[str, Any] | None, needle: str
) -> None:
    cfg = spec2(storage=storage)
    if systemd:
        cfg["systemd"] = systemd
    exc = error(cfg)
    assert exc.field == "userData.storage" and needle in str(exc)


# --- systemd -------------------------------------------------------------------------------------


def test_units_keep_enabled_mask_contents_and_dropins() -> None:
    cfg = spec2(
        systemd={
            "units": [
                {"name": "kubelet.service", "enabled": True, "contents": "[Service]\nExecStart=/bin/true\n"},
                {"name": "zincati.service", "mask": True},
                {"name": "old.service", "enable": True, "enabled": False},
                {"name": "crio.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nX=1\n"}]},
                {"name": "noop.service", "mask": False},
            ]
        }
    )

    assert convert(cfg)["systemd"]["units"] == [
        {"name": "kubelet.service", "enabled": True, "contents": "[Service]\nExecStart=/bin/true\n"},
        {"name": "zincati.service", "mask": True},
        # `enabled` wins over the deprecated `enable` (ign-converter's rule)
        {"name": "old.service", "enabled": False},
        {"name": "crio.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nX=1\n"}]},
        # 2.x mask false meant "leave alone"; spec 3 mask false would unmask
        {"name": "noop.service"},
    ]


def test_duplicate_units_merge_field_by_field_last_one_wins() -> None:
    cfg = spec2(
        systemd={
            "units": [
                {
                    "name": "a.service",
                    "contents": "v1",
                    "enabled": True,
                    "dropins": [{"name": "x.conf", "contents": "x1"}],
                },
                {"name": "b.service", "contents": "b"},
                {
                    "name": "a.service",
                    "dropins": [{"name": "y.conf", "contents": "y"}, {"name": "x.conf", "contents": "x2"}],
                },
                {"name": "a.service", "contents": "v2"},
            ]
        }
    )

    assert convert(cfg)["systemd"]["units"] == [
        {
            "name": "a.service",
            "enabled": True,
            "contents": "v2",
            "dropins": [{"name": "x.conf", "contents": "x2"}, {"name": "y.conf", "contents": "y"}],
        },
        {"name": "b.service", "contents": "b"},
    ]


# --- passwd ------------------------------------------------------------------------------------


def test_users_and_groups_are_kept() -> None:
    cfg = spec2(
        passwd={
            "users": [
                {
                    "name": "admin",
                    "passwordHash": "$6$rounds=4096$salt$hash",
                    "sshAuthorizedKeys": ["ssh-rsa AAAA a"],
                    "uid": 1001,
                    "gecos": "Admin",
                    "homeDir": "/home/admin",
                    "primaryGroup": "admins",
                    "groups": ["wheel", "sudo"],
                    "noCreateHome": False,
                    "shell": "/bin/bash",
                    "system": True,
                },
                {"name": "legacy", "create": {"uid": 2000, "shell": "/bin/sh", "groups": ["users"]}},
            ],
            "groups": [{"name": "admins", "gid": 1500, "system": True}, {"name": "devs"}],
        }
    )

    passwd = convert(cfg)["passwd"]

    assert passwd["users"] == [
        {
            "name": "admin",
            "passwordHash": "$6$rounds=4096$salt$hash",
            "sshAuthorizedKeys": ["ssh-rsa AAAA a"],
            "uid": 1001,
            "gecos": "Admin",
            "homeDir": "/home/admin",
            "primaryGroup": "admins",
            "shell": "/bin/bash",
            "groups": ["wheel", "sudo"],
            "system": True,
        },
        # the deprecated `create` object's fields become the user's own
        {"name": "legacy", "uid": 2000, "shell": "/bin/sh", "groups": ["users"]},
    ]
    assert passwd["groups"] == [{"name": "admins", "gid": 1500, "system": True}, {"name": "devs"}]


def test_duplicate_users_merge_last_one_wins_and_keys_add_up() -> None:
    cfg = spec2(
        passwd={
            "users": [
                {"name": "core", "sshAuthorizedKeys": ["k1", "k2"], "passwordHash": "old"},
                {"name": "core", "sshAuthorizedKeys": ["k2", "k3", "k3"], "passwordHash": "new"},
            ],
            "groups": [{"name": "g", "gid": 1}, {"name": "g", "gid": 2}],
        }
    )

    passwd = convert(cfg)["passwd"]

    assert passwd["users"] == [
        {"name": "core", "passwordHash": "new", "sshAuthorizedKeys": ["k1", "k2", "k3"]}
    ]
    assert passwd["groups"] == [{"name": "g", "gid": 2}]


def test_create_contradicting_the_user_is_an_error() -> None:
    cfg = spec2(passwd={"users": [{"name": "u", "uid": 1, "create": {"uid": 2}}]})
    assert error(cfg).field == "userData.passwd.users[0].create.uid"


# --- storage devices -----------------------------------------------------------------------------


def test_disks_raid_and_filesystems_without_files_convert() -> None:
    cfg = spec2(
        "2.3.0",
        storage={
            "disks": [
                {
                    "device": "/dev/sdb",
                    "wipeTable": True,
                    "partitions": [{"label": "data", "number": 1, "sizeMiB": 1024, "startMiB": 0, "size": 0}],
                }
            ],
            "raid": [{"name": "md0", "level": "raid1", "devices": ["/dev/sdc", "/dev/sdd"], "spares": 0}],
            "filesystems": [
                {"name": "root", "path": "/sysroot"},
                {
                    "name": "data",
                    "mount": {"device": "/dev/disk/by-partlabel/data", "format": "xfs", "label": "data"},
                },
            ],
        },
    )

    storage = convert(cfg)["storage"]

    assert storage["disks"] == [
        {
            "device": "/dev/sdb",
            "wipeTable": True,
            "partitions": [{"label": "data", "number": 1, "sizeMiB": 1024, "startMiB": 0}],
        }
    ]
    assert storage["raid"] == [
        {"name": "md0", "level": "raid1", "devices": ["/dev/sdc", "/dev/sdd"], "spares": 0}
    ]
    assert storage["filesystems"] == [
        {"device": "/dev/disk/by-partlabel/data", "format": "xfs", "label": "data"}
    ]


# --- what cannot be carried over ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cfg", "field"),
    [
        (spec2(networkd={"units": [{"name": "00-eth0.network", "contents": "[Match]"}]}), "networkd.units"),
        (
            spec2(
                storage={
                    "filesystems": [
                        {
                            "name": "v",
                            "mount": {"device": "/dev/sdb", "format": "xfs", "create": {"force": True}},
                        }
                    ]
                }
            ),
            "storage.filesystems[0].mount.create",
        ),
        (spec2(storage={"filesystems": [{"name": "v", "path": "/var"}]}), "storage.filesystems[0].path"),
        (
            spec2(
                storage={"filesystems": [{"name": "root", "mount": {"device": "/dev/sda4", "format": "xfs"}}]}
            ),
            "storage.filesystems[0].name",
        ),
        (
            spec2(storage={"disks": [{"device": "/dev/sdb", "partitions": [{"number": 1, "size": 2048}]}]}),
            "storage.disks[0].partitions[0].size",
        ),
        (spec2(storage={"files": [rooted("/a", append=True, overwrite=True)]}), "storage.files[0].overwrite"),
        (spec2(storage={"files": [rooted("/a", user={"id": 0, "name": "root"})]}), "storage.files[0].user"),
        (spec2(storage={"files": [rooted("/a", mode=0o10000)]}), "storage.files[0].mode"),
        (spec2(storage={"files": [rooted("relative")]}), "storage.files[0].path"),
        (spec2(storage={"files": [{"path": "/a"}]}), "storage.files[0].filesystem"),
        (
            spec2(storage={"files": [rooted("/a", contents={"source": "s3://b/k", "compression": "xz"})]}),
            "storage.files[0].contents.compression",
        ),
        (spec2(systemd={"units": [{"name": "no-suffix"}]}), "systemd.units[0].name"),
        (
            spec2(systemd={"units": [{"name": "a.service", "dropins": [{"name": "x.txt"}]}]}),
            "systemd.units[0].dropins[0].name",
        ),
        (spec2(passwd={"users": [{"name": ""}]}), "passwd.users[0].name"),
        (spec2(unknown={"a": 1}), "unknown"),
        (spec2(storage={"files": [rooted("/a", owner="x")]}), "storage.files[0].owner"),
        # Fields newer than the config's version: Ignition ignored them, so they must not start working.
        (
            spec2("2.3.0", ignition={"version": "2.3.0", "proxy": {"httpProxy": "http://p:3128"}}),
            "ignition.proxy",
        ),
        (
            spec2(
                "2.1.0",
                ignition={
                    "version": "2.1.0",
                    "security": {"tls": {"certificateAuthorities": [{"source": CA}]}},
                },
            ),
            "ignition.security",
        ),
        (spec2("2.0.0", storage={"directories": [rooted("/d")]}), "storage.directories"),
        (spec2("2.1.0", storage={"files": [rooted("/a", append=True)]}), "storage.files[0].append"),
        (
            spec2("2.0.0", systemd={"units": [{"name": "a.service", "enabled": True}]}),
            "systemd.units[0].enabled",
        ),
        # Wrong types.
        (spec2(storage={"files": {"path": "/a"}}), "storage.files"),
        (spec2(storage={"files": [rooted("/a", mode="0644")]}), "storage.files[0].mode"),
        (spec2(storage={"files": [rooted("/a", mode=True)]}), "storage.files[0].mode"),
        (spec2(storage={"files": [rooted("/a", mode=420.0)]}), "storage.files[0].mode"),
        (spec2(systemd={"units": [{"name": "a.service", "enabled": "yes"}]}), "systemd.units[0].enabled"),
        (
            spec2(ignition={"version": "2.2.0", "config": {"append": [{"verification": {}}]}}),
            "ignition.config.append[0].source",
        ),
        (spec2(passwd=[]), "passwd"),
    ],
)
def test_unrepresentable_or_invalid_content_is_an_error_naming_the_field(
    cfg: dict[str, Any], field: str
) -> None:
    assert error(cfg).field == f"userData.{field}"


def test_empty_sections_of_newer_versions_carry_nothing_and_pass() -> None:
    # `timeouts: {}` in a 2.0 config says nothing, so there is nothing to lose or to switch on.
    cfg = spec2("2.0.0", ignition={"version": "2.0.0", "timeouts": {}, "security": {"tls": {}}})
    assert convert(cfg)["ignition"] == {"version": "3.5.0"}


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        (b"", "userData", "invalid JSON"),
        (b"{not json", "userData", "invalid JSON"),
        (b"\xff\xfe{}", "userData", "UTF-8"),
        (b'"just a string"', "userData", "not a JSON object"),
        (b"[1]", "userData", "not a JSON object"),
        (b'{"ignition":{"version":NaN}}', "userData", "NaN"),
        (b"[" * 50000, "userData", "nested"),
        (b"{}", "userData.ignition.version", "missing"),
        (b'{"ignitionVersion":1}', "userData.ignition.version", "spec 1"),
        (b'{"ignition":"2.2.0"}', "userData.ignition.version", "missing"),
        (b'{"ignition":{"version":2.2}}', "userData.ignition.version", "string"),
        (b'{"ignition":{"version":"two"}}', "userData.ignition.version", "not a semantic version"),
        (b'{"ignition":{"version":"1.0.0"}}', "userData.ignition.version", "neither"),
        (b'{"ignition":{"version":"4.0.0"}}', "userData.ignition.version", "neither"),
        (b'{"ignition":{"version":"2.5.0-experimental"}}', "userData.ignition.version", "2.0.0 to 2.4.0"),
        (b'{"ignition":{"version":"2.2.1"}}', "userData.ignition.version", "2.0.0 to 2.4.0"),
    ],
)
def test_broken_documents_are_user_data_errors(raw: bytes, field: str, needle: str) -> None:
    exc = error(raw)
    assert isinstance(exc, InputError)
    assert exc.field == field
    assert needle in str(exc) and SOURCE in str(exc)


@pytest.mark.parametrize("depth", [400, 990])
def test_deep_nesting_anywhere_is_a_user_data_error_not_a_crash(depth: int) -> None:
    # Whether the parser or the converter stops it depends on the stack left; neither may crash.
    deep = b"[" * depth + b"]" * depth
    exc = error(b'{"ignition":{"version":"2.0.0","proxy":' + deep + b"}}")
    assert exc.field in ("userData", "userData.ignition.proxy")


def test_errors_never_quote_the_config() -> None:
    secret_token = "Bearer-s3cr3t-token"
    cfg = spec2(
        ignition={"version": "2.2.0", "config": {"append": [{"source": MCS + "?token=" + secret_token}]}},
        networkd={"units": [{"name": "x.network", "contents": secret_token}]},
    )
    assert secret_token not in str(error(cfg))
