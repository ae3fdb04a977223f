"""The names docstrings and docs/design.md give exist (issue 46, item 5): a reader who follows
`kube.api_errors`, `reconcile/store.py`, `core/lookups.plan_object` or a package docstring's list
of its modules finds them.

Checked: backticked references that start with a part of the package (`core`, `kube`, ...) or the
name of one of its modules, written dotted (`retry.api_call`), as a path (`core/capi/planner.py`)
or as a path and a name (`core/cluster.CLUSTER_READS`); and in a package's docstring, each bullet's
backticked module names. Not checked: object field paths (`status.history`, `data.stream`), which
share a first word with a module, and the Go names the code is modelled on (`GO_NAMES`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "bootimage_controller"
PARTS = {"core", "kube", "reconcile", "cloud", "vsphere", "daemon", "plan", "fleet", "commands", "data"}
FIELD_ROOTS = ("status", "data", "spec", "metadata", "topology", "record")  # object fields, not modules
GO_NAMES = {"workqueue.MetricsProvider", "retry.RetryOnConflict"}  # client-go's, named as models
REFERENCE = re.compile(r"`([A-Za-z_]\w*(?:[./]\w+)+(?:\.py)?/?)`")
BULLET = re.compile(r"^- (`\w+`(?:,? `\w+`)*)")


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = modules()
BASENAMES = {name.rsplit(".", 1)[-1] for name in MODULES}


def defines(path: Path, name: str) -> bool:
    """A top-level or class-level definition, assignment or import of `name` in the module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def resolves(ref: str) -> bool:
    if ref.endswith((".py", "/")):
        rel = ref.rstrip("/")
        return any((base / rel).exists() for base in (ROOT, PACKAGE, *(d for d in PACKAGE.iterdir() if d.is_dir())))
    if "/" in ref:  # `core/lookups.plan_object`: a module path, then a name in it
        head, _, tail = ref.rpartition("/")
        module, _, name = tail.partition(".")
        return resolves(f"{head.replace('/', '.')}.{module}" + (f".{name}" if name else ""))
    first, *rest = ref.split(".")
    for module in (m for m in MODULES if m.rsplit(".", 1)[-1] == first):
        names = list(rest)
        while names and f"{module}.{names[0]}" in MODULES:
            module = f"{module}.{names.pop(0)}"
        if not names or defines(MODULES[module], names[0]):
            return True
    return False


def references(text: str) -> list[str]:
    out = []
    for match in REFERENCE.finditer(text):
        ref = match.group(1)
        first = re.split(r"[./]", ref)[0]
        if ref in GO_NAMES or ("/" not in ref and first in FIELD_ROOTS):
            continue
        if first in PARTS or first in BASENAMES:
            out.append(ref)
    return out


def docstrings() -> list[tuple[str, str]]:
    out = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    out.append((f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}", doc))
    return out


def test_every_module_class_and_function_a_docstring_or_design_md_names_exists() -> None:
    texts = [*docstrings(), ("docs/design.md", (ROOT / "docs" / "design.md").read_text())]
    missing = [(where, ref) for where, text in texts for ref in references(text) if not resolves(ref)]
    assert missing == []


def test_a_package_docstring_lists_only_its_own_modules() -> None:
    missing = []
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        for line in doc.splitlines():
            bullet = BULLET.match(line.strip())
            for listed in re.findall(r"`(\w+)`", bullet.group(1)) if bullet else ():
                if f"{name}.{listed}" not in MODULES:
                    missing.append((str(path.relative_to(ROOT)), listed))
    assert missing == []


def test_the_name_check_can_fail() -> None:
    assert resolves("kube.api_errors") and resolves("core/lookups.plan_object") and resolves("reconcile/store.py")
    assert not resolves("kube.errors") and not resolves("writer.WriteResult") and not resolves("vsphere.checks")
    assert references("see `status.history` and `kube.errors`") == ["kube.errors"]
