package devenv

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestReserve: asked-for and recorded ports are kept while free; a busy
// one is an error naming the flag, unless nothing stored depends on it.
func TestReserve(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	free, err := freePort()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name            string
		component       string
		asked, recorded int
		movable         bool
		wantPort        int // 0: any port but busy
		wantNote        string
		wantErr         string
	}{
		{name: "first start picks a free port", component: "git server"},
		{name: "recorded port kept", component: "git server", recorded: free, wantPort: free},
		{name: "asked port kept", component: "git server", asked: free, recorded: busy, wantPort: free},
		{name: "recorded port busy", component: "git server", recorded: busy,
			wantErr: "port " + strconv.Itoa(busy) + " for the git server (recorded in ports.json so that stored URLs stay valid) is in use: stop what uses it, or choose another with --git-port"},
		{name: "asked port busy", component: "stand-in cloud", asked: busy, movable: true,
			wantErr: "port " + strconv.Itoa(busy) + " for the stand-in cloud (asked for) is in use: stop what uses it, or choose another with --cloud-port"},
		{name: "recorded movable port busy moves", component: "kube-apiserver", recorded: busy, movable: true,
			wantNote: strconv.Itoa(busy) + " was in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recorded := tt.recorded
			note, err := reserve(tt.component, tt.asked, &recorded, tt.movable, "ports.json", map[int]bool{})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if note != tt.wantNote {
				t.Errorf("note %q, want %q", note, tt.wantNote)
			}
			if tt.wantPort != 0 && recorded != tt.wantPort {
				t.Errorf("port %d, want %d", recorded, tt.wantPort)
			}
			if recorded == 0 || recorded == busy {
				t.Errorf("port %d: want a free one", recorded)
			}
		})
	}

	// Two components never get the same port.
	taken := map[int]bool{}
	var a, b int
	if _, err := reserve("git server", 0, &a, false, "ports.json", taken); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve("stand-in cloud", a, &b, false, "ports.json", taken); err == nil || !strings.Contains(err.Error(), "also chosen for another component") {
		t.Errorf("the same port twice: %v", err)
	}
}
