"""The pure core: every decision, and no I/O.

Nothing under `core/` reads a socket, a cluster or a cloud, and nothing here imports a module that
does (`tests/structure/test_import_graph.py` fails when one does): the planner and its platform
rules, the golden data, the cluster facts and enrollment, the patches, the conditions, the skew
policy, the Cluster API planner, vSphere placement, the cloud answers as plain data, Ignition.
`plan` and the daemon both call these with plain data; `kube/`, `cloud/`, `vsphere/`, `reconcile/`
and the commands do the reading and writing around them.
"""
