package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a TLS server's test PKI: the CA that
// signed the server's and the client's certificates, and the client's
// certificate and key.
type TLSFiles struct {
	CA, ClientCert, ClientKey string
}

// StartTLS runs a redis-server that speaks only TLS, on a free loopback
// port, with a certificate for 127.0.0.1 from a CA made for the test;
// client certificates are accepted but not required. Its Client and Do
// trust that CA.
func StartTLS(t testing.TB, extra ...string) (*Server, TLSFiles) {
	t.Helper()
	dir := t.TempDir()
	caCert, caKey := newCert(t, "relock test CA", nil, nil, true)
	serverCert, serverKey := newCert(t, "127.0.0.1", caCert, caKey, false)
	clientCert, clientKey := newCert(t, "relock test client", caCert, caKey, false)
	files := TLSFiles{CA: filepath.Join(dir, "ca.pem"), ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem")}
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return path
	}
	write("ca.pem", "CERTIFICATE", caCert.Raw)
	write("client.pem", "CERTIFICATE", clientCert.Raw)
	write("client-key.pem", "EC PRIVATE KEY", ecKey(t, clientKey))
	tlsArgs := []string{
		"--tls-cert-file", write("server.pem", "CERTIFICATE", serverCert.Raw),
		"--tls-key-file", write("server-key.pem", "EC PRIVATE KEY", ecKey(t, serverKey)),
		"--tls-ca-cert-file", files.CA,
		"--tls-auth-clients", "optional",
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	s := &Server{t: t, path: Binary(t), Dir: t.TempDir(), tls: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
	return start(t, s, tlsArgs, extra), files
}

// newCert makes a certificate for name, signed by parent (self-signed
// when parent is nil).
func newCert(t testing.TB, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, ca bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	}
	signer, signerKey := parent, parentKey
	if parent == nil {
		signer, signerKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return cert, key
}

func ecKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return der
}
