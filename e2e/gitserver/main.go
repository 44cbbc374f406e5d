// Command e2e-gitserver serves git repositories over smart HTTP, read-only
// unless --allow-push (the real-cluster suite pushes its charts), for the
// end-to-end suites: Flux's source-controller clones only
// http(s) and ssh URLs, and the suites must not depend on a public Git host.
// It runs `git http-backend` (from the git on PATH) as a CGI program
// (internal/devenv/gitserver, which `landform dev` uses too, with pushes).
//
//	e2e-gitserver --listen=:8080 --root=/tmp/git --seed=landform=/srv/seed
//
// serves http://HOST:8080/landform.git, whose branch main holds one commit
// of the files under /srv/seed.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"

	"github.com/landform-dev/landform/internal/devenv/gitserver"
)

type seeds []string

func (s *seeds) String() string     { return strings.Join(*s, ",") }
func (s *seeds) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var (
		listen = flag.String("listen", ":8080", "address to serve on")
		root   = flag.String("root", "/tmp/git", "directory of the bare repositories (NAME.git)")
		push   = flag.Bool("allow-push", false, "accept pushes (anyone who reaches the address may push)")
		seed   seeds
	)
	flag.Var(&seed, "seed", "NAME=DIR: create the repository NAME.git with one commit of DIR's files on branch main (repeatable)")
	flag.Parse()

	for _, s := range seed {
		name, dir, ok := strings.Cut(s, "=")
		if !ok || name == "" || dir == "" {
			log.Fatalf("--seed %q: want NAME=DIR", s)
		}
		if err := gitserver.Seed(*root, name, dir); err != nil {
			log.Fatal(err)
		}
	}
	h, err := gitserver.Handler(*root, *push)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "serving %s on %s\n", *root, *listen)
	log.Fatal(http.ListenAndServe(*listen, h))
}
