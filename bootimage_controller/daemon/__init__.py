"""The daemon: wiring the parts together (`run`), supervision, the metrics endpoint's security and the cluster proxy."""
