package poddns_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/landform-dev/landform/internal/testenv/poddns"
)

func listen(t *testing.T, opts ...poddns.Option) *poddns.Server {
	t.Helper()
	s, err := poddns.Listen("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// resolver is Go's own resolver asking s alone, over network ("udp" or
// "tcp") whatever it would have chosen.
func resolver(s *poddns.Server, network string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, s.Addr())
	}}
}

// deadline keeps a broken server from hanging the test; no assertion
// depends on it.
func deadline(c net.Conn) { _ = c.SetDeadline(time.Now().Add(10 * time.Second)) }

func query(t *testing.T, id uint16, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}},
	}
	b, err := msg.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exchange sends packet on c, a UDP connection to the server, and returns
// the first response that comes back.
func exchange(t *testing.T, c net.Conn, packet []byte) dnsmessage.Message {
	t.Helper()
	if _, err := c.Write(packet); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	return m
}

func dial(t *testing.T, network string, s *poddns.Server) net.Conn {
	t.Helper()
	c, err := net.Dial(network, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	deadline(c)
	return c
}

// Go's resolver, over UDP and over TCP, finds a Pod by its pod name and
// nothing else.
func TestResolver(t *testing.T) {
	s := listen(t)
	for _, network := range []string{"udp", "tcp"} {
		r := resolver(s, network)
		ctx := context.Background()
		for _, name := range []string{"10-244-0-5.flux-system.pod.cluster.local.", "10-244-0-5.Flux-System.POD.Cluster.Local."} {
			got, err := r.LookupNetIP(ctx, "ip", name)
			if want := []netip.Addr{netip.MustParseAddr("10.244.0.5")}; err != nil || !slices.Equal(got, want) {
				t.Errorf("%s: %s: %v, %v; want %v", network, name, got, err, want)
			}
		}
		for _, name := range []string{"10-245-0-5.ns.pod.cluster.local.", "runner.ns.svc.cluster.local.", "example.com."} {
			got, err := r.LookupNetIP(ctx, "ip", name)
			var dnsErr *net.DNSError
			if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
				t.Errorf("%s: %s: %v, %v; want not found", network, name, got, err)
			}
		}
	}
}

// The response's RCODE and records for each kind of name, as a packet.
func TestResponses(t *testing.T) {
	s := listen(t)
	c := dial(t, "udp", s)
	for i, tc := range []struct {
		name   string
		typ    dnsmessage.Type
		rcode  dnsmessage.RCode
		answer string // the A record's address, if any
	}{
		{"10-244-0-5.ns.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, "10.244.0.5"},
		{"10-244-255-1.Default.Pod.CLUSTER.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, "10.244.255.1"},
		{"10-244-0-5.ns.pod.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, ""},
		{"10-244-0-5.ns.pod.cluster.local.", dnsmessage.TypeTXT, dnsmessage.RCodeSuccess, ""},
		{"10-245-0-5.ns.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},   // outside the CIDRs
		{"127-0-0-1.ns.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},    // outside the CIDRs
		{"x.ns.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},            // a Service
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},                       // never forwarded
		{"10-244-0.ns.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},     // three parts
		{"10-244-0-5-6.ns.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""}, // five parts
		{"999-1-1-1.ns.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},
		{"10-244-00-5.ns.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},
		{"10-244-0-5.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},         // no namespace
		{"10-244-0-5.a.b.pod.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},     // two
		{"10-244-0-5.ns.pod.cluster.local.evil.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""}, // another domain
		{"10-244-0-5.ns.pod.other.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},
		{"10-244-0-5.ns.pod.cluster.local.", dnsmessage.Type(65280), dnsmessage.RCodeSuccess, ""}, // a private type
	} {
		id := uint16(100 + i)
		m := exchange(t, c, query(t, id, tc.name, tc.typ))
		var got []string
		for _, a := range m.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok && a.Header.TTL == 5 && a.Header.Name.String() == tc.name {
				got = append(got, netip.AddrFrom4(r.A).String())
			} else {
				got = append(got, a.GoString())
			}
		}
		var want []string
		if tc.answer != "" {
			want = []string{tc.answer}
		}
		if m.ID != id || !m.Response || !m.Authoritative || m.RCode != tc.rcode || !slices.Equal(got, want) {
			t.Errorf("%s %v: id %d, authoritative %v, %v, answers %v; want id %d, authoritative, %v, %v",
				tc.name, tc.typ, m.ID, m.Authoritative, m.RCode, got, id, tc.rcode, want)
		}
		if len(m.Questions) != 1 || m.Questions[0].Name.String() != tc.name {
			t.Errorf("%s: question %v not echoed", tc.name, m.Questions)
		}
	}
	if s.Answered() != 5 || s.Refused() != 12 {
		t.Errorf("answered %d, refused %d; want 5, 12", s.Answered(), s.Refused())
	}
}

// WithDomain and WithCIDRs replace the defaults.
func TestOptions(t *testing.T) {
	s := listen(t, poddns.WithDomain("Example.Internal."), poddns.WithCIDRs(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.0/24")))
	c := dial(t, "udp", s)
	for i, tc := range []struct {
		name  string
		rcode dnsmessage.RCode
	}{
		{"10-1-2-3.ns.pod.example.internal.", dnsmessage.RCodeSuccess},
		{"192-168-1-7.ns.pod.example.internal.", dnsmessage.RCodeSuccess},
		{"192-168-2-7.ns.pod.example.internal.", dnsmessage.RCodeNameError},
		{"10-244-0-5.ns.pod.cluster.local.", dnsmessage.RCodeNameError},
	} {
		if m := exchange(t, c, query(t, uint16(i), tc.name, dnsmessage.TypeA)); m.RCode != tc.rcode {
			t.Errorf("%s: %v, want %v", tc.name, m.RCode, tc.rcode)
		}
	}
}

// A packet that is no query gets no response, and the next query on the
// same socket gets its own: the first response read answers it.
func TestMalformedUDP(t *testing.T) {
	s := listen(t)
	c := dial(t, "udp", s)
	valid := query(t, 7, "10-244-0-5.ns.pod.cluster.local.", dnsmessage.TypeA)
	response := slices.Clone(valid)
	response[2] |= 0x80 // QR
	twoQuestions := slices.Clone(valid)
	twoQuestions[5] = 2
	noQuestion := slices.Clone(valid[:12])
	noQuestion[5] = 0
	for i, packet := range [][]byte{
		{},
		{0x01},
		[]byte("garbage, not a DNS packet at all"),
		valid[:12],           // a header promising a question
		valid[:len(valid)-2], // a truncated question
		response,             // not a query
		twoQuestions,         // the second missing
		noQuestion,           // nothing asked
		append(slices.Clone(valid[:12]), 0xc0, 0x0c, 0, 1, 0, 1), // a name pointing at itself
	} {
		if _, err := c.Write(packet); err != nil {
			t.Fatal(err)
		}
		q := query(t, uint16(1000+i), "10-244-0-5.ns.pod.cluster.local.", dnsmessage.TypeA)
		if m := exchange(t, c, q); m.ID != uint16(1000+i) || len(m.Answers) != 1 {
			t.Errorf("after packet %d (%q): a response %d with %d answers, want %d with 1", i, packet, m.ID, len(m.Answers), 1000+i)
		}
	}
}

// Over TCP, a message that does not parse closes its connection; the
// server still answers the next one.
func TestMalformedTCP(t *testing.T) {
	s := listen(t)
	c := dial(t, "tcp", s)
	if _, err := c.Write([]byte{0, 3, 'b', 'a', 'd'}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 512)); err != io.EOF {
		t.Errorf("read %d bytes, %v; want the connection closed", n, err)
	}
	c = dial(t, "tcp", s)
	for i := range 2 { // two queries on one connection
		q := query(t, uint16(i), "10-244-0-5.ns.pod.cluster.local.", dnsmessage.TypeA)
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
			t.Fatal(err)
		}
		var size [2]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf); err != nil || m.ID != uint16(i) || len(m.Answers) != 1 {
			t.Errorf("query %d: %v, %+v", i, err, m)
		}
	}
}

// Close stops both listeners and returns once the server is done.
func TestClose(t *testing.T) {
	s, err := poddns.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dial(t, "tcp", s) // an idle connection, which Close ends
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Errorf("TCP still accepts after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestListenErrors(t *testing.T) {
	s := listen(t)
	if _, err := poddns.Listen(s.Addr()); err == nil {
		t.Errorf("a second server on %s: no error", s.Addr())
	}
	if _, err := poddns.Listen("127.0.0.1:0", poddns.WithDomain(".")); err == nil {
		t.Errorf("an empty domain: no error")
	}
}
