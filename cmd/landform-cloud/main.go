// Command landform-cloud serves the stand-in cloud (internal/cloud) on its
// own, until SIGTERM or SIGINT: for the provider's tests and for trying the
// landform provider without `landform dev`. It prints the API's base URL as
// the first line on stdout.
//
//	landform-cloud --listen 127.0.0.1:8480 --state-file ~/.landform/cloud.json
//	export LANDFORM_CLOUD_ENDPOINT=http://127.0.0.1:8480
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/landform-dev/landform/internal/cloud"
)

func main() {
	if err := run(); err != nil {
		slog.Error("landform-cloud failed", "error", err.Error())
		os.Exit(1)
	}
}

func run() error {
	var (
		listen    = flag.String("listen", "127.0.0.1:8480", "address to listen on (port 0 picks a free one); keep it on loopback")
		stateFile = flag.String("state-file", "", "keep the objects in this JSON file across restarts (default: in memory only)")
		token     = flag.String("token", os.Getenv("LANDFORM_CLOUD_TOKEN"), "bearer token clients must send (default $LANDFORM_CLOUD_TOKEN; none when empty)")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: landform-cloud takes flags only", flag.Args())
	}

	srv := cloud.New(cloud.Options{Token: *token, StateFile: *stateFile})
	url, err := srv.Start(*listen)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Println(url)
	slog.Info("serving the stand-in cloud", "url", url, "stateFile", *stateFile, "token", *token != "")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}
