// Package certs keeps the runner CA in a Secret and gives every runner
// namespace a certificate Secret of its own, for runner Pods.
//
// Who holds what:
//
//   - The controller's namespace, Secret landform-runner-ca
//     (kubernetes.io/tls): the CA certificate and private key (tls.crt,
//     tls.key) and, after a rotation, the previous CA certificate
//     (ca-previous.crt, no key) until it expires. Only the controller reads
//     it; the key never leaves this namespace.
//   - Every runner namespace, Secret landform-runner-tls
//     (kubernetes.io/tls): a server certificate for the name
//     landform-runner.<namespace>.svc (server authentication only) and its key
//     (tls.crt, tls.key), and the CA certificates that runners trust for
//     client certificates (ca.crt). Runner Pods mount it read-only.
//   - The controller's memory only: its client certificate (common name
//     landform-controller, client authentication only) and key, one per
//     valid CA.
//
// The controller dials a runner Pod by IP and verifies its certificate
// against the name landform-runner.<namespace>.svc of the Terraform
// object's namespace; a runner accepts only client certificates issued by
// the CA for client authentication with the common name
// landform-controller. So whoever reads one namespace's Secret can neither
// talk to runners (a server certificate is refused as a client certificate)
// nor pose as a runner of another namespace (the name does not match) nor
// as the controller (there is no client certificate or CA key to make one).
// Within its own namespace it can only pose as a runner, which presumes
// reading that namespace's Secrets, where its state and variables are
// anyway.
//
// Rotation: the CA is replaced when less than a third of its validity
// remains. The new CA is written with the old certificate kept in
// ca-previous.crt; until the old CA expires the controller trusts runners
// of either CA and presents a client certificate from each (TLS picks the
// one the runner accepts, by the CA names it sends; every CA has a unique
// name for this). A namespace Secret is reissued on its next use when it is
// missing (a namespace deleted and created again), was not issued by the
// current CA, has less than a third of its validity left, or does not
// carry the current trust bundle.
package certs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/landform-dev/landform/api/v1alpha1"
	"github.com/landform-dev/landform/internal/mtls"
)

const (
	// CASecretName is the CA Secret in the controller's namespace.
	CASecretName = "landform-runner-ca"
	// RunnerSecretName is the certificate Secret in each runner namespace.
	RunnerSecretName = "landform-runner-tls"
	// PreviousCAKey holds the previous CA certificate in the CA Secret.
	PreviousCAKey = "ca-previous.crt"
	// CABundleKey holds, in a runner Secret, the CA certificates that runners
	// trust for client certificates.
	CABundleKey = "ca.crt"
	// ControllerName is the common name of the controller's client
	// certificate, which runners require.
	ControllerName = "landform-controller"

	// DefaultCAValidity is the CA's validity.
	DefaultCAValidity = 365 * 24 * time.Hour
	// DefaultLeafValidity is the validity of runner and controller
	// certificates; they are renewed when a third of it remains.
	DefaultLeafValidity = 30 * 24 * time.Hour

	// componentLabel tells Landform's Secrets apart.
	componentLabel = "app.kubernetes.io/component"
	// conflictRetries bounds the retries after a concurrent write (another
	// worker or replica writing the same Secret).
	conflictRetries = 5
)

// ErrNotOwned means that a Secret with one of Landform's names exists and
// was not written by Landform: it is never overwritten.
var ErrNotOwned = errors.New("exists and is not managed by Landform")

// Options configure a Manager.
type Options struct {
	// Namespace is the controller's namespace, which holds the CA Secret.
	Namespace string
	// CAValidity is a new CA's validity. Default DefaultCAValidity.
	CAValidity time.Duration
	// LeafValidity is the validity of runner and controller certificates.
	// Default DefaultLeafValidity.
	LeafValidity time.Duration
	// Now is the clock that decides rotations and renewals. Default
	// time.Now. Certificates are always issued from the current time.
	Now func() time.Time
}

// Manager loads, creates and rotates the runner CA and issues the runner
// namespaces' Secrets and the controller's client certificates. It is safe
// for concurrent use, and for several controller replicas sharing the CA
// Secret: every write is conditional on what was read.
type Manager struct {
	client client.Client
	opts   Options

	mu          sync.Mutex
	state       *caState
	clientCerts []clientCert
}

// caState is the parsed CA Secret.
type caState struct {
	resourceVersion string
	ca              *mtls.CA
	cert            *x509.Certificate
	// previous is the CA before the last rotation, nil once expired.
	previous *x509.Certificate
	// bundle is the PEM of cert and previous: what runners and the
	// controller trust.
	bundle []byte
}

// clientCert is one of the controller's client certificates; it lives in
// memory only.
type clientCert struct {
	cert    tls.Certificate
	leaf    *x509.Certificate
	renewAt time.Time
}

// Namespace is what the controller needs to start and reach runners in one
// namespace.
type Namespace struct {
	// SecretName is the Secret that runner Pods mount.
	SecretName string
	// ServerName is the name runners' certificates are verified against.
	ServerName string
	// ClientTLS is the controller's TLS configuration for dialing runners
	// in the namespace.
	ClientTLS *tls.Config
}

// New loads the CA from its Secret, or creates it, and returns a Manager.
func New(ctx context.Context, c client.Client, opts Options) (*Manager, error) {
	if opts.Namespace == "" {
		return nil, errors.New("runner CA: the controller's namespace is required")
	}
	if opts.CAValidity <= 0 {
		opts.CAValidity = DefaultCAValidity
	}
	if opts.LeafValidity <= 0 {
		opts.LeafValidity = DefaultLeafValidity
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Manager{client: c, opts: opts}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.loadCA(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// ServerName is the name runner certificates in namespace are issued for.
func ServerName(namespace string) string {
	return "landform-runner." + namespace + ".svc"
}

// ForNamespace makes sure that namespace's runner Secret exists and is
// valid, rotating the CA first when it is due, and returns how to reach
// runners there.
func (m *Manager) ForNamespace(ctx context.Context, namespace string) (*Namespace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.loadCA(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.ensureRunnerSecret(ctx, st, namespace); err != nil {
		return nil, err
	}
	cfg, err := m.clientTLS(st, ServerName(namespace))
	if err != nil {
		return nil, err
	}
	return &Namespace{SecretName: RunnerSecretName, ServerName: ServerName(namespace), ClientTLS: cfg}, nil
}

// CACertPEM returns the current CA certificate.
func (m *Manager) CACertPEM() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.ca.CertPEM()
}

// loadCA reads the CA Secret (it is small, and reading it on every use
// keeps replicas and manual changes in step), creates it when missing,
// rotates the CA when due and forgets an expired previous CA. The caller
// holds mu.
func (m *Manager) loadCA(ctx context.Context) (*caState, error) {
	key := client.ObjectKey{Namespace: m.opts.Namespace, Name: CASecretName}
	for range conflictRetries {
		var s corev1.Secret
		err := m.client.Get(ctx, key, &s)
		if apierrors.IsNotFound(err) {
			st, err := m.createCA(ctx)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return st, err
		}
		if err != nil {
			return nil, fmt.Errorf("reading the runner CA Secret %s: %w", key, err)
		}
		if !managed(&s) {
			return nil, fmt.Errorf("the runner CA Secret %s %w: delete it and Landform creates a new CA", key, ErrNotOwned)
		}
		st := m.state
		if st == nil || st.resourceVersion != s.ResourceVersion {
			if st, err = parseCA(&s); err != nil {
				return nil, fmt.Errorf("the runner CA Secret %s is invalid: %w; delete it and Landform creates a new CA", key, err)
			}
		}
		now := m.opts.Now()
		switch {
		case dueForRenewal(st.cert, now):
			err = m.rotateCA(ctx, &s, st)
		case st.previous != nil && !now.Before(st.previous.NotAfter):
			err = m.dropPrevious(ctx, &s)
		default:
			m.state = st
			return st, nil
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("updating the runner CA Secret %s: too many concurrent changes", key)
}

func (m *Manager) createCA(ctx context.Context) (*caState, error) {
	ca, err := newCA(m.opts.CAValidity)
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.opts.Namespace, Name: CASecretName, Labels: labels("runner-ca")}, Type: corev1.SecretTypeTLS}
	if s.Data, err = caData(ca, nil); err != nil {
		return nil, err
	}
	if err := m.client.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		return nil, fmt.Errorf("creating the runner CA Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	st, err := parseCA(s)
	if err != nil {
		return nil, err
	}
	m.state = st
	return st, nil
}

// rotateCA replaces the CA, keeping the current certificate as the
// previous one. The update is conditional on s's resourceVersion.
func (m *Manager) rotateCA(ctx context.Context, s *corev1.Secret, old *caState) error {
	ca, err := newCA(m.opts.CAValidity)
	if err != nil {
		return err
	}
	if s.Data, err = caData(ca, old.cert); err != nil {
		return err
	}
	if err := m.client.Update(ctx, s); err != nil {
		return fmt.Errorf("rotating the runner CA in Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

func (m *Manager) dropPrevious(ctx context.Context, s *corev1.Secret) error {
	delete(s.Data, PreviousCAKey)
	if err := m.client.Update(ctx, s); err != nil {
		return fmt.Errorf("removing the expired previous CA from Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// newCA creates a CA with a unique name, so that TLS tells a rotated CA
// from its predecessor by name when choosing a client certificate.
func newCA(validity time.Duration) (*mtls.CA, error) {
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	ca, err := mtls.NewCA("landform-runner-ca-"+hex.EncodeToString(id), validity)
	if err != nil {
		return nil, fmt.Errorf("creating the runner CA: %w", err)
	}
	return ca, nil
}

func caData(ca *mtls.CA, previous *x509.Certificate) (map[string][]byte, error) {
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{corev1.TLSCertKey: ca.CertPEM(), corev1.TLSPrivateKeyKey: keyPEM}
	if previous != nil {
		data[PreviousCAKey] = encodeCert(previous)
	}
	return data, nil
}

func parseCA(s *corev1.Secret) (*caState, error) {
	ca, err := mtls.LoadCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, err
	}
	cert, err := parseCert(s.Data[corev1.TLSCertKey])
	if err != nil {
		return nil, err
	}
	st := &caState{resourceVersion: s.ResourceVersion, ca: ca, cert: cert, bundle: ca.CertPEM()}
	if p := s.Data[PreviousCAKey]; len(p) > 0 {
		if st.previous, err = parseCert(p); err != nil {
			return nil, fmt.Errorf("%s: %w", PreviousCAKey, err)
		}
		st.bundle = append(st.bundle, encodeCert(st.previous)...)
	}
	return st, nil
}

// ensureRunnerSecret creates or reissues namespace's runner Secret unless
// it is valid. The caller holds mu.
func (m *Manager) ensureRunnerSecret(ctx context.Context, st *caState, namespace string) error {
	key := client.ObjectKey{Namespace: namespace, Name: RunnerSecretName}
	for range conflictRetries {
		var s corev1.Secret
		err := m.client.Get(ctx, key, &s)
		switch {
		case apierrors.IsNotFound(err):
			s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: RunnerSecretName, Labels: labels("runner-tls")}, Type: corev1.SecretTypeTLS}
		case err != nil:
			return fmt.Errorf("reading the runner certificate Secret %s: %w", key, err)
		case !managed(&s):
			return fmt.Errorf("the Secret %s %w: delete it so that Landform can write the runner certificate there", key, ErrNotOwned)
		case m.runnerSecretValid(st, namespace, s.Data):
			return nil
		}
		certPEM, keyPEM, err := st.ca.IssueServer([]string{ServerName(namespace)}, m.opts.LeafValidity)
		if err != nil {
			return fmt.Errorf("issuing the runner certificate for %s: %w", namespace, err)
		}
		s.Data = map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, CABundleKey: st.bundle}
		if s.ResourceVersion == "" {
			err = m.client.Create(ctx, &s)
		} else {
			err = m.client.Update(ctx, &s)
		}
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("writing the runner certificate Secret %s: %w", key, err)
		}
		return nil
	}
	return fmt.Errorf("writing the runner certificate Secret %s: too many concurrent changes", key)
}

// runnerSecretValid says whether data holds a key pair issued by the current
// CA for namespace, far enough from expiry, and the current trust bundle.
func (m *Manager) runnerSecretValid(st *caState, namespace string, data map[string][]byte) bool {
	if !bytes.Equal(data[CABundleKey], st.bundle) {
		return false
	}
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(st.cert)
	now := m.opts.Now()
	if _, err := leaf.Verify(x509.VerifyOptions{
		DNSName:     ServerName(namespace),
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return false
	}
	return !dueForRenewal(leaf, now)
}

// clientTLS returns the controller's client configuration for serverName:
// a certificate from the current CA, issued or renewed when needed, and,
// until the previous CA expires, the one this process had from it, for
// runners whose Secret was issued before the rotation. The caller holds mu.
func (m *Manager) clientTLS(st *caState, serverName string) (*tls.Config, error) {
	now := m.opts.Now()
	var current, previous *clientCert
	for i := range m.clientCerts {
		c := &m.clientCerts[i]
		switch {
		case issuedBy(c.leaf, st.cert) && now.Before(c.renewAt):
			current = c
		case st.previous != nil && issuedBy(c.leaf, st.previous) && now.Before(c.leaf.NotAfter):
			previous = c
		}
	}
	if current == nil {
		c, err := m.issueClientCert(st)
		if err != nil {
			return nil, err
		}
		current = &c
	}
	kept := []clientCert{*current}
	if previous != nil {
		kept = append(kept, *previous)
	}
	m.clientCerts = kept

	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    x509.NewCertPool(),
		ServerName: serverName,
	}
	cfg.RootCAs.AppendCertsFromPEM(st.bundle)
	for _, c := range kept {
		cfg.Certificates = append(cfg.Certificates, c.cert)
	}
	return cfg, nil
}

func (m *Manager) issueClientCert(st *caState) (clientCert, error) {
	certPEM, keyPEM, err := st.ca.IssueClient(ControllerName, m.opts.LeafValidity)
	if err != nil {
		return clientCert{}, fmt.Errorf("issuing the controller's client certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return clientCert{}, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return clientCert{}, err
	}
	pair.Leaf = leaf
	return clientCert{cert: pair, leaf: leaf, renewAt: renewalTime(leaf)}, nil
}

func issuedBy(cert, ca *x509.Certificate) bool {
	return bytes.Equal(cert.RawIssuer, ca.RawSubject) && cert.CheckSignatureFrom(ca) == nil
}

// dueForRenewal says whether less than a third of cert's validity remains.
func dueForRenewal(cert *x509.Certificate, now time.Time) bool {
	return !now.Before(renewalTime(cert))
}

func renewalTime(cert *x509.Certificate) time.Time {
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(lifetime - lifetime/3)
}

func managed(s *corev1.Secret) bool {
	return s.Labels[infrav1.ManagedByLabel] == infrav1.ManagedByValue
}

func labels(component string) map[string]string {
	return map[string]string{infrav1.ManagedByLabel: infrav1.ManagedByValue, componentLabel: component}
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate found")
	}
	return x509.ParseCertificate(block.Bytes)
}

func encodeCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}
