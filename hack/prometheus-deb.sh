# Sourced by install-promtool.sh and install-prometheus.sh: Debian's `prometheus` package (promtool
# and the server) unpacked into the project's cache, never installed: no service starts, nothing
# outside the cache changes. Sets PROMETHEUS_DEB_ROOT; the binaries are under $PROMETHEUS_DEB_ROOT/usr/bin.
PROMETHEUS_DEB_ROOT="${BOOTIMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bootimage-controller}/promtool"

unpack_prometheus_deb() {
  [ -x "$PROMETHEUS_DEB_ROOT/usr/bin/promtool" ] && [ -x "$PROMETHEUS_DEB_ROOT/usr/bin/prometheus" ] && return 0
  mkdir -p "$PROMETHEUS_DEB_ROOT"
  local work
  work="$(mktemp -d)"
  (
    cd "$work"
    if ! apt-get download prometheus >/dev/null 2>&1; then
      # Empty package lists (a fresh container): refresh them once, then try again.
      apt-get update -qq >/dev/null 2>&1 || true
      apt-get download prometheus >/dev/null 2>&1
    fi
    dpkg -x prometheus_*.deb "$PROMETHEUS_DEB_ROOT"
  ) || { rm -rf "$work"; return 1; }
  rm -rf "$work"
}
