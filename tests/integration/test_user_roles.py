"""Issue 33 item 4 on a real API server: a 403 names the verb, the resource, the user and the role
that grants it; the roles of manifests/rbac-users.yaml grant exactly what the commands need; an empty
cluster is not an empty file; the one-shot commands print sentences, not JSON log lines.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from harness.cluster import TestCluster
from harness.objects import api_client_for, bootimages_configmap, kube_request

from bootimage_controller.constants import MAPI_NAMESPACE, ROLE_OPERATOR, ROLE_READER

from .daemon_helpers import wait_for
from .test_daemon import FLEET, setup_cluster
from .test_rbac import REPO, _access_review

pytestmark = pytest.mark.integration

FIRST = sorted(FLEET)[0]
ROLES = REPO / "manifests" / "rbac-users.yaml"
CRB_PATH = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
CR_PATH = "/apis/rbac.authorization.k8s.io/v1/clusterroles"


async def cli(kubeconfig: Any, *argv: str, timeout: float = 90) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bootimage_controller", *argv, "--kubeconfig", str(kubeconfig), cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
async def user_roles(kube_cluster: TestCluster, kube_api: Any) -> AsyncIterator[None]:
    """The two ClusterRoles as shipped, bound to `plan-reader` and `plan-operator`."""
    roles = [d for d in yaml.safe_load_all(ROLES.read_text()) if d]
    assert {r["metadata"]["name"] for r in roles} == {ROLE_READER, ROLE_OPERATOR}
    bindings = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"test-{user}"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}
        for user, role in (("plan-reader", ROLE_READER), ("plan-operator", ROLE_OPERATOR))
    ]
    for role in roles:
        await kube_request(kube_api, "POST", CR_PATH, role)
    for binding in bindings:
        await kube_request(kube_api, "POST", CRB_PATH, binding)
    for user, verb in (("plan-reader", "list"), ("plan-operator", "patch")):
        async with await api_client_for(kube_cluster.kubeconfig_for(user)) as as_user:
            attributes = {"verb": verb, "group": "machine.openshift.io", "resource": "machinesets",
                          "namespace": MAPI_NAMESPACE}

            async def granted(as_user: Any = as_user, attributes: Any = attributes) -> bool:
                return await _access_review(as_user, attributes)

            await wait_for(granted, 10, f"the {user} binding to take effect")
    try:
        yield
    finally:
        for binding in bindings:
            await kube_request(kube_api, "DELETE", f"{CRB_PATH}/{binding['metadata']['name']}")
        for role in roles:
            await kube_request(kube_api, "DELETE", f"{CR_PATH}/{role['metadata']['name']}")


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def assert_sentences_only(err: str) -> None:
    """SPEC section 6: the one-shot commands print sentences, never JSON log lines, by default."""
    assert not [line for line in err.splitlines() if line.lstrip().startswith("{")], err


async def test_a_user_without_rights_is_told_the_right_and_the_role(kube_cluster: TestCluster, kube_api: Any) -> None:
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    stranger = kube_cluster.kubeconfig_for("stranger")
    code, out, err = await cli(stranger, "plan", "--from-cluster")
    assert code == 1 and out == ""
    (line,) = error_lines(err)
    assert 'user "stranger" may not list machinesets.machine.openshift.io in openshift-machine-api' in line
    assert f"oc adm policy add-cluster-role-to-user {ROLE_READER} stranger" in line
    assert f"kubeconfig {stranger}" in line and "server https://127.0.0.1:" in line
    assert "no Kubernetes objects" not in err and "empty file" not in err
    assert_sentences_only(err)

    code, out, err = await cli(stranger, "rollback", FIRST)
    assert code == 1
    (line,) = error_lines(err)
    assert 'user "stranger" may not get machinesets.machine.openshift.io in openshift-machine-api' in line
    assert ROLE_OPERATOR in line and "unexpected" not in line
    assert_sentences_only(err)

    code, _, err = await cli(stranger, "release-claims")
    assert code == 1 and ROLE_OPERATOR in err and "unexpected" not in err
    assert_sentences_only(err)

    code, out, err = await cli(stranger, "fleet")
    assert code == 1
    assert "stranger" in out and ROLE_READER in out  # the row's NOTE says why
    assert_sentences_only(err)


async def test_run_once_stops_at_the_first_refusal(kube_cluster: TestCluster, kube_api: Any) -> None:
    # The long-running daemon keeps retrying a 403 (RBAC may be fixed); `--once` says it and exits.
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    code, _, err = await cli(kube_cluster.kubeconfig_for("stranger"), "run", "--once", timeout=60)
    assert code == 1
    (line,) = error_lines(err)
    assert 'user "stranger" may not list machinesets.machine.openshift.io' in line and "wrote nothing" in line


async def test_the_shipped_user_roles_grant_what_the_commands_need(
    kube_cluster: TestCluster, kube_api: Any, user_roles: None
) -> None:
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    reader = kube_cluster.kubeconfig_for("plan-reader")
    code, out, err = await cli(reader, "plan", "--from-cluster", "-o", "json")
    assert code == 0, err
    assert err == ""  # not one refused read: every read of plan is in the reader role
    code, out, err = await cli(reader, "fleet")
    assert code == 0, out + err
    # The reader may not write: the refused patch names the operator role.
    code, _, err = await cli(reader, "hand-over", "--yes", FIRST)
    assert code == 1 and 'user "plan-reader" may not ' in err and ROLE_OPERATOR in err, err

    operator = kube_cluster.kubeconfig_for("plan-operator")
    for command in ("hand-over", "hand-back"):
        code, out, err = await cli(operator, command, *(["--yes"] if command == "hand-over" else []), FIRST)
        assert code == 0, err
    code, out, err = await cli(operator, "release-claims")
    assert code == 0, err
    assert_sentences_only(err)


async def test_an_empty_cluster_is_not_an_empty_file(kube_cluster: TestCluster, kube_api: Any) -> None:
    code, _, err = await cli(kube_cluster.kubeconfig, "plan", "--from-cluster")
    assert code == 1
    (line,) = error_lines(err)
    assert "it has none of the objects plan reads" in line and "empty file" not in line
