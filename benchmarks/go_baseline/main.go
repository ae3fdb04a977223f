// The no-controller baseline in Go, as the Machine Config Operator would send it: client-go, one
// list of the MachineSets, then the same JSON patches the daemon sends, `-concurrency` at a time,
// with client-go's rate limiter off (QPS < 0), as `run --qps 0` and the Python baseline.
//
//	go-baseline -kubeconfig K -patches patches.json -concurrency 4
//
// patches.json: {"<name>": [<RFC 6902 ops>], ...} computed beforehand by benchmarks/daemon_bench.py
// (planning is excluded from every baseline). Prints one JSON line: {"listedSeconds", "sentSeconds",
// "failed"}, both times from the program's start (the kubeconfig read included: a cold start).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

var machineSets = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machinesets"}

func main() {
	started := time.Now()
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file")
	patchFile := flag.String("patches", "", "JSON object: MachineSet name -> JSON patch")
	namespace := flag.String("namespace", "openshift-machine-api", "the MachineSets' namespace")
	concurrency := flag.Int("concurrency", 4, "patches in flight")
	flag.Parse()

	raw, err := os.ReadFile(*patchFile)
	check(err)
	var patches map[string]json.RawMessage
	check(json.Unmarshal(raw, &patches))

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	config.QPS = -1 // no client-side rate limit
	client, err := dynamic.NewForConfig(config)
	check(err)
	ctx := context.Background()
	resource := client.Resource(machineSets).Namespace(*namespace)
	listed, err := resource.List(ctx, metav1.ListOptions{})
	check(err)
	listedAt := time.Since(started)

	names := make(chan string)
	var failed int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < *concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				if _, err := resource.Patch(ctx, name, types.JSONPatchType, patches[name], metav1.PatchOptions{}); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for _, item := range listed.Items {
		if _, ok := patches[item.GetName()]; ok {
			names <- item.GetName()
		}
	}
	close(names)
	wg.Wait()
	out, _ := json.Marshal(map[string]any{
		"listedSeconds": listedAt.Seconds(), "sentSeconds": time.Since(started).Seconds(), "failed": failed,
	})
	fmt.Println(string(out))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "go-baseline:", err)
		os.Exit(1)
	}
}
