package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files names a node's TLS material. CertFile and KeyFile go together;
// CAFile, when set, is the cluster CA peers must present certificates from.
type Files struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// Enabled reports whether the node serves TLS.
func (f Files) Enabled() bool { return f.CertFile != "" }

// Validate checks that the files exist and parse, with a clear error.
func (f Files) Validate() error {
	if (f.CertFile == "") != (f.KeyFile == "") {
		return errors.New("tls: --tls-cert and --tls-key go together")
	}
	if f.CAFile != "" && f.CertFile == "" {
		return errors.New("tls: --tls-ca needs --tls-cert and --tls-key (the node's own certificate)")
	}
	if f.CertFile == "" {
		return nil
	}
	if _, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile); err != nil {
		return fmt.Errorf("tls: load %s / %s: %w", f.CertFile, f.KeyFile, err)
	}
	if f.CAFile != "" {
		if _, err := f.pool(); err != nil {
			return err
		}
	}
	return nil
}

func (f Files) pool() (*x509.CertPool, error) {
	b, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA %s: %w", f.CAFile, err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: %s holds no PEM certificate", f.CAFile)
	}
	return p, nil
}

// Server returns the configuration of a client-facing listener (S3, admin
// API): the node's certificate, no client certificates asked.
func (f Files) Server() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load %s: %w", f.CertFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// PeerServer returns the configuration of a node-to-node listener: it
// requires a client certificate signed by the cluster CA.
func (f Files) PeerServer() (*tls.Config, error) {
	c, err := f.Server()
	if err != nil {
		return nil, err
	}
	if f.CAFile == "" {
		return nil, errors.New("tls: node-to-node TLS needs the cluster CA (--tls-ca)")
	}
	if c.ClientCAs, err = f.pool(); err != nil {
		return nil, err
	}
	c.ClientAuth = tls.RequireAndVerifyClientCert
	return c, nil
}

// PeerClient returns the configuration for dialing a peer: the cluster
// CA as roots and the node's certificate as the client certificate.
func (f Files) PeerClient() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load %s: %w", f.CertFile, err)
	}
	roots, err := f.pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}, nil
}

// ClientTrusting returns a client configuration whose roots are the PEM
// certificates in caFile (the CLI's --ca-cert).
func ClientTrusting(caFile string) (*tls.Config, error) {
	p, err := Files{CAFile: caFile}.pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: p, MinVersion: tls.VersionTLS12}, nil
}

// DevCA writes a throw-away CA (ca.pem, ca-key.pem) and, per name, a
// certificate and key (NAME.pem, NAME-key.pem) valid for loopback
// (127.0.0.1, ::1, localhost) and the name itself, for both server and
// client use. Existing files are kept, so a restarted dev cluster keeps
// its identities.
func DevCA(dir string, names ...string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caCert, caKey, err := loadOrCreateCA(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n+".pem")); err == nil {
			continue
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: n, Organization: []string{"Terrace dev cluster"}},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			DNSNames:     []string{"localhost", n},
			IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(dir, n+"-key.pem"), key); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func loadOrCreateCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if pair, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return nil, nil, err
		}
		k, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, nil, fmt.Errorf("tls: %s is not an ECDSA key", keyPath)
		}
		return c, k, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Terrace dev cluster CA", Organization: []string{"Terrace dev cluster"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func writePEM(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
