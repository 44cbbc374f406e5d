package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// ports are the loopback ports that other things remember: the API
// server's is in the kubeconfig users exported, the git server's in
// GitRepository objects and clones' remotes, the cloud's in runner
// environments and Terraform states, the artifact storage's in source
// statuses. They are recorded in the state directory and reused, so that a
// restart keeps every stored URL valid.
type ports struct {
	APIServer     int `json:"apiServer"`
	Git           int `json:"git"`
	Cloud         int `json:"cloud"`
	SourceStorage int `json:"sourceStorage"`
}

// portFlag names the flag that chooses each port, for error messages.
var portFlag = map[string]string{
	"kube-apiserver": "--api-port",
	"git server":     "--git-port",
	"stand-in cloud": "--cloud-port",
}

func readPorts(path string) (ports, error) {
	var p ports
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("%s: %w (remove it to choose new ports)", path, err)
	}
	return p, nil
}

func writePorts(path string, p ports) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// reserve settles one port: the one asked for, else the recorded one, else
// a free one. A port in use is an error that says what to do, except a
// recorded one that nothing stored depends on (movable): that one is
// replaced by a free one, and the returned note says so.
func reserve(name string, asked int, recorded *int, movable bool, portsFile string, taken map[int]bool) (string, error) {
	port, from := asked, "asked for"
	if port == 0 && *recorded != 0 {
		port, from = *recorded, "recorded in "+portsFile+" so that stored URLs stay valid"
	}
	if port != 0 && taken[port] {
		return "", fmt.Errorf("port %d for the %s is also chosen for another component: choose distinct ports", port, name)
	}
	var note string
	if port != 0 {
		err := portFree(port)
		if err == nil {
			*recorded, taken[port] = port, true
			return "", nil
		}
		if asked != 0 || !movable {
			hint := "stop what uses it"
			if f := portFlag[name]; f != "" {
				hint += ", or choose another with " + f
			}
			return "", fmt.Errorf("port %d for the %s (%s) is in use: %s", port, name, from, hint)
		}
		note = fmt.Sprintf("%d was in use", port)
	}
	for {
		free, err := freePort()
		if err != nil {
			return "", err
		}
		if !taken[free] {
			*recorded, taken[free] = free, true
			return note, nil
		}
	}
}

func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func portsPath(state string) string { return filepath.Join(state, "ports.json") }
