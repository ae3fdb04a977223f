"""Every input is a row (issue 33, item 1), and names are text (item 2): one `fleet` run over a
missing path, a kubeconfig folder with a stray file, a parent folder of three must-gathers and a
cluster named like TeX: every cluster a row, the page written, exit 1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from .fleetgen import write_fleet

REPO = Path(__file__).resolve().parents[2]
TEX_NAME = "team-$\\notacommand$-$x^2$"


def test_a_run_over_broken_inputs_gives_every_cluster_a_row_and_the_page(tmp_path: Path) -> None:
    trees = write_fleet(tmp_path / "generated", 4)
    parent = tmp_path / "must-gathers"
    parent.mkdir()
    for tree in trees[:3]:
        shutil.move(str(tree), parent / tree.name)
    tex = tmp_path / TEX_NAME
    shutil.move(str(trees[3]), tex)
    kubeconfigs = tmp_path / "kcs"
    kubeconfigs.mkdir()
    (kubeconfigs / "README.txt").write_text("these are our clusters' kubeconfigs\n")
    (kubeconfigs / "broken.yaml").write_text("contexts: [\n")
    page = tmp_path / "fleet.html"
    done = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", "fleet", str(tmp_path / "no-such-path"), str(parent), str(tex),
         "--kubeconfig", str(kubeconfigs), "-o", "json", "--html", str(page)],
        capture_output=True, text=True, timeout=180, cwd=REPO, check=False)
    assert done.returncode == 1, done.stderr  # some rows are errors
    assert "Traceback" not in done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["clusters"]}
    assert rows["no-such-path"]["error"] == "no such file or folder"
    assert "not a kubeconfig" in rows["README.txt"]["error"] and "not a readable kubeconfig" in rows["broken.yaml"]["error"]
    for tree in trees[:3]:
        assert rows[tree.name]["error"] is None and rows[tree.name]["pools"], tree.name  # each its own cluster
    assert rows[TEX_NAME]["error"] is None
    html = page.read_text()
    assert "$\\notacommand$-$x^2$" in html, "the name is shown as written, not read as TeX"
