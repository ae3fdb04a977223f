#!/usr/bin/env bash
# Collect what a bug report about bootimage-controller needs, into one directory (docs/install.md,
# "Troubleshooting"). Read-only: `oc adm inspect` and one `plan --from-cluster -o json` run inside
# the controller's pod (its ServiceAccount may read exactly what the daemon reads).
#
#   scripts/must-gather.sh [DEST]        # default ./must-gather.bootimage-controller.<timestamp>
#
# Needs `oc` logged in with cluster-reader rights (the Secrets are never collected: `oc adm inspect`
# of a namespace skips them unless asked, and no Secret is named here).
set -uo pipefail
dest=${1:-must-gather.bootimage-controller.$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$dest"
log="$dest/must-gather.log"
ns_controller=openshift-machine-config-operator

run() {  # a failing step is logged and the collection goes on: partial data beats none
    echo "+ $*" >>"$log"
    "$@" >>"$log" 2>&1 || echo "! failed ($?): $*" >>"$log"
}

inspect() { run oc adm inspect --dest-dir "$dest/inspect" "$@"; }

# The controller's namespace (its pods and their logs, the Deployment, the DaemonSet, the Lease;
# the Machine Config Operator's own pods too, which helps when the two disagree).
inspect "ns/$ns_controller"
inspect -n "$ns_controller" lease/bootimage-controller
# What it reads and writes: the golden data, the configuration, the gate, its ClusterOperator.
inspect -n "$ns_controller" configmap/coreos-bootimages
inspect machineconfiguration.operator.openshift.io/cluster infrastructure.config.openshift.io/cluster \
    clusterversion.config.openshift.io/version clusteroperator.config.openshift.io/machine-config-bootimages
# The machine objects, the claim holders, and Events on them.
inspect -n openshift-machine-api machinesets.machine.openshift.io controlplanemachinesets.machine.openshift.io \
    configmap/machineset-boot-image-controller events
inspect -n openshift-cluster-api machinesets.cluster.x-k8s.io machinedeployments.cluster.x-k8s.io \
    awsmachinetemplates.infrastructure.cluster.x-k8s.io gcpmachinetemplates.infrastructure.cluster.x-k8s.io \
    azuremachinetemplates.infrastructure.cluster.x-k8s.io vspheremachinetemplates.infrastructure.cluster.x-k8s.io \
    configmap/machineset-boot-image-controller events
# The Nodes (the control plane's aleph annotations: the install-time boot image).
inspect nodes
# What the controller would do now, as it sees the cluster.
echo "+ plan --from-cluster -o json" >>"$log"
if oc -n "$ns_controller" exec deploy/bootimage-controller -- \
        bootimage-controller plan --from-cluster -o json >"$dest/plan.json" 2>>"$log"; then
    echo "plan: $dest/plan.json" >>"$log"
else
    echo "! plan --from-cluster failed (see above)" >>"$log"
fi
echo "collected into $dest"
