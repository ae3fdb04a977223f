"""bootimage-controller: keeps OpenShift MachineSet boot images current and enforces boot image skew."""

from .kube import light_import

__version__ = "0.1.0"

# kubernetes_asyncio imports its 859 modules only as they are used (60 MiB less for the
# daemon); the finder imports nothing itself. See kube/light_import.py.
light_import.install()
