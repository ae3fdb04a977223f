"""`bootimage-controller release-claims` and `rollback`: one-shot writes an administrator runs."""

from __future__ import annotations

import argparse

from kubernetes_asyncio.client import CustomObjectsApi

from ..kube.client import make_api_client
from ..kube.core_api import CoreApi
from .one_shot import run_within_timeout


def release_claims(args: argparse.Namespace) -> int:
    return run_within_timeout(run_release_claims, args)


async def run_release_claims(args: argparse.Namespace) -> int:
    """Every owner reference of ours first, then the holder's finalizer (SPEC section 3).

    A running daemon claims again on its next patch: stop it (or opt the MachineSets out) first
    when the point is to hand the MachineSets over for good.
    """
    from ..constants import CAPI_NAMESPACE
    from ..kube.capi_discovery import discover_capi_version
    from ..reconcile.claim_reconciler import fresh_capi, fresh_machines, release_all_claims
    from ..reconcile.writer import MachineSetWriter

    api = await make_api_client(args.kubeconfig)
    try:
        custom = CustomObjectsApi(api)
        version = await discover_capi_version(api)
        # The Machine API's holder and the Cluster API's (each claims the objects of its namespace).
        scopes = (
            (MachineSetWriter(custom, CoreApi(api)), lambda: fresh_machines(custom)),
            (MachineSetWriter(custom, CoreApi(api), CAPI_NAMESPACE), lambda: fresh_capi(custom, version)),
        )
        for writer, listing in scopes:
            if not await release_all_claims(writer, listing):
                print("error: claims kept changing under us; run release-claims again")
                return 1
        print("released all claims; finalizer removed from the holders")
        return 0
    finally:
        await api.close()


def rollback(args: argparse.Namespace) -> int:
    return run_within_timeout(_rollback, args)


async def _rollback(args: argparse.Namespace) -> int:
    from .rollback import rollback_machineset

    api = await make_api_client(args.kubeconfig)
    try:
        return await rollback_machineset(api, args.namespace, args.name, dry_run=args.dry_run)
    finally:
        await api.close()
