"""Cluster API (`cluster.x-k8s.io`) MachineSets and MachineDeployments (issue 16, docs/capi.md).

- `resources`: the objects and infrastructure templates as plain data (pure).
- `adapters`: the platform rules applied to a template's `spec.template.spec` (pure).
- `planner`: the decision for one object (pure).
- `work`: what a patch decision asks the controller to write.
"""
