"""kube/light_import.py: kubernetes_asyncio imported as used, not all at once (issue 36, item 4).

Each check runs in a fresh interpreter: in this one kubernetes_asyncio is already imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from bootimage_controller.kube.light_import import names_in


def run(code: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True,
                         timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_daemon_imports_a_few_modules_of_kubernetes_asyncio_not_all_of_them() -> None:
    found = run("""
        import json, sys
        import bootimage_controller.daemon.run
        from bootimage_controller.kube.light_import import is_light
        loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models.")]
        apis = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.api.")]
        print(json.dumps({"light": is_light(), "models": len(loaded), "apis": len(apis)}))
    """)
    assert found["light"] is True
    assert int(str(found["models"])) < 20  # the eager package imports about 700
    assert 0 < int(str(found["apis"])) <= 10  # the eager package imports about 60


def test_every_name_the_eager_package_exports_is_there_and_the_same_object() -> None:
    found = run("""
        import json, importlib, importlib.util, os
        import bootimage_controller  # installs the finder
        import kubernetes_asyncio.client as client
        import kubernetes_asyncio.client.models as models
        from bootimage_controller.kube.light_import import names_in
        missing = []
        for package in (client, models):
            with open(package.__spec__.origin) as f:
                table = names_in(f.read())
            for name, (module, attribute) in table.items():
                value = getattr(package, name)
                real = importlib.import_module(module)
                if value is not (real if attribute is None else getattr(real, attribute)):
                    missing.append(name)
        print(json.dumps({"client": len(names_in(open(client.__spec__.origin).read())), "missing": missing}))
    """)
    assert found["missing"] == []
    assert int(str(found["client"])) > 500  # the table really is the package's own


def test_models_deserialise_on_demand_and_an_unknown_name_falls_back_to_the_eager_import() -> None:
    found = run("""
        import asyncio, json, sys
        import bootimage_controller
        from kubernetes_asyncio.client import ApiClient
        class Response:
            data = json.dumps({"metadata": {"name": "coreos-bootimages"}, "data": {"stream": "{}"}})
        async def decode():
            async with ApiClient() as api:
                return api.deserialize(Response(), "V1ConfigMap")
        cm = asyncio.run(decode())
        import kubernetes_asyncio.client as client
        before = len([m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models.")])
        try:
            client.NotAName
            raised = False
        except AttributeError:
            raised = True
        after = len([m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models.")])
        print(json.dumps({"name": cm.metadata.name, "before": before, "after": after, "raised": raised}))
    """)
    assert found["name"] == "coreos-bootimages"
    assert 0 < int(str(found["before"])) < 10
    assert found["raised"] is True and int(str(found["after"])) > 500  # the real __init__ ran once


def test_the_table_reads_both_import_forms() -> None:
    source = (
        "import kubernetes_asyncio.client as client\n"
        "from kubernetes_asyncio.client.api.core_v1_api import CoreV1Api\n"
        "from kubernetes_asyncio.client.models.v1_pod import V1Pod as Pod\n"
    )
    assert names_in(source) == {
        "client": ("kubernetes_asyncio.client", None),
        "CoreV1Api": ("kubernetes_asyncio.client.api.core_v1_api", "CoreV1Api"),
        "Pod": ("kubernetes_asyncio.client.models.v1_pod", "V1Pod"),
    }
