package fl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// PKI is a set of PEM files for fitledger-server's grpc.tls (and a client's flags): a CA, a
// serving certificate it signed, a client certificate it signed (for clientCAFile), and a client
// certificate signed by another CA, which a server trusting only CAFile must refuse.
type PKI struct {
	CAFile                        string
	ServerCertFile, ServerKeyFile string
	ClientCertFile, ClientKeyFile string
	RogueCertFile, RogueKeyFile   string // a client certificate of another CA
	ServerDNSNames                []string
}

// WritePKI writes a PKI into dir. The serving certificate is for 127.0.0.1 and serverDNSNames.
// ECDSA P-256 keys in PKCS #8, certificates valid from an hour ago for a day.
func WritePKI(t testing.TB, dir string, serverDNSNames ...string) *PKI {
	t.Helper()
	p := &PKI{ServerDNSNames: serverDNSNames}
	file := func(name string) string { return filepath.Join(dir, name) }
	ca, caKey := newCA(t, "fitledger-grpcurl-test-ca")
	writePEMFile(t, file("ca.crt"), "CERTIFICATE", ca.Raw)
	p.CAFile = file("ca.crt")

	p.ServerCertFile, p.ServerKeyFile = file("server.crt"), file("server.key")
	issue(t, ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "fitledger-server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    serverDNSNames,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, p.ServerCertFile, p.ServerKeyFile)

	p.ClientCertFile, p.ClientKeyFile = file("client.crt"), file("client.key")
	issue(t, ca, caKey, &x509.Certificate{Subject: pkix.Name{CommonName: "grpcurl"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, p.ClientCertFile, p.ClientKeyFile)

	rogue, rogueKey := newCA(t, "another-ca")
	p.RogueCertFile, p.RogueKeyFile = file("rogue-client.crt"), file("rogue-client.key")
	issue(t, rogue, rogueKey, &x509.Certificate{Subject: pkix.Name{CommonName: "grpcurl"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, p.RogueCertFile, p.RogueKeyFile)
	return p
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:     true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue signs tmpl (a leaf) with the CA and writes the certificate and its new key.
func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEMFile(t, certFile, "CERTIFICATE", der)
	writePEMFile(t, keyFile, "PRIVATE KEY", pkcs8)
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEMFile(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
