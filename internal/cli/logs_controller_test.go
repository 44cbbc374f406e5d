package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubelet stands in for the kubelet of a Node the tests create: the API
// server proxies pods/log to it as to any node's kubelet, so the CLI reads
// Pod logs through the real API server. It is the one part of a cluster
// envtest lacks. Like a kubelet it keeps each line's time, and answers
// follow, timestamps, sinceSeconds and sinceTime.
type kubelet struct {
	mu sync.Mutex
	// logs are the containers' logs by namespace/pod/container.
	logs map[string][]logLine
	// followers get the lines logged while they follow.
	followers map[string][]chan logLine
}

// logLine is one line of a container's log and when it was written.
type logLine struct {
	at   time.Time
	text string
}

// startKubelet serves containers' logs for Pods on the Node node.
func startKubelet(t *testing.T, node string) *kubelet {
	t.Helper()
	k := &kubelet{logs: map[string][]logLine{}, followers: map[string][]chan logLine{}}
	srv := httptest.NewUnstartedServer(k)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	p, _ := strconv.Atoi(port)

	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(p)
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	return k
}

// ServeHTTP answers /containerLogs/NAMESPACE/POD/CONTAINER with the
// query the API server passes on: follow, timestamps (RFC 3339 with
// nanoseconds, then a space, as the kubelet writes them), sinceSeconds and
// sinceTime (lines written before it are left out).
func (k *kubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/containerLogs/")
	q := r.URL.Query()
	follow := q.Get("follow") == "true"
	var since time.Time
	if s := q.Get("sinceSeconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if s := q.Get("sinceTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		since = t
	}
	more := make(chan logLine, 100)
	k.mu.Lock()
	lines, ok := k.logs[key]
	lines = slices.Clone(lines)
	if follow {
		k.followers[key] = append(k.followers[key], more)
	}
	k.mu.Unlock()
	if !ok {
		http.Error(w, "container "+key+" not found", http.StatusNotFound)
		return
	}
	write := func(l logLine) {
		if l.at.Before(since) {
			return
		}
		if q.Get("timestamps") == "true" {
			io.WriteString(w, l.at.UTC().Format(time.RFC3339Nano)+" ")
		}
		io.WriteString(w, l.text+"\n")
	}
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	for _, l := range lines {
		write(l)
	}
	flush()
	for follow {
		select {
		case <-r.Context().Done():
			return
		case l := <-more:
			write(l)
			flush()
		}
	}
}

// log appends lines to a container's log, written now.
func (k *kubelet) log(key string, lines ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, text := range lines {
		l := logLine{at: time.Now(), text: text}
		k.logs[key] = append(k.logs[key], l)
		for _, f := range k.followers[key] {
			f <- l
		}
	}
}

// age moves every line of a container's log d back in time, as if
// written d earlier.
func (k *kubelet) age(key string, d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.logs[key] {
		k.logs[key][i].at = k.logs[key][i].at.Add(-d)
	}
}

// controllerLogPod creates a controller Pod on node, labelled as the chart
// labels component's Pods.
func controllerLogPod(t *testing.T, ns, name, node, component string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{nameLabel: nameValue, componentLabel: component, "app.kubernetes.io/instance": "landform"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "manager", Image: "ghcr.io/landform-dev/landform-controller:v0.3.0"},
			{Name: "proxy", Image: "proxy:1.0"},
		}},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// Lines as landform-controller writes them (JSON, controller-runtime's
// keys): about logs-ctl/database, about other objects, about none.
var (
	startLine     = `{"level":"info","ts":"2026-03-02T10:00:00.000Z","logger":"setup","msg":"starting landform-controller","version":"v0.3.0","runner":"pod"}`
	reconcileLine = `{"level":"info","ts":"2026-03-02T10:14:09.512Z","msg":"reconcile did not finish","controller":"terraform","controllerGroup":"infra.landform.dev","controllerKind":"Terraform","Terraform":{"name":"database","namespace":"logs-ctl"},"namespace":"logs-ctl","name":"database","reconcileID":"7c1e2f3a","reason":"PlanPending","error":"plan plan-2222222222-b2b2b2b2b2 (+2 ~1 -2) waits for approval"}`
	otherNameLine = `{"level":"info","ts":"2026-03-02T10:14:10.001Z","msg":"reconcile did not finish","controller":"terraform","controllerGroup":"infra.landform.dev","controllerKind":"Terraform","Terraform":{"name":"network","namespace":"logs-ctl"},"namespace":"logs-ctl","name":"network","reconcileID":"8d2f3a4b","reason":"DependencyNotReady","error":"waiting for Terraform logs-ctl/database"}`
	otherNSLine   = `{"level":"error","ts":"2026-03-02T10:14:11.000Z","msg":"stopping a runner","terraform":"team-b/database","error":"runner gone"}`
	runLine       = `{"level":"info","ts":"2026-03-02T10:20:30.250Z","msg":"the run could not save its state; its runner retries writing it","terraform":"logs-ctl/database","run":"run-0123456789abcdef"}`
	shardLine     = `{"level":"info","ts":"2026-03-02T10:21:00.000Z","msg":"released a state lock whose runner is gone","controller":"terraform","controllerGroup":"infra.landform.dev","controllerKind":"Terraform","Terraform":{"name":"database","namespace":"logs-ctl"},"namespace":"logs-ctl","name":"database","lock":"9b1c0e4a","holder":"landform@database-runner-x7k2p"}`
	appliedLine   = `{"level":"info","ts":"2026-03-02T12:30:00.000Z","msg":"applied plan","controller":"terraform","controllerGroup":"infra.landform.dev","controllerKind":"Terraform","Terraform":{"name":"database","namespace":"logs-ctl"},"namespace":"logs-ctl","name":"database","plan":"plan-2222222222-b2b2b2b2b2"}`
	driftLine     = `{"level":"info","ts":"2026-03-02T12:35:00.000Z","msg":"drift check planned no changes","controller":"terraform","controllerGroup":"infra.landform.dev","controllerKind":"Terraform","Terraform":{"name":"database","namespace":"logs-ctl"},"namespace":"logs-ctl","name":"database","plan":"plan-2222222222-b2b2b2b2b2"}`
)

// TestLogsController reads the controller's log through the API server
// from a kubelet standing in for the controller's node.
func TestLogsController(t *testing.T) {
	ns := namespace(t, "logs-ctl")
	terraform(t, ns, "database", states[objReady])
	golden(t, "logs/controller-no-pod", run(t, "", "logs", "-n", ns, "database", "--controller").transcript())

	k := startKubelet(t, "logs-ctl-node")
	sys := namespace(t, "logs-ctl-system")
	controllerLogPod(t, sys, "landform-controller-7d4f9-abcde", "logs-ctl-node", controllerValue)
	main := sys + "/landform-controller-7d4f9-abcde/manager"
	k.log(main, startLine, reconcileLine, otherNameLine, otherNSLine, runLine)
	k.log(sys+"/landform-controller-7d4f9-abcde/proxy", runLine)

	golden(t, "logs/controller", run(t, "", "logs", "-n", ns, "database", "--controller").transcript())
	golden(t, "logs/controller-and-phase", run(t, "", "logs", "-n", ns, "database", "--controller", "--phase", "plan").transcript())

	// A shard's Pod too; its log is read beside the main controller's.
	controllerLogPod(t, sys, "landform-controller-shard-a-6c5b8-fghij", "logs-ctl-node", "shard")
	shard := sys + "/landform-controller-shard-a-6c5b8-fghij/manager"
	k.log(shard, startLine)
	cmd := start(t, "logs", "-n", ns, "database", "--controller", "-f")
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "run-0123456789abcdef") })
	k.log(shard, otherNameLine, shardLine)
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "released a state lock") })
	r := cmd.stop(t)
	if r.err != nil {
		t.Fatalf("logs --controller -f ended with %v", r.err)
	}
	golden(t, "logs/controller-follow", r.transcript())

	// --tail counts the lines printed: main's last line is about another
	// object; each Pod's last line about database is printed.
	k.log(main, otherNSLine)
	r = run(t, "", "logs", "-n", ns, "database", "--controller", "--tail", "1")
	golden(t, "logs/controller-tail", r.transcript())
	if got := strings.Count(r.stdout, "\n"); got != 2 {
		t.Errorf("--tail 1 of two Pods printed %d lines, want 2:\n%s", got, r.stdout)
	}

	// --since: the kubelet leaves out what was logged before the last hour.
	k.age(main, 2*time.Hour)
	k.age(shard, 2*time.Hour)
	k.log(main, appliedLine, otherNameLine)
	r = run(t, "", "logs", "-n", ns, "database", "--controller", "--since", "1h")
	golden(t, "logs/controller-since", r.transcript())
	if strings.Contains(r.stdout, "released a state lock") || !strings.Contains(r.stdout, "applied plan") {
		t.Errorf("--since 1h printed lines of two hours ago, or not the new one:\n%s", r.stdout)
	}

	// --tail with -f: the last line about database of each Pod, then the
	// new ones, each once although the log is read again from the last
	// line's second.
	cmd = start(t, "logs", "-n", ns, "database", "--controller", "--tail", "1", "-f")
	cmd.waitOutput(t, func(s string) bool {
		return strings.Contains(s, "applied plan") && strings.Contains(s, "released a state lock")
	})
	k.log(main, otherNSLine, driftLine)
	cmd.waitOutput(t, func(s string) bool { return strings.Contains(s, "drift check planned") })
	r = cmd.stop(t)
	if r.err != nil {
		t.Fatalf("logs --controller --tail 1 -f ended with %v", r.err)
	}
	// The Pods are read at once: each Pod's lines in order, Pod by Pod.
	r.stdout = byPod(r.stdout)
	golden(t, "logs/controller-tail-follow", r.transcript())
	for _, msg := range []string{"applied plan", "released a state lock", "drift check planned"} {
		if got := strings.Count(r.stdout, msg); got != 1 {
			t.Errorf("%q printed %d times, want once:\n%s", msg, got, r.stdout)
		}
	}
}

// byPod orders the lines of logs --controller -f by their Pod, keeping
// each Pod's lines in the order printed.
func byPod(out string) string {
	lines := strings.SplitAfter(out, "\n")
	slices.SortStableFunc(lines, func(x, y string) int {
		px, _, _ := strings.Cut(x, " ")
		py, _, _ := strings.Cut(y, " ")
		return strings.Compare(px, py)
	})
	return strings.Join(lines, "")
}

func TestAboutObject(t *testing.T) {
	for _, tt := range []struct {
		name string
		line string
		want bool
	}{
		{"reconciler", reconcileLine, true},
		{"run tracker", runLine, true},
		{"other name", otherNameLine, false},
		{"other namespace", otherNSLine, false},
		{"no object", startLine, false},
		{"console encoding", "2026-03-02T10:14:09.512Z\tINFO\treconcile did not finish {almost}\t" +
			`{"controller": "terraform", "Terraform": {"name":"database","namespace":"logs-ctl"}, "namespace": "logs-ctl", "name": "database"}`, true},
		{"console encoding, other object", "2026-03-02T10:14:09.512Z\tINFO\treconcile did not finish\t" +
			`{"controller": "terraform", "Terraform": {"name":"database","namespace":"elsewhere"}}`, false},
		{"not a log line", "goroutine 1 [running]:", false},
		{"another kind's reference", `{"Kustomization":{"name":"database","namespace":"logs-ctl"}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := aboutObject([]byte(tt.line), "logs-ctl", "database"); got != tt.want {
				t.Errorf("aboutObject = %v, want %v", got, tt.want)
			}
		})
	}
}
