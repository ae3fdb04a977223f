"""The clusters a `fleet` run reads: must-gather trees and kubeconfig contexts.

- `PATH ...`: each a must-gather tree (or a folder of YAML/JSON): one cluster each, named by the
  folder; a folder that holds several must-gather trees is several clusters, one per tree.
- `--kubeconfig F` (repeated; F a file or a folder of them) with `--context NAME` (repeated) or
  `--all-contexts`: those contexts of each file; with neither, each file's current context. Without
  `--kubeconfig`, `--context` and `--all-contexts` read `$KUBECONFIG` (its first file) or
  `~/.kube/config`.
A context name given twice (two files) is told apart by its file's name.

Every input is a row (SPEC section 4): a path that does not exist, a file in a kubeconfig folder that
is not a kubeconfig, a kubeconfig without a current context, is a source that carries its error and
becomes an error row, never the end of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import InputError
from ..kube.kubeconfig import contexts_of, default_kubeconfig, missing_kubeconfig
from ..plan.inputs import must_gather_roots


@dataclass(frozen=True)
class ClusterSource:
    """One cluster to read: a must-gather tree, or a kubeconfig file and context."""

    name: str
    tree: Path | None = None
    kubeconfig: Path | None = None
    context: str | None = None
    error: str | None = None  # could not even be opened: its row says why

    @property
    def description(self) -> str:
        if self.tree is not None:
            return f"must-gather {self.tree}"
        if self.context is None:
            return f"kubeconfig {self.kubeconfig}"
        return f"context {self.context} of {self.kubeconfig}"


def discover(
    paths: Sequence[str],
    kubeconfigs: Sequence[str],
    contexts: Sequence[str],
    all_contexts: bool,
) -> list[ClusterSource]:
    """Raises `InputError` only for what no row can stand for: a `--context` no file has, no
    kubeconfig at all."""
    sources = [s for p in paths for s in _trees(Path(p))]
    files = [f for k in kubeconfigs for f in _kubeconfig_files(Path(k))]
    if not files and (contexts or all_contexts):
        files = [_default_kubeconfig()]
    live: list[ClusterSource] = []
    for path in files:
        try:
            names, current = _contexts_of(path)
        except InputError as exc:
            live.append(ClusterSource(name=path.name, kubeconfig=path, error=exc.problem))
            continue
        if all_contexts:
            chosen = names
        elif contexts:
            chosen = [c for c in contexts if c in names]
        else:
            chosen = [current] if current else []
            if not chosen:
                live.append(ClusterSource(name=path.name, kubeconfig=path,
                                          error="no current-context: pass --context NAME or --all-contexts"))
        live += [ClusterSource(name=c, kubeconfig=path, context=c) for c in chosen]
    missing = [c for c in contexts if not any(s.context == c for s in live)]
    if missing:
        raise InputError(", ".join(str(f) for f in files), None, f"no context named {', '.join(missing)}")
    return _unique_names([*sources, *live])


def _trees(path: Path) -> list[ClusterSource]:
    """One source per cluster: a missing path is an error row; a folder of several must-gathers is
    one source per must-gather tree, named by its path under the folder."""
    if not path.exists():
        return [ClusterSource(name=path.name or str(path), tree=path, error="no such file or folder")]
    roots = must_gather_roots(path) if path.is_dir() else []
    if len(roots) > 1:
        return [ClusterSource(name=str(root.relative_to(path)), tree=root) for root in roots]
    if len(roots) == 1 and roots[0].resolve() != path.resolve():
        # A folder holding one must-gather (`must-gathers/`, `examples/`): the cluster is the tree's,
        # named as the tree is, not after the folder around it (issue 47); the folder is read whole.
        return [ClusterSource(name=roots[0].name, tree=path)]
    return [ClusterSource(name=path.resolve().name or str(path), tree=path)]


def _kubeconfig_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise InputError(str(path), None, "--kubeconfig: the folder has no files")
        return files
    if not path.is_file():
        raise InputError(str(path), None, "--kubeconfig: no such file or folder")
    return [path]


def _default_kubeconfig() -> Path:
    problem = missing_kubeconfig()
    if problem is not None:
        raise InputError("fleet", None, problem)
    return default_kubeconfig()


def _contexts_of(path: Path) -> tuple[list[str], str | None]:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.MarkedYAMLError as exc:
        # Where, as `plan` says it, not the parser's dump (issue 47).
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise InputError(str(path), None, f"not a readable kubeconfig: invalid YAML{where}: {exc.problem}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(str(path), None, f"not a readable kubeconfig: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict):
        raise InputError(str(path), None, "not a kubeconfig (expected a YAML map)")
    kind = doc.get("kind")
    if kind not in (None, "Config"):
        # A manifest left in a folder of kubeconfigs: say what it is, not "no current-context".
        raise InputError(str(path), None, f"not a kubeconfig but a {kind} ({doc.get('apiVersion')}): give "
                                          "must-gather trees and manifests as PATHs, kubeconfigs with --kubeconfig")
    names, current = contexts_of(doc)
    return names, current if current in names else None


def _unique_names(sources: list[ClusterSource]) -> list[ClusterSource]:
    seen: dict[str, int] = {}
    for s in sources:
        seen[s.name] = seen.get(s.name, 0) + 1
    out = []
    for s in sources:
        if seen[s.name] > 1:
            where = s.kubeconfig.name if s.kubeconfig is not None else str(s.tree)
            s = ClusterSource(f"{s.name} ({where})", s.tree, s.kubeconfig, s.context)
        out.append(s)
    return out
