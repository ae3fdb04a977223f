"""Cluster API I/O: which `cluster.x-k8s.io` version the API server serves (`discovery`). The
objects, templates and decisions are pure and live in `core.capi`."""
