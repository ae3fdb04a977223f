"""Tests of bootimage_controller/daemon: supervision, the proxy, the metrics endpoint."""
