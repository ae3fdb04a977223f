"""The daemon's reconcile loop, rebuilt around one small loop and a reconciler per kind.

- `store`: informers, the read-only store over them, the cluster-wide inputs parsed from them.
- `triggers`: which keys an informer event queues.
- `loop`: hands each key to its reconciler; maps API refusals to transient or permanent failures.
- `machines` (+ `kinds`, `delegation`, `vsphere`): machine objects of both APIs.
- `claims`: the claim holders and the release of every claim.
- `status`: when to recompute the status from every outcome (`reporting` decides what it says).
- `assembly`: puts them together from what `daemon/run.py` builds.
"""
