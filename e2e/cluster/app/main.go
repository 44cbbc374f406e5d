// Command e2e-app is the application of the real-cluster suite's seeds
// pattern: the workload that shares a lifecycle with its infrastructure.
// It starts only once the kubelet could mount Landform's outputs Secret,
// prints the security group it was given, and proves the database DSN
// from that Secret works by connecting to the stand-in cloud's database
// with the DSN's credentials. Then it waits for SIGTERM.
//
// Environment:
//
//	SECURITY_GROUP_ID  the security group id (from the Secret, as the chart passes it)
//	DSN_FILE           file holding the DSN (the mounted Secret's key)
//	CLOUD_ENDPOINT     base URL of the stand-in cloud's API
//
// It never prints the DSN's password.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/landform-dev/landform/internal/cloud"
)

func main() {
	sg := os.Getenv("SECURITY_GROUP_ID")
	fmt.Printf("security group: %s\n", sg)
	if err := connect(); err != nil {
		fmt.Printf("database: %v\n", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

// connect reads the DSN (postgres://user:password@ID.domain:port/name) and
// connects to database ID as user.
func connect() error {
	raw, err := os.ReadFile(os.Getenv("DSN_FILE"))
	if err != nil {
		return err
	}
	dsn, err := url.Parse(strings.TrimSpace(string(raw)))
	if err != nil || dsn.User == nil {
		return fmt.Errorf("the DSN in %s is not postgres://user:password@host:port/name", os.Getenv("DSN_FILE"))
	}
	id, _, _ := strings.Cut(dsn.Hostname(), ".")
	password, _ := dsn.User.Password()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &cloud.Client{URL: os.Getenv("CLOUD_ENDPOINT")}
	s, err := c.Connect(ctx, id, dsn.User.Username(), password)
	if err != nil {
		return fmt.Errorf("connecting to %s as %s: %w", id, dsn.User.Username(), err)
	}
	fmt.Printf("database: connected to %s (%s) as %s\n", s.Database, id, s.Username)
	return nil
}
