"""The stub Ignition upgrade (reconcile/stub_ignition.py)."""
