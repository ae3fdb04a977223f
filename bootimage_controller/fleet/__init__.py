"""`bootimage-controller fleet` (SPEC section 4): the boot images of many clusters, read-only.

`sources` turns the command line into clusters to read, `read` reads one (a must-gather tree or a
kubeconfig context) into rows with the same functions `plan` uses, `run` reads them concurrently
with a bound and a timeout each, and `render` prints the table, the JSON or the HTML page. The rows
themselves are built in `core/fleet.py` (pure).
"""
