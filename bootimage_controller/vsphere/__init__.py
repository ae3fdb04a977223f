"""vSphere: templates in vCenter (SPEC section 2 rule 6, docs/vsphere.md).

- `core.vsphere.topology` (pure): which vCenter, failure domain and folder hold a MachineSet's template.
- `ova`: the stream's OVA on local disk, verified by sha256, in a bounded cache.
- `vcenter`: the vCenter calls (pyvmomi, synchronous; the callers run them in threads).
- `template_refresh`: building and swapping a template, each step safe to crash after.
- `template_checks`: the daemon's and `plan --cloud-verify`'s entry: credentials, lookups, refreshes.
"""
