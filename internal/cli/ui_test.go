package cli

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/landform-dev/landform/internal/testenv"
)

// TestUI: `landform ui` refuses an address other machines could reach;
// otherwise it prints its URL with the token, serves the list to the
// browser that opens that URL, and stops on Ctrl-C (the context).
func TestUI(t *testing.T) {
	r := run(t, "", "ui", "--address=0.0.0.0:0")
	if r.err == nil || !strings.Contains(r.err.Error(), "--address must be a loopback address") {
		t.Errorf("ui on every interface: %v; want a refusal\n%s", r.err, r.transcript())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testenv.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Execute(ctx, Options{Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}},
			[]string{"--kubeconfig", kubeconfig(t), "ui", "--address=127.0.0.1:0"})
	}()
	printed := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=\S+`)
	var url string
	for deadline := time.Now().Add(time.Minute); url == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		url = printed.FindString(out.String())
	}
	if url == "" {
		t.Fatalf("ui printed no URL:\n%s\n%s", out.String(), errOut.String())
	}
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.RawQuery != "" {
		t.Errorf("the printed URL led to %d %s; want the list, the token traded for a cookie", resp.StatusCode, resp.Request.URL)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ui ended with %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ui did not stop on Ctrl-C")
	}
}
