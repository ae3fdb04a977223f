"""bootimage-controller: keeps OpenShift MachineSet boot images current and enforces boot image skew."""

__version__ = "0.1.0"
