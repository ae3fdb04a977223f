package main

import "runtime/debug"

func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "sigs.k8s.io/cluster-api-provider-aws/v2" {
				return dep.Version
			}
		}
	}
	return "(unknown)"
}
