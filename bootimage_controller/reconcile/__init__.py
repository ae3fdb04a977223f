"""The daemon's reconcile loop, rebuilt around one small loop and a reconciler per kind.

- `store`: informers, the read-only store over them, the cluster-wide inputs parsed from them.
- `triggers`: which keys an informer event queues.
- `loop`: hands each key to its reconciler; maps API refusals to transient or permanent failures.
- `machines` (+ `kinds`, `delegation`, `templates`, `counting`, `ledger`, `writer`): machine objects of
  both APIs.
- `claim_reconciler`: the claim holders and the release of every claim.
- `status_reconciler` (+ `status_clock`, `status_writer`): when to recompute the status from every
  outcome (`reporting` decides what it says).
- `verification`, `canary`: boot verification and the canary Machines; `event_lane`, `event_rules`:
  the Events.
- `assembly`: puts them together from what `daemon/run.py` builds.
"""
