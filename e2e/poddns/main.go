// Command e2e-poddns answers the pod names of cluster DNS
// (10-244-0-5.<namespace>.pod.cluster.local) for the real-cluster suite,
// whose single-node cluster runs no cluster DNS: tofu-controller, which we
// benchmark against, dials its runner Pods by those names, and its
// controller Pod is given `dnsPolicy: None` with this server, on the
// node's address, as its only nameserver. Any other name gets NXDOMAIN;
// nothing is forwarded. It is internal/testenv/poddns in a process of its
// own.
//
//	e2e-poddns --listen=10.0.0.5:53 --domain=cluster.local --cidr=10.244.0.0/16
//
// serves UDP and TCP on 10.0.0.5:53 until SIGTERM or SIGINT. Port 53 needs
// root or CAP_NET_BIND_SERVICE.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/landform-dev/landform/internal/testenv/poddns"
)

func main() {
	var (
		listen = flag.String("listen", "127.0.0.1:53", "address to serve on, UDP and TCP")
		domain = flag.String("domain", "cluster.local", "the cluster's DNS domain")
		cidr   = flag.String("cidr", "10.244.0.0/16", "comma-separated Pod networks: the only addresses a name may resolve to")
	)
	flag.Parse()
	var cidrs []netip.Prefix
	for _, c := range strings.Split(*cidr, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			fail("--cidr: %v", err)
		}
		cidrs = append(cidrs, p)
	}

	s, err := poddns.Listen(*listen, poddns.WithDomain(*domain), poddns.WithCIDRs(cidrs...))
	if err != nil {
		hint := ""
		if errors.Is(err, os.ErrPermission) {
			hint = " (port 53 needs root or CAP_NET_BIND_SERVICE)"
		}
		fail("cannot listen on %s: %v%s", *listen, err, hint)
	}
	fmt.Fprintf(os.Stderr, "e2e-poddns: answering <ip>.<namespace>.pod.%s for %s on %s, UDP and TCP\n", *domain, *cidr, s.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	_ = s.Close()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e-poddns: "+format+"\n", args...)
	os.Exit(1)
}
