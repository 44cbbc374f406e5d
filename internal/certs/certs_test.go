package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/mtls"
	"github.com/landform-dev/landform/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

// clock is an adjustable clock for rotation tests.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Store(int64(d)) }

func newManager(t *testing.T, namespace string, now func() time.Time) *Manager {
	t.Helper()
	m, err := New(context.Background(), env.Client, Options{Namespace: namespace, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCAPersistedAcrossManagers(t *testing.T) {
	ns := env.Namespace(t)
	first := newManager(t, ns, nil)
	s := env.Secret(t, ns, CASecretName)
	if s.Type != corev1.SecretTypeTLS || s.Labels[infrav1.ManagedByLabel] != infrav1.ManagedByValue {
		t.Fatalf("CA Secret type %q labels %v", s.Type, s.Labels)
	}
	ca := mustCert(t, s.Data[corev1.TLSCertKey])
	if !ca.IsCA || !strings.HasPrefix(ca.Subject.CommonName, "landform-runner-ca-") {
		t.Fatalf("CA certificate %v, IsCA %t", ca.Subject, ca.IsCA)
	}
	if d := ca.NotAfter.Sub(ca.NotBefore); d < DefaultCAValidity || d > DefaultCAValidity+time.Hour {
		t.Fatalf("CA validity %s, want about %s", d, DefaultCAValidity)
	}
	second := newManager(t, ns, nil)
	if !bytes.Equal(first.CACertPEM(), second.CACertPEM()) || !bytes.Equal(second.CACertPEM(), s.Data[corev1.TLSCertKey]) {
		t.Fatal("a second manager did not load the persisted CA")
	}
	if after := env.Secret(t, ns, CASecretName); after.ResourceVersion != s.ResourceVersion {
		t.Fatal("loading the CA rewrote its Secret")
	}
}

func TestRunnerSecretHoldsNoCAKey(t *testing.T) {
	ctx := context.Background()
	controllerNS, runnerNS := env.Namespace(t), env.Namespace(t)
	m := newManager(t, controllerNS, nil)
	got, err := m.ForNamespace(ctx, runnerNS)
	if err != nil {
		t.Fatal(err)
	}
	if got.SecretName != RunnerSecretName || got.ServerName != "landform-runner."+runnerNS+".svc" || got.ClientTLS.ServerName != got.ServerName {
		t.Fatalf("namespace %+v", got)
	}
	caSecret := env.Secret(t, controllerNS, CASecretName)
	caKey := caSecret.Data[corev1.TLSPrivateKeyKey]
	caCert := mustCert(t, caSecret.Data[corev1.TLSCertKey])

	s := env.Secret(t, runnerNS, RunnerSecretName)
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"ca.crt", "tls.crt", "tls.key"}; !slices.Equal(keys, want) {
		t.Fatalf("runner Secret keys %v, want %v", keys, want)
	}
	// Every private key in the Secret, whatever its key, must be another
	// key than the CA's.
	for k, v := range s.Data {
		if bytes.Contains(v, caKey) {
			t.Fatalf("runner Secret key %s holds the CA key", k)
		}
		for rest := v; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if !strings.Contains(block.Type, "PRIVATE KEY") {
				continue
			}
			key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if ec, ok := key.(*ecdsa.PrivateKey); ok && ec.PublicKey.Equal(caCert.PublicKey) {
				t.Fatalf("runner Secret key %s holds the CA's private key", k)
			}
		}
	}
	leaf := mustCert(t, s.Data[corev1.TLSCertKey])
	if leaf.IsCA || !slices.Equal(leaf.DNSNames, []string{ServerName(runnerNS)}) || len(leaf.IPAddresses) != 0 {
		t.Fatalf("leaf IsCA %t DNS %v IPs %v", leaf.IsCA, leaf.DNSNames, leaf.IPAddresses)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Fatalf("leaf usages %v: want server authentication only", leaf.ExtKeyUsage)
	}
	if err := leaf.CheckSignatureFrom(caCert); err != nil {
		t.Fatalf("leaf not issued by the CA: %v", err)
	}
	if !bytes.Equal(s.Data[CABundleKey], caSecret.Data[corev1.TLSCertKey]) {
		t.Fatal("ca.crt is not the CA certificate")
	}
	// A valid Secret is left alone.
	if _, err := m.ForNamespace(ctx, runnerNS); err != nil {
		t.Fatal(err)
	}
	if again := env.Secret(t, runnerNS, RunnerSecretName); again.ResourceVersion != s.ResourceVersion {
		t.Fatal("a valid runner Secret was rewritten")
	}
}

// TestRunnerSecretRecreated: envtest runs no namespace controller, so a
// namespace deleted and created again is simulated by deleting the Secret.
func TestRunnerSecretRecreated(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, env.Namespace(t), nil)
	ns := env.Namespace(t)
	if _, err := m.ForNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	old := env.Secret(t, ns, RunnerSecretName)
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ForNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	s := env.Secret(t, ns, RunnerSecretName)
	if s.UID == old.UID || bytes.Equal(s.Data[corev1.TLSCertKey], old.Data[corev1.TLSCertKey]) {
		t.Fatal("the runner Secret was not created again")
	}
}

func TestRunnerSecretRepaired(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, env.Namespace(t), nil)
	other, err := mtls.NewCA("intruder", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := other.IssueServer([]string{"x"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	donor := env.Namespace(t)
	if _, err := m.ForNamespace(ctx, donor); err != nil {
		t.Fatal(err)
	}
	donorSecret := env.Secret(t, donor, RunnerSecretName)
	tests := map[string]func(s *corev1.Secret){
		"another namespace's key pair": func(s *corev1.Secret) {
			s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = donorSecret.Data[corev1.TLSCertKey], donorSecret.Data[corev1.TLSPrivateKeyKey]
		},
		// Someone adds their own CA, to call runners with their own client
		// certificate.
		"foreign trust bundle": func(s *corev1.Secret) { s.Data[CABundleKey] = append(s.Data[CABundleKey], other.CertPEM()...) },
		"foreign key pair": func(s *corev1.Secret) {
			s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = otherCert, otherKey
		},
		"mismatched key": func(s *corev1.Secret) { s.Data[corev1.TLSPrivateKeyKey] = otherKey },
	}
	for name, tamper := range tests {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t)
			if _, err := m.ForNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			s := env.Secret(t, ns, RunnerSecretName)
			good := bytes.Clone(s.Data[corev1.TLSCertKey])
			tamper(s)
			if err := env.Client.Update(ctx, s); err != nil {
				t.Fatal(err)
			}
			if _, err := m.ForNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			s = env.Secret(t, ns, RunnerSecretName)
			if !bytes.Equal(s.Data[CABundleKey], m.CACertPEM()) || bytes.Equal(s.Data[corev1.TLSCertKey], good) {
				t.Fatal("the tampered Secret was not reissued")
			}
			if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
				t.Fatal(err)
			}
			leaf := mustCert(t, s.Data[corev1.TLSCertKey])
			if err := leaf.CheckSignatureFrom(mustCert(t, m.CACertPEM())); err != nil || !slices.Equal(leaf.DNSNames, []string{ServerName(ns)}) {
				t.Fatalf("reissued certificate for %v, signature: %v", leaf.DNSNames, err)
			}
		})
	}
}

func TestForeignSecretsNotOverwritten(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	for _, name := range []string{CASecretName, RunnerSecretName} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"mine": "yes"}}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(ctx, env.Client, Options{Namespace: ns}); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("CA Secret: want ErrNotOwned, got %v", err)
	}
	m := newManager(t, env.Namespace(t), nil)
	if _, err := m.ForNamespace(ctx, ns); !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("runner Secret: want ErrNotOwned saying what to do, got %v", err)
	}
	if s := env.Secret(t, ns, RunnerSecretName); string(s.Data["mine"]) != "yes" || len(s.Data) != 1 {
		t.Fatalf("foreign Secret changed: %v", s.Data)
	}
}

// TestLeakedSecretStaysInItsNamespace: a namespace's Secret can neither
// pose as a runner of another namespace to the controller nor call the
// controller's runners as a client.
func TestLeakedSecretStaysInItsNamespace(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, env.Namespace(t), nil)
	a, b := env.Namespace(t), env.Namespace(t)
	aTLS, err := m.ForNamespace(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	bTLS, err := m.ForNamespace(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	leakedA := env.Secret(t, a, RunnerSecretName)
	runnerA := serverConfig(t, leakedA)
	if err := handshake(t, runnerA, aTLS.ClientTLS); err != nil {
		t.Fatalf("the controller cannot reach a runner of its namespace: %v", err)
	}
	if err := handshake(t, runnerA, bTLS.ClientTLS); err == nil || !strings.Contains(err.Error(), "landform-runner."+a+".svc") {
		t.Fatalf("namespace %s's certificate passed as a runner of %s: %v", a, b, err)
	}
	// Namespace A's key pair as a client certificate, to a runner of B.
	runnerB := serverConfig(t, env.Secret(t, b, RunnerSecretName))
	pair, err := tls.X509KeyPair(leakedA.Data[corev1.TLSCertKey], leakedA.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	intruder := bTLS.ClientTLS.Clone()
	intruder.Certificates = nil
	intruder.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	if err := handshake(t, runnerB, intruder); err == nil || !strings.Contains(err.Error(), "incompatible key usage") {
		t.Fatalf("namespace %s's certificate was accepted as a client certificate: %v", a, err)
	}
}

func TestRotation(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	// A CA with two hours of validity: due for rotation after about 80
	// minutes, expired after two hours.
	old, err := mtls.NewCA("landform-runner-ca-old", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, _ := old.KeyPEM()
	if err := env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CASecretName, Labels: labels("runner-ca")},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: old.CertPEM(), corev1.TLSPrivateKeyKey: oldKey},
	}); err != nil {
		t.Fatal(err)
	}
	var clk clock
	m := newManager(t, ns, clk.now)
	if !bytes.Equal(m.CACertPEM(), old.CertPEM()) {
		t.Fatal("a CA with most of its validity left was rotated")
	}
	before, after := env.Namespace(t), env.Namespace(t)
	if _, err := m.ForNamespace(ctx, before); err != nil {
		t.Fatal(err)
	}
	// A runner started before the rotation keeps the Secret it mounted.
	runnerBefore := serverConfig(t, env.Secret(t, before, RunnerSecretName))

	clk.advance(90 * time.Minute)
	afterTLS, err := m.ForNamespace(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	caSecret := env.Secret(t, ns, CASecretName)
	if bytes.Equal(caSecret.Data[corev1.TLSCertKey], old.CertPEM()) {
		t.Fatal("the CA was not rotated")
	}
	if !bytes.Equal(caSecret.Data[PreviousCAKey], old.CertPEM()) {
		t.Fatal("the previous CA is not kept")
	}
	current := mustCert(t, caSecret.Data[corev1.TLSCertKey])
	if leaf := mustCert(t, env.Secret(t, after, RunnerSecretName).Data[corev1.TLSCertKey]); leaf.CheckSignatureFrom(current) != nil {
		t.Fatal("a new runner Secret is not issued by the new CA")
	}
	if got := env.Secret(t, after, RunnerSecretName).Data[CABundleKey]; !bytes.Equal(got, append(bytes.Clone(caSecret.Data[corev1.TLSCertKey]), old.CertPEM()...)) {
		t.Fatal("the trust bundle is not the new and the previous CA")
	}
	if len(afterTLS.ClientTLS.Certificates) != 2 {
		t.Fatalf("%d client certificates, want one per CA", len(afterTLS.ClientTLS.Certificates))
	}
	if err := handshake(t, serverConfig(t, env.Secret(t, after, RunnerSecretName)), afterTLS.ClientTLS); err != nil {
		t.Fatalf("new runner: %v", err)
	}
	beforeTLS, err := m.ForNamespace(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, runnerBefore, beforeTLS.ClientTLS); err != nil {
		t.Fatalf("a runner started before the rotation is no longer reachable: %v", err)
	}
	if leaf := mustCert(t, env.Secret(t, before, RunnerSecretName).Data[corev1.TLSCertKey]); leaf.CheckSignatureFrom(current) != nil {
		t.Fatal("a runner Secret of the old CA was not reissued on its next use")
	}
	if again := newManager(t, ns, clk.now); !bytes.Equal(again.CACertPEM(), caSecret.Data[corev1.TLSCertKey]) {
		t.Fatal("a new manager did not load the rotated CA")
	}

	// Once the old CA expired, it is forgotten.
	clk.advance(3 * time.Hour)
	afterTLS, err = m.ForNamespace(ctx, after)
	if err != nil {
		t.Fatal(err)
	}
	caSecret = env.Secret(t, ns, CASecretName)
	if _, ok := caSecret.Data[PreviousCAKey]; ok {
		t.Fatal("the expired previous CA is still kept")
	}
	if !bytes.Equal(mustCert(t, caSecret.Data[corev1.TLSCertKey]).Raw, current.Raw) {
		t.Fatal("the new CA was rotated again")
	}
	if got := env.Secret(t, after, RunnerSecretName).Data[CABundleKey]; !bytes.Equal(got, caSecret.Data[corev1.TLSCertKey]) {
		t.Fatal("the trust bundle still holds the expired CA")
	}
	if len(afterTLS.ClientTLS.Certificates) != 1 {
		t.Fatalf("%d client certificates after the previous CA expired, want 1", len(afterTLS.ClientTLS.Certificates))
	}
}

// serverConfig is a runner's TLS configuration from its Secret, as
// cmd/runner builds it.
func serverConfig(t *testing.T, s *corev1.Secret) *tls.Config {
	t.Helper()
	cfg, err := mtls.ServerTLSConfig(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], s.Data[CABundleKey])
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// handshake connects client to a server over loopback and exchanges a
// byte, so that a refused client certificate shows (TLS 1.3 reports it
// after the handshake). It returns either side's error.
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	serverErr := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 1)
		if _, err = c.Read(buf); err == nil {
			_, err = c.Write(buf)
		}
		serverErr <- err
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", lis.Addr().String(), client)
	if err == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err = conn.Write([]byte{1}); err == nil {
			_, err = conn.Read(make([]byte, 1))
		}
		conn.Close()
	}
	if sErr := <-serverErr; err == nil && sErr != nil {
		err = sErr
	} else if err != nil && sErr != nil {
		err = errors.Join(err, sErr)
	}
	return err
}
