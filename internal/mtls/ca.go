// Package mtls issues the certificates that the controller and its runners
// use to authenticate each other, and builds their TLS configurations.
//
// The CA's private key stays with the controller; a runner only ever gets a
// leaf certificate, its key and the CA certificate to verify its peer.
package mtls

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// clockSkew backdates every certificate so that a peer whose clock is a
// little behind does not reject a certificate issued a moment ago.
const clockSkew = 5 * time.Minute

// CA is a self-signed certificate authority with an ECDSA P-256 key.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
}

// NewCA creates a self-signed CA valid for validity from now.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("invalid CA validity %s", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// The CA signs leaves only, never intermediate CAs.
		MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{cert: cert, certPEM: encodeCert(der), key: key}, nil
}

// LoadCA loads a CA from its PEM certificate and PEM private key (PKCS#8 or
// SEC 1), as written by CertPEM and KeyPEM.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("load CA: certificate is not a CA")
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA key: %w", err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("load CA: key does not match certificate")
	}
	return &CA{cert: cert, certPEM: encodeCert(cert.Raw), key: key}, nil
}

// CertPEM returns the CA certificate, PEM encoded.
func (ca *CA) CertPEM() []byte {
	return bytes.Clone(ca.certPEM)
}

// KeyPEM returns the CA private key, PEM encoded (PKCS#8).
func (ca *CA) KeyPEM() ([]byte, error) {
	return encodeKey(ca.key)
}

// IssueServer issues a server certificate for hosts, each an IP address
// (IPv4 or IPv6, brackets allowed) or a DNS name.
func (ca *CA) IssueServer(hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("issue server certificate: no hosts")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	now := time.Now()
	return ca.issue(tmpl, now.Add(-clockSkew), now.Add(validity))
}

// IssueClient issues a client certificate with common name cn.
func (ca *CA) IssueClient(cn string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	now := time.Now()
	return ca.issue(tmpl, now.Add(-clockSkew), now.Add(validity))
}

// issue signs tmpl with a fresh key. A leaf never outlives its CA, so that a
// rotated CA cannot leave valid-looking leaves behind.
func (ca *CA) issue(tmpl *x509.Certificate, notBefore, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	if !notAfter.After(notBefore) {
		return nil, nil, fmt.Errorf("issue certificate: not after %s is not after not before %s", notAfter, notBefore)
	}
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = notBefore
	tmpl.NotAfter = notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func parseCertPEM(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate found")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKeyPEM(keyPEM []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key found")
	}
	switch block.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		ec, ok := key.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return ec, nil
	default:
		return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
	}
}
