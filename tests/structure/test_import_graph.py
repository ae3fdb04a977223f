"""The package's import graph has no cycle (issue 13, item 6), and the folder tree is the
architecture drawing (issue 35): `core/` pure, no cycle between packages, the root holds only what
every part shares, the daemon's own modules live under `daemon/` or `reconcile/`, and no test
imports a private name.

Every import counts: module level, inside functions, and under `TYPE_CHECKING`. A cycle hidden
behind a deferred import still means two modules cannot be understood (or tested) apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "bootimage_controller"


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            # A module importing its own package (`from . import x` resolves to x) is not a dependency.
            if target and target != name and not name.startswith(f"{target}."):
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def test_the_import_graph_has_no_cycle() -> None:
    assert cycles(graph()) == []


def test_the_check_sees_deferred_and_type_checking_imports() -> None:
    # cloud.verifier imports its cloud modules under `if TYPE_CHECKING:` (and again inside
    # functions); cli imports model only there. A scan of module-level imports alone would miss them.
    g = graph()
    assert "bootimage_controller.cloud.aws" in g["bootimage_controller.cloud.verifier"]
    assert "bootimage_controller.core.model" in g["bootimage_controller.commands.cli"]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


# Pure modules may import only each other and these leaves (names, error types: no I/O).
PURE_LEAVES = {"bootimage_controller.constants", "bootimage_controller.errors"}
THIRD_PARTY_IO = ("kubernetes_asyncio", "aiohttp", "boto3", "botocore", "google", "azure", "pyVmomi", "pyvmomi",
                  "requests", "urllib3", "socket", "subprocess")


def package_of(module: str) -> str:
    """The package a module belongs to for the layering check: `bootimage_controller.<sub>` for a
    module inside a subpackage (core, kube, reconcile, cloud, vsphere, capi), else the module."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_core_imports_nothing_that_does_io() -> None:
    g = graph()
    core = {m for m in g if m == "bootimage_controller.core" or m.startswith("bootimage_controller.core.")}
    assert len(core) > 30, "the pure modules live under bootimage_controller/core/"
    bad = {m: sorted(t for t in g[m] if t not in core and t not in PURE_LEAVES) for m in core}
    assert {m: ts for m, ts in bad.items() if ts} == {}
    third_party = {}
    for name, path in modules().items():
        if name not in core:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            hits = [n for n in names if n.split(".")[0] in THIRD_PARTY_IO]
            if hits:
                third_party[name] = hits
    assert third_party == {}


def test_no_cycle_between_packages() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in graph().items():
        here = package_of(module)
        packages.setdefault(here, set()).update(package_of(t) for t in targets if package_of(t) != here)
    for targets in list(packages.values()):
        for t in targets:
            packages.setdefault(t, set())
    assert cycles(packages) == []


def test_the_layering_check_can_fail() -> None:
    assert package_of("bootimage_controller.core.skew.policy") == "bootimage_controller.core"
    assert package_of("bootimage_controller.reconcile.writer") == "bootimage_controller.reconcile"
    assert package_of("bootimage_controller.constants") == "bootimage_controller.constants"
    assert cycles({"bootimage_controller.cloud": {"bootimage_controller.vsphere"},
                   "bootimage_controller.vsphere": {"bootimage_controller.cloud"}}) != []


# What every part shares stays at the root; everything else has its part's folder.
ROOT_MODULES = {"bootimage_controller", "bootimage_controller.__main__", "bootimage_controller.constants",
                "bootimage_controller.errors", "bootimage_controller.observability"}
PARTS = {"core", "kube", "cloud", "vsphere", "reconcile", "daemon", "commands", "plan", "fleet", "data"}
DAEMON_HOMES = ("bootimage_controller.daemon", "bootimage_controller.reconcile")


def test_the_root_holds_only_what_every_part_shares() -> None:
    names = set(modules())
    assert {m for m in names if m.count(".") <= 1 and m.split(".")[-1] not in PARTS} == ROOT_MODULES
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders == PARTS


def test_daemon_only_modules_live_under_daemon_or_reconcile() -> None:
    """A module that only the daemon's parts import belongs with them, not beside the commands."""
    g = graph()
    importers: dict[str, set[str]] = {m: set() for m in g}
    for m, targets in g.items():
        for t in targets:
            importers[t].add(m)
    misplaced = sorted(
        m for m, by in importers.items()
        if by and all(b.startswith(DAEMON_HOMES) for b in by) and not m.startswith(DAEMON_HOMES)
        and not m.startswith(("bootimage_controller.core", "bootimage_controller.kube", "bootimage_controller.cloud",
                              "bootimage_controller.vsphere"))  # shared parts the daemon happens to use alone
        and m not in ROOT_MODULES
    )
    assert misplaced == []


def test_no_test_imports_a_private_name() -> None:
    """Tests use what the package offers: no `_name` imported from it, no private `daemon._run`."""
    repo = PACKAGE.parent
    found = []
    for path in [*(repo / "tests").rglob("*.py"), *(repo / "benchmarks").rglob("*.py")]:
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bootimage_controller"):
                found += [f"{path.relative_to(repo)}: {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
        if "daemon." + "_run(" in text:  # spelt apart so this check does not find itself
            found.append(f"{path.relative_to(repo)}: daemon._run")
    assert found == []


def private_attributes(package_files: list[Path]) -> set[str]:
    """`_name`s the package keeps on its objects: `self._x` / `cls._x` attributes, and methods and
    class attributes named `_x`."""
    names: set[str] = set()
    for path in package_files:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls") and _private(node.attr)):
                names.add(node.attr)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name):
                        names.add(item.name)
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and _private(item.target.id):
                        names.add(item.target.id)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def reaches(source: str, private: set[str]) -> list[str]:
    """`obj._x` in a test where `_x` is one of the package's private attributes (not `self._x`:
    a test's own fake keeps its own)."""
    return [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in private
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]


def test_no_test_reaches_into_a_private_attribute_of_the_package() -> None:
    """Issue 46, item 4: a test that needs a seam gets one (`Informer.handler_count`,
    `HealthServer(heartbeat=...)`, `VSphereChecks.forget_lookups`), not `obj._x`."""
    repo = PACKAGE.parent
    private = private_attributes(list(PACKAGE.rglob("*.py")))
    assert {"_cache", "_handlers", "_leading"} <= private  # the scan sees what it must
    found = {str(path.relative_to(repo)): hits
             for path in [*(repo / "tests").rglob("*.py"), *(repo / "benchmarks").rglob("*.py")]
             if (hits := reaches(path.read_text(), private))}
    assert found == {}


def test_the_private_reach_check_can_fail() -> None:
    assert reaches("informer._handlers.clear()\nself._handlers = []\n", {"_handlers"}) == [
        "1: informer._handlers"]


def test_offline_plan_imports_no_client_library() -> None:
    """`plan` on files needs no web server, Kubernetes client or cloud SDK: importing them cost it
    half its time (issue 36: 0.46-0.71 s before, 0.26-0.28 s after; benchmarks/plan_startup.py)."""
    import subprocess
    import sys

    code = (
        "import contextlib, io, sys\n"
        "from bootimage_controller.commands.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['plan', {str(PACKAGE.parent / 'examples' / 'aws-4.16-cluster')!r}]) == 0\n"
        "heavy = ('aiohttp', 'kubernetes_asyncio', 'boto3', 'botocore', 'google.cloud', 'azure.mgmt', 'pyVmomi', 'jinja2')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {h.split('.')[0] for h in heavy}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_daemon_imports_no_cloud_sdk_or_ova_reader_until_used() -> None:
    """Every module imported at start is resident for the daemon's life: the cloud SDKs, pyVmomi and
    the OVA readers (tarfile, xml.etree: 0.9 MiB) load only when a cluster on that platform needs
    them, and the generated CoreV1Api (3.4 MiB) not at all: kube/core_api.py sends the daemon's
    core/v1 calls (issue 36: the 120 MiB goal at 5,000 MachineSets)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import bootimage_controller.daemon.run\n"
        "unused = {'tarfile', 'xml', 'boto3', 'botocore', 'google', 'azure', 'pyVmomi', 'jinja2'}\n"
        "found = {m.split('.')[0] for m in sys.modules} & unused\n"
        "found |= {m for m in sys.modules if m == 'kubernetes_asyncio.client.api.core_v1_api'}\n"
        "print(sorted(found))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_docs_design_names_every_module() -> None:
    """docs/design.md draws the tree; a module it does not name is one a newcomer cannot place."""
    import re

    doc = (PACKAGE.parent / "docs" / "design.md").read_text()
    unnamed = sorted(str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
                     if p.name != "__init__.py" and not re.search(rf"\b{re.escape(p.stem)}\b", doc))
    assert unnamed == []


# What reads files, the clock of the outside world's state, or logs: core/ hands data back instead
# (issue 46, item 3). Its callers read the aleph file (commands/aleph_file.py) and the bundled index
# (bootimage_controller.data) and log what the core passed over (`InputNote`).
STDLIB_IO = ("logging", "structlog", "pathlib", "os", "io", "shutil", "tempfile", "glob", "importlib", "asyncio",
             "ssl", "http", "urllib")


def _io_in(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found += [n for n in names if n.split(".")[0] in STDLIB_IO]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            found.append(f"open() at line {node.lineno}")
    return found


def test_core_reads_no_file_and_logs_nothing() -> None:
    core = {name: path for name, path in modules().items() if name.startswith("bootimage_controller.core")}
    assert len(core) > 30
    assert {name: hits for name, path in core.items() if (hits := _io_in(path))} == {}


def test_the_io_check_can_fail(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import structlog\nfrom pathlib import Path\ntext = open('x').read()\n")
    assert _io_in(sample) == ["structlog", "pathlib", "open() at line 3"]


def test_kube_imports_nothing_from_core() -> None:
    """The API boundary sits below the pure core, not above it: what kube/ needs to know about
    managers is passed to it (the informer's `keep_managed_fields`)."""
    g = graph()
    kube = {m for m in g if m.startswith("bootimage_controller.kube")}
    assert len(kube) > 10
    assert {m: sorted(t for t in g[m] if t.startswith("bootimage_controller.core")) for m in kube
            if any(t.startswith("bootimage_controller.core") for t in g[m])} == {}


# Modules outside kube/ that speak HTTP to another API than Kubernetes' (vCenter's disk upload).
OTHER_HTTP_APIS = frozenset({"bootimage_controller.vsphere.vcenter"})


def status_decisions(source: str) -> list[str]:
    """Each comparison of a `.status` with an HTTP code, and each mention of the client's raw
    `ApiException`, as `line: code`."""
    tree = ast.parse(source)
    found = [f"{node.lineno}: ApiException" for node in ast.walk(tree)
             if isinstance(node, ast.Name | ast.alias) and getattr(node, "id", getattr(node, "name", "")) == "ApiException"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if (any(isinstance(s, ast.Attribute) and s.attr == "status" for s in sides)
                    and any(isinstance(s, ast.Constant) and type(s.value) is int and 100 <= s.value < 600 for s in sides)):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_only_kube_reads_http_statuses() -> None:
    """Issue 46, item 3: an API server's answer leaves kube/ as a typed error (`NotFound`,
    `Forbidden`, `Unauthorized`, ...) or a sentence (`kube.forbidden.answer_sentence`); nothing
    above it decides on a status code or catches the client's raw exception."""
    outside = {name: path for name, path in modules().items()
               if not name.startswith("bootimage_controller.kube") and name not in OTHER_HTTP_APIS}
    assert len(outside) > 100
    assert {name: hits for name, path in outside.items() if (hits := status_decisions(path.read_text()))} == {}


def test_the_status_check_can_fail() -> None:
    source = ("from kubernetes_asyncio.client.exceptions import ApiException\n"
              "if response.status == 404:\n    pass\n")
    assert status_decisions(source) == ["1: ApiException", "2: response.status == 404"]
