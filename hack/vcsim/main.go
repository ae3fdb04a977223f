// vcsim for bootimage-controller's tests: govmomi's vCenter simulator (Debian's
// golang-github-vmware-govmomi-dev) on loopback, TLS on, with the vAPI (REST: sessions, tags)
// endpoints registered. It prints one line, "URL <sdk url>", once it serves, and runs until killed.
//
// Build: hack/vcsim/build.sh (GO111MODULE=off, GOPATH=/usr/share/gocode; no download).
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	username := flag.String("username", "user", "the one user name the simulator accepts")
	password := flag.String("password", "pass", "that user's password")
	flag.Parse()

	model := simulator.VPX()
	model.Datastore = 1
	model.Cluster = 1
	model.ClusterHost = 1
	model.Host = 0
	model.Machine = 1
	if err := model.Create(); err != nil {
		log.Fatalf("create model: %v", err)
	}
	defer model.Remove()

	model.Service.Listen = &url.URL{Host: *listen, User: url.UserPassword(*username, *password)}
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
	server := model.Service.NewServer()
	defer server.Close()

	fmt.Printf("URL %s\n", server.URL.String())
	os.Stdout.Sync()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
