"""vSphere placement, pure: which vCenter, failure domain and folder hold a MachineSet's template
(`topology`). The vCenter calls live in `bootimage_controller.vsphere`."""
