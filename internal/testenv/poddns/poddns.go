// Package poddns answers the pod names of a cluster's DNS, and nothing
// else, for a real single-node test cluster that runs no cluster DNS: it
// is what CoreDNS's kubernetes plugin does with `pods insecure`.
//
// Why: tofu-controller, a peer we benchmark against, dials its runner Pods
// as 10-244-0-5.<namespace>.pod.cluster.local and checks that name in the
// runner's TLS certificate, so it needs those names to resolve. Its
// controller Pod is given `dnsPolicy: None` with the node's address as its
// only nameserver, where this server listens on port 53, UDP and TCP
// (e2e/poddns).
//
// An A query for <a>-<b>-<c>-<d>.<namespace>.pod.<domain> (case aside)
// answers a.b.c.d, TTL 5, when that is an IPv4 address inside one of the
// allowed CIDRs (the cluster's Pod network), so that the server never
// points anything outside the machine's own Pods; AAAA and any other type
// for such a name get no records (NODATA). Every other name gets an
// authoritative NXDOMAIN: it never forwards, so no query leaves the
// machine. Packets it cannot parse, and responses, are dropped.
package poddns

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// ttl is the answers' TTL in seconds: a Pod's address changes when it is
// recreated.
const ttl = 5

// Option configures a Server.
type Option func(*Server)

// WithDomain serves pod names under domain instead of cluster.local.
func WithDomain(domain string) Option {
	return func(s *Server) { s.domain = strings.ToLower(strings.Trim(domain, ".")) }
}

// WithCIDRs answers addresses in cidrs only, instead of 10.244.0.0/16
// (kind's Pod network).
func WithCIDRs(cidrs ...netip.Prefix) Option {
	return func(s *Server) { s.cidrs = cidrs }
}

// Server is a running server.
type Server struct {
	domain string
	cidrs  []netip.Prefix

	pc net.PacketConn
	ln net.Listener
	wg sync.WaitGroup

	answered, refused atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// Listen serves on addr (host:port), UDP and TCP, until Close. With port 0
// both take the same free port.
func Listen(addr string, opts ...Option) (*Server, error) {
	s := &Server{domain: "cluster.local", cidrs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, conns: map[net.Conn]bool{}}
	for _, o := range opts {
		o(s)
	}
	if s.domain == "" {
		return nil, errors.New("poddns: empty domain")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		if s.pc, err = net.ListenPacket("udp", addr); err != nil {
			return nil, err
		}
		_, p, _ := net.SplitHostPort(s.pc.LocalAddr().String())
		if s.ln, err = net.Listen("tcp", net.JoinHostPort(host, p)); err == nil {
			break
		}
		s.pc.Close()
		if port != "0" || try == 10 { // another process holds the TCP port
			return nil, err
		}
	}
	s.wg.Add(2)
	go s.serveUDP()
	go s.serveTCP()
	return s, nil
}

// Addr is the address, host:port, the server answers on, UDP and TCP.
func (s *Server) Addr() string { return s.pc.LocalAddr().String() }

// Answered is how many queries for a pod name it answered, NODATA included.
func (s *Server) Answered() int { return int(s.answered.Load()) }

// Refused is how many queries it answered with NXDOMAIN.
func (s *Server) Refused() int { return int(s.refused.Load()) }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := errors.Join(s.pc.Close(), s.ln.Close())
	s.wg.Wait()
	return err
}

func (s *Server) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, from, err := s.pc.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if resp, ok := s.respond(buf[:n]); ok {
			_, _ = s.pc.WriteTo(resp, from)
		}
	}
}

func (s *Server) serveTCP() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// serveConn answers length-prefixed queries on c until its client is done,
// idle for a while, or sends one it cannot parse.
func (s *Server) serveConn(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	for {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		var size [2]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(c, query); err != nil {
			return
		}
		resp, ok := s.respond(query)
		if !ok {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
			return
		}
	}
}

// respond is the response to a query, and false for a packet to drop: one
// that does not parse, is not a standard query or asks not one question.
func (s *Server) respond(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response || h.OpCode != 0 {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return nil, false
	}
	addr, ok := s.lookup(q.Name.String())
	ok = ok && q.Class == dnsmessage.ClassINET
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if ok {
		s.answered.Add(1)
	} else {
		rh.RCode = dnsmessage.RCodeNameError
		s.refused.Add(1)
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	err = errors.Join(b.StartQuestions(), b.Question(q))
	if ok && (q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeALL) {
		err = errors.Join(err, b.StartAnswers(), b.AResource(
			dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: ttl},
			dnsmessage.AResource{A: addr.As4()}))
	}
	resp, ferr := b.Finish()
	return resp, errors.Join(err, ferr) == nil
}

// lookup is the address of pod name <a>-<b>-<c>-<d>.<namespace>.pod.<domain>,
// if it is one and in the allowed CIDRs.
func (s *Server) lookup(name string) (netip.Addr, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	rest, ok := strings.CutSuffix(name, ".pod."+s.domain)
	if !ok {
		return netip.Addr{}, false
	}
	label, namespace, ok := strings.Cut(rest, ".")
	if !ok || namespace == "" || strings.Contains(namespace, ".") {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(strings.ReplaceAll(label, "-", "."))
	if err != nil || !addr.Is4() {
		return netip.Addr{}, false
	}
	for _, p := range s.cidrs {
		if p.Contains(addr) {
			return addr, true
		}
	}
	return netip.Addr{}, false
}
