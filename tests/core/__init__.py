"""Tests of bootimage_controller/core: the pure decisions."""
