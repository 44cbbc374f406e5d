// Command enginecount stands in for the engine binary in `make bench`: it
// appends one line, "<$BENCH_ENGINE_CALLER> <subcommand> <unix µs>", to a
// counter file (the time places the process in an object's timeline) and
// then execs the real engine in its own process, so the engine
// keeps this PID (CPU accounting from /proc stays with the caller's
// children) and the only cost is this program's start. The bench builds it
// into its work directory as "tofu", so that the runner still tells the
// engine by its name, with the paths set by -ldflags:
//
//	go build -ldflags "-X main.engine=/abs/bin/tofu -X main.counter=/tmp/x/engine-processes" \
//	    -o /tmp/x/engine/tofu ./hack/bench/enginecount
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Set by -ldflags -X.
var engine, counter string

func main() {
	if engine == "" || counter == "" {
		fmt.Fprintln(os.Stderr, "enginecount: built without -X main.engine and -X main.counter")
		os.Exit(2)
	}
	sub := "-"
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			sub = a
			break
		}
	}
	caller := os.Getenv("BENCH_ENGINE_CALLER")
	if caller == "" {
		caller = "unknown"
	}
	// One write of a short line with O_APPEND: concurrent engines never
	// interleave their lines.
	f, err := os.OpenFile(counter, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString(caller + " " + sub + " " + strconv.FormatInt(time.Now().UnixMicro(), 10) + "\n")
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginecount:", err)
		os.Exit(2)
	}
	argv := append([]string{engine}, os.Args[1:]...)
	err = syscall.Exec(engine, argv, os.Environ())
	fmt.Fprintln(os.Stderr, "enginecount: exec", engine+":", err)
	os.Exit(2)
}
