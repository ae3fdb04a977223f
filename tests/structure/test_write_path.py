"""The write path reads as a straight line (issue 46, item 1): from the informer's event to the
PATCH on the wire, every hand-off is a named function, a method or a typed Protocol that `grep`
finds. No lambda and no nested function in the modules the path crosses: a closure handed down
three levels is what a reader of the path cannot follow (`retry_on_conflict`'s three closures in
the machine reconciler and the claim holder, `api_call`'s thunks, the workers' inner functions).

`functools.partial` of a named function is allowed: the name it binds is the one `grep` finds.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "bootimage_controller"

# Every module a MachineSet's patch crosses, from the watch event to the bytes on the wire
# (docs/design.md, "One MachineSet, from a watch event to its PATCH"), and the assembly that
# wires them.
WRITE_PATH = (
    "kube/informer.py",
    "reconcile/triggers.py",
    "kube/workqueue.py",
    "reconcile/loop.py",
    "reconcile/machines.py",
    "reconcile/store.py",
    "reconcile/kinds.py",
    "reconcile/delegation.py",
    "reconcile/claim_reconciler.py",
    "reconcile/ledger.py",
    "reconcile/writer.py",
    "kube/fence.py",
    "kube/client.py",
    "kube/retry.py",
    "kube/api_errors.py",
    "reconcile/assembly.py",
)


def closures(source: str) -> list[str]:
    """Each lambda, and each function defined inside another, as `line: what`."""
    found: list[str] = []

    def visit(node: ast.AST, inside_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Lambda):
                found.append(f"{child.lineno}: lambda")
            is_function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if is_function and inside_function:
                found.append(f"{child.lineno}: nested def {child.name}")  # type: ignore[union-attr]
            visit(child, inside_function or is_function)

    visit(ast.parse(source), False)
    return found


def test_no_lambda_or_nested_function_on_the_write_path() -> None:
    for module in WRITE_PATH:
        assert (PACKAGE / module).is_file(), f"{module} is gone: update WRITE_PATH and docs/design.md"
    found = {module: hits for module in WRITE_PATH if (hits := closures((PACKAGE / module).read_text()))}
    assert found == {}


def test_the_closure_check_can_fail() -> None:
    source = (
        "class C:\n"
        "    def method(self):\n"
        "        def inner():\n"
        "            return 1\n"
        "        return sorted([], key=lambda x: x)\n"
        "def top():\n"
        "    async def step():\n"
        "        pass\n"
    )
    assert closures(source) == ["3: nested def inner", "5: lambda", "7: nested def step"]
