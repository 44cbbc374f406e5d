// Command e2e-enginemirror serves Terraform and OpenTofu releases the way
// HashiCorp's releases API and OpenTofu's download mirror do, signed with a
// key it generates, for the real-cluster suite: its runner Pods install the
// engine an object asks for from this mirror on the node's address, as an
// air-gapped installation would from its internal mirror. It is
// internal/testenv/enginemirror in a process of its own.
//
//	e2e-enginemirror --listen=10.0.0.5:9680 --dir=/tmp/mirror \
//	    --terraform=bin/terraform=1.5.7 --key-file=/tmp/mirror.asc
//
// serves Terraform 1.5.7 at http://10.0.0.5:9680/terraform/... and writes
// the public signing key, armored, to /tmp/mirror.asc (the chart's
// engines.terraform.signingKey). GET /_requests answers how many requests
// each path had, as JSON.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/landform-dev/landform/internal/testenv/enginemirror"
)

// release is a --terraform or --opentofu value: BINARY=VERSION[,VERSION...].
type release struct {
	engine string
	opts   *[]enginemirror.Option
}

func (r release) String() string { return "" }

func (r release) Set(v string) error {
	binary, versions, ok := strings.Cut(v, "=")
	if !ok || binary == "" || versions == "" {
		return fmt.Errorf("want BINARY=VERSION[,VERSION...], got %q", v)
	}
	with := enginemirror.WithTerraform
	if r.engine == enginemirror.OpenTofu {
		with = enginemirror.WithOpenTofu
	}
	*r.opts = append(*r.opts, with(binary, strings.Split(versions, ",")...))
	return nil
}

func main() {
	var (
		listen  = flag.String("listen", "127.0.0.1:9680", "address to serve on")
		dir     = flag.String("dir", "/tmp/e2e-enginemirror", "directory for the archives")
		keyFile = flag.String("key-file", "", "write the armored public signing key to this file")
		opts    []enginemirror.Option
	)
	flag.Var(release{enginemirror.Terraform, &opts}, "terraform", "BINARY=VERSION[,VERSION...]: serve this Terraform binary as these versions (repeatable)")
	flag.Var(release{enginemirror.OpenTofu, &opts}, "opentofu", "BINARY=VERSION[,VERSION...]: serve this OpenTofu binary as these versions (repeatable)")
	flag.Parse()

	m, err := enginemirror.Start(*dir, append(opts, enginemirror.Listen(*listen))...)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if *keyFile != "" {
		if err := os.WriteFile(*keyFile, []byte(m.SigningKey()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Fprintf(os.Stderr, "serving engine releases on %s (Terraform %s, OpenTofu %s)\n", *listen, m.TerraformURL(), m.OpenTofuURL())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
}
