"""Cluster API (`cluster.x-k8s.io`) MachineSets and MachineDeployments, pure (docs/capi.md).

- `resources`: the objects and infrastructure templates as plain data.
- `adapters`: the platform rules applied to a template's `spec.template.spec`.
- `planner`: the decision for one object.
- `work`: what a patch decision asks the reconciler to write.
"""
