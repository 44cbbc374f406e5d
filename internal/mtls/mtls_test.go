package mtls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

func mustCA(t *testing.T, cn string) *CA {
	t.Helper()
	ca, err := NewCA(cn, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

type pair struct{ cert, key []byte }

func mustServer(t *testing.T, ca *CA, hosts ...string) pair {
	t.Helper()
	c, k, err := ca.IssueServer(hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pair{c, k}
}

func mustClient(t *testing.T, ca *CA) pair {
	t.Helper()
	c, k, err := ca.IssueClient("controller", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pair{c, k}
}

// expired issues a certificate whose validity ended an hour ago.
func expired(t *testing.T, ca *CA, usage x509.ExtKeyUsage, hosts ...string) pair {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "expired"},
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    hosts,
	}
	now := time.Now()
	c, k, err := ca.issue(tmpl, now.Add(-2*time.Hour), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return pair{c, k}
}

// handshake runs a TLS handshake over an in-memory connection and returns
// the server's and the client's errors.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	// A real loopback connection: net.Pipe is unbuffered, so an alert
	// that nobody reads would block the side that sends it.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		sc, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		srv := tls.Server(sc, serverCfg)
		err = srv.HandshakeContext(ctx)
		if err == nil {
			// TLS 1.3 clients learn that their certificate was refused
			// only on the first read, so exchange one byte.
			buf := make([]byte, 1)
			if _, err = srv.Read(buf); err == nil {
				_, err = srv.Write(buf)
			}
		}
		srv.Close()
		done <- err
	}()
	cc, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cli := tls.Client(cc, clientCfg)
	clientErr = cli.HandshakeContext(ctx)
	if clientErr == nil {
		if _, clientErr = cli.Write([]byte{1}); clientErr == nil {
			_, clientErr = cli.Read(make([]byte, 1))
		}
	}
	cli.Close()
	return <-done, clientErr
}

func TestHandshake(t *testing.T) {
	ca := mustCA(t, "landform-ca")
	other := mustCA(t, "other-ca")
	server := mustServer(t, ca, "127.0.0.1", "::1", "localhost", "runner.ns.svc")
	client := mustClient(t, ca)

	tests := []struct {
		name       string
		server     pair
		serverCA   *CA // CA the client trusts for the server
		client     *pair
		clientCA   *CA // CA the server trusts for clients
		serverName string
		wantErr    string // in the server's or the client's error
		// forceClientCert presents the client certificate even when the
		// server does not list its CA.
		forceClientCert bool
	}{
		{name: "valid over IPv4", server: server, serverCA: ca, client: &client, clientCA: ca, serverName: "127.0.0.1"},
		{name: "valid over IPv6", server: server, serverCA: ca, client: &client, clientCA: ca, serverName: "::1"},
		{name: "valid by DNS name", server: server, serverCA: ca, client: &client, clientCA: ca, serverName: "runner.ns.svc"},
		{name: "wrong server name", server: server, serverCA: ca, client: &client, clientCA: ca, serverName: "evil.example", wantErr: "certificate is valid for"},
		// Go's client withholds a certificate that the server's list of
		// acceptable CAs does not cover, so the server sees none.
		{name: "client cert from another CA", server: server, serverCA: ca, client: ptr.To(mustClient(t, other)), clientCA: ca, serverName: "localhost", wantErr: "certificate required"},
		{name: "client cert from another CA, presented anyway", server: server, serverCA: ca, client: ptr.To(mustClient(t, other)), clientCA: ca, serverName: "localhost", forceClientCert: true, wantErr: "unknown authority"},
		{name: "server cert from another CA", server: mustServer(t, other, "localhost"), serverCA: ca, client: &client, clientCA: ca, serverName: "localhost", wantErr: "unknown authority"},
		{name: "expired client cert", server: server, serverCA: ca, client: ptr.To(expired(t, ca, x509.ExtKeyUsageClientAuth)), clientCA: ca, serverName: "localhost", wantErr: "expired"},
		{name: "expired server cert", server: expired(t, ca, x509.ExtKeyUsageServerAuth, "localhost"), serverCA: ca, client: &client, clientCA: ca, serverName: "localhost", wantErr: "expired"},
		{name: "client without certificate", server: server, serverCA: ca, client: nil, clientCA: ca, serverName: "localhost", wantErr: "certificate required"},
		{name: "server cert used as client cert", server: server, serverCA: ca, client: &server, clientCA: ca, serverName: "localhost", wantErr: "incompatible key usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serverCfg, err := ServerTLSConfig(tt.server.cert, tt.server.key, tt.clientCA.CertPEM())
			if err != nil {
				t.Fatal(err)
			}
			var clientCfg *tls.Config
			if tt.client != nil {
				clientCfg, err = ClientTLSConfig(tt.client.cert, tt.client.key, tt.serverCA.CertPEM(), tt.serverName)
				if err != nil {
					t.Fatal(err)
				}
				if tt.forceClientCert {
					cert := clientCfg.Certificates[0]
					clientCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
				}
			} else {
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(tt.serverCA.CertPEM())
				clientCfg = &tls.Config{RootCAs: pool, ServerName: tt.serverName, MinVersion: tls.VersionTLS13}
			}
			serverErr, clientErr := handshake(t, serverCfg, clientCfg)
			if tt.wantErr != "" {
				if serverErr == nil || clientErr == nil {
					t.Fatalf("want both sides to fail, got server %v, client %v", serverErr, clientErr)
				}
				if both := serverErr.Error() + " | " + clientErr.Error(); !strings.Contains(both, tt.wantErr) {
					t.Fatalf("want an error containing %q, got %s", tt.wantErr, both)
				}
				return
			}
			if serverErr != nil || clientErr != nil {
				t.Fatalf("want success, got server %v, client %v", serverErr, clientErr)
			}
		})
	}
}

func TestTLSVersionFloor(t *testing.T) {
	ca := mustCA(t, "landform-ca")
	server := mustServer(t, ca, "localhost")
	client := mustClient(t, ca)
	serverCfg, err := ServerTLSConfig(server.cert, server.key, ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	clientCfg, err := ClientTLSConfig(client.cert, client.key, ca.CertPEM(), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	clientCfg.MinVersion = tls.VersionTLS12
	clientCfg.MaxVersion = tls.VersionTLS12
	if serverErr, clientErr := handshake(t, serverCfg, clientCfg); serverErr == nil || clientErr == nil {
		t.Fatalf("want TLS 1.2 refused, got server %v, client %v", serverErr, clientErr)
	}
}

func TestLoadCARoundTrip(t *testing.T) {
	ca := mustCA(t, "landform-ca")
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(ca.CertPEM(), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(loaded.CertPEM(), ca.CertPEM()) {
		t.Fatal("loaded CA certificate differs")
	}
	// A leaf issued by the loaded CA must verify against the original.
	server := mustServer(t, loaded, "localhost")
	client := mustClient(t, ca)
	serverCfg, _ := ServerTLSConfig(server.cert, server.key, ca.CertPEM())
	clientCfg, _ := ClientTLSConfig(client.cert, client.key, ca.CertPEM(), "localhost")
	if serverErr, clientErr := handshake(t, serverCfg, clientCfg); serverErr != nil || clientErr != nil {
		t.Fatalf("server %v, client %v", serverErr, clientErr)
	}
}

func TestLoadCARejects(t *testing.T) {
	ca := mustCA(t, "landform-ca")
	other := mustCA(t, "other-ca")
	otherKey, _ := other.KeyPEM()
	leaf := mustServer(t, ca, "localhost")
	tests := []struct {
		name      string
		cert, key []byte
	}{
		{name: "key of another CA", cert: ca.CertPEM(), key: otherKey},
		{name: "leaf certificate", cert: leaf.cert, key: leaf.key},
		{name: "garbage", cert: []byte("nope"), key: otherKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := LoadCA(tt.cert, tt.key); err == nil {
				t.Fatal("want error")
			}
		})
	}
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	ca := mustCA(t, "landform-ca")
	c, _, err := ca.IssueClient("controller", 24*time.Hour*365)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := parseCertPEM(c)
	if err != nil {
		t.Fatal(err)
	}
	if cert.NotAfter.After(ca.cert.NotAfter) {
		t.Fatalf("leaf expires %s, after its CA %s", cert.NotAfter, ca.cert.NotAfter)
	}
}
