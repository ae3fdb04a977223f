"""Test harness: a real loopback control plane (`cluster`) and OpenShift object builders (`objects`)."""
