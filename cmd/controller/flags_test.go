package main

import (
	"io"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
)

// TestFlags checks Flux's flag names, Landform's deny-by-default for
// cross-namespace references, and the deprecated names still working.
func TestFlags(t *testing.T) {
	cases := []struct {
		args        []string
		leader      bool
		noCrossNS   bool
		level       string
		encoding    string
		qps         float32
		jitter      uint8
		deprecation []string
	}{
		{args: nil, noCrossNS: true, level: "info", encoding: "json", qps: 50, jitter: 5},
		{args: []string{"--enable-leader-election", "--no-cross-namespace-refs=false", "--log-level=debug", "--kube-api-qps=20", "--interval-jitter-percentage=0"},
			leader: true, noCrossNS: false, level: "debug", encoding: "json", qps: 20, jitter: 0},
		{args: []string{"--leader-elect", "--allow-cross-namespace-refs", "--zap-log-level=error", "--zap-encoder=console"},
			leader: true, noCrossNS: false, level: "error", encoding: "console", qps: 50, jitter: 5,
			deprecation: []string{
				"flag --leader-elect is deprecated: use --enable-leader-election",
				"flag --allow-cross-namespace-refs is deprecated: use --no-cross-namespace-refs=false",
				"flag --zap-log-level is deprecated: use --log-level",
				"flag --zap-encoder is deprecated: use --log-encoding",
			}},
		// The new name wins over the old one.
		{args: []string{"--leader-elect", "--enable-leader-election=false", "--zap-log-level=error", "--log-level=info"},
			leader: false, noCrossNS: true, level: "info", encoding: "json", qps: 50, jitter: 5,
			deprecation: []string{"flag --leader-elect is deprecated: use --enable-leader-election", "flag --zap-log-level is deprecated: use --log-level"}},
		{args: []string{"--zap-devel", "--zap-time-encoding=iso8601", "--drain-timeout=5m"}, noCrossNS: true, level: "debug", encoding: "json", qps: 50, jitter: 5,
			deprecation: []string{"flag --zap-devel is deprecated: use --log-level=debug", "flag --zap-time-encoding is deprecated and has no effect",
				"flag --drain-timeout is deprecated and has no effect"}},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		fs := pflag.NewFlagSet("landform-controller", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := bindFlags(fs)
		g.Expect(fs.Parse(tc.args)).To(Succeed())
		f.applyAliases(fs)
		g.Expect(f.leaderElection.Enable).To(Equal(tc.leader), "%v: leader election", tc.args)
		g.Expect(f.leaderElection.ReleaseOnCancel).To(BeTrue(), "%v: the lease is released once drained", tc.args)
		g.Expect(f.acl.NoCrossNamespaceRefs).To(Equal(tc.noCrossNS), "%v: cross-namespace refs", tc.args)
		g.Expect(f.log.LogLevel).To(Equal(tc.level), "%v: log level", tc.args)
		g.Expect(f.log.LogEncoding).To(Equal(tc.encoding), "%v: log encoding", tc.args)
		g.Expect(f.client.QPS).To(Equal(tc.qps), "%v: QPS", tc.args)
		g.Expect(f.jitter.Percentage).To(Equal(tc.jitter), "%v: jitter", tc.args)
		g.Expect(f.deprecated(fs)).To(ConsistOf(tc.deprecation), "%v: deprecations", tc.args)
	}
}
