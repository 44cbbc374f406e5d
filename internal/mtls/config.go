package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ServerTLSConfig returns a server configuration that presents certPEM and
// accepts only clients with a certificate signed by clientCAPEM.
func ServerTLSConfig(certPEM, keyPEM, clientCAPEM []byte) (*tls.Config, error) {
	cert, pool, err := keyPairAndCA(certPEM, keyPEM, clientCAPEM, "server", "client")
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}, nil
}

// ClientTLSConfig returns a client configuration that presents certPEM and
// trusts only servers with a certificate for serverName signed by serverCAPEM.
func ClientTLSConfig(certPEM, keyPEM, serverCAPEM []byte, serverName string) (*tls.Config, error) {
	cert, pool, err := keyPairAndCA(certPEM, keyPEM, serverCAPEM, "client", "server")
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   serverName,
	}, nil
}

// keyPairAndCA loads the key pair one side (self) presents and the CA it
// trusts for the other (peer).
func keyPairAndCA(certPEM, keyPEM, caPEM []byte, self, peer string) (tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load %s key pair: %w", self, err)
	}
	pool, err := certPool(caPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("load %s CA: %w", peer, err)
	}
	return cert, pool, nil
}

func certPool(caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}
