package worqr

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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsRedis starts a redis-server of its own that speaks only TLS, with a
// certificate from a CA made for the test, and stops it when the test
// ends. It returns the server's address and the CA.
func tlsRedis(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server to start")
	}
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "worqr test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	caFile := write("ca.pem", "CERTIFICATE", caDER)
	certFile := write("cert.pem", "CERTIFICATE", leafDER)
	keyFile := write("key.pem", "EC PRIVATE KEY", keyDER)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "redis-server listens on "+addr, func() bool {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	})
	return addr, pool
}

// Credentials and TLS reach rueidis: through a rediss:// URL in
// Options.Addr, and through a rueidis client of the application's own for
// TLS settings a URL cannot carry (a CA of its own).
func TestTLSAndCredentials(t *testing.T) {
	t.Parallel()
	if os.Getenv(envRedis) == "" {
		t.Skip("starts a real redis-server; runs with " + envRedis)
	}
	addr, pool := tlsRedis(t)
	ctx := ctxT(t)
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, TLSConfig: &tls.Config{RootCAs: pool}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	prefix, user, pass := "worqrtls", "worqr-tls", uuid.NewString()
	rules := append([]string{"reset", "on", ">" + pass, "~" + prefix + ":*", "&" + prefix + ":*", "-@all"}, strings.Fields(aclCommands)...)
	require.NoError(t, admin.Do(ctx, admin.B().AclSetuser().Username(user).Rule(rules...).Build()).Error())

	roundTrip := func(c *Client) {
		t.Helper()
		w, err := c.NewWorker(ctx, WorkerOptions{})
		require.NoError(t, err)
		require.NoError(t, w.StartWork(ctx, "q", Events{}))
		require.NoError(t, second(c.Enqueue(ctx, "q", []byte("over TLS"))))
		p, err := w.Dequeue(ctx, "q")
		require.NoError(t, err)
		assert.Equal(t, "over TLS", string(p.Task()))
		require.NoError(t, p.Finish(ctx))
		require.NoError(t, w.Close(ctx))
		rep, err := c.Check(ctx, CheckOptions{})
		require.NoError(t, err)
		assert.Zero(t, rep.Problems(), "%v", rep)
		require.NoError(t, c.Close(ctx))
	}

	// A URL: user, password and TLS (the test CA is not among the
	// system's roots, so verification is skipped).
	c, err := New(Options{Addr: "rediss://" + user + ":" + pass + "@" + addr + "/0?skip_verify=true", Prefix: prefix, Logger: testLogger(t)})
	require.NoError(t, err)
	roundTrip(c)

	// The URL verifies the certificate by default: this one is refused.
	_, err = New(Options{Addr: "rediss://" + user + ":" + pass + "@" + addr + "/0", Prefix: prefix})
	var unknownCA x509.UnknownAuthorityError
	assert.True(t, errors.As(err, &unknownCA), "got %v", err)
	// Plain text to a TLS port is refused too.
	_, err = New(Options{Addr: "redis://" + user + ":" + pass + "@" + addr + "/0", Prefix: prefix})
	assert.ErrorIs(t, err, ErrUnavailable)

	// The application's own rueidis client, verifying against the CA.
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, Username: user, Password: pass,
		TLSConfig: &tls.Config{RootCAs: pool}, DisableCache: true,
	})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	c, err = New(Options{Redis: rdb, Prefix: prefix, Logger: testLogger(t)})
	require.NoError(t, err)
	roundTrip(c)
}
