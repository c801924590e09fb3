package natsconn_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// startServer starts a NATS server without JetStream (these tests need
// only a connection) with its options changed by configure.
func startServer(t *testing.T, configure func(*server.Options)) *natstest.Server {
	t.Helper()
	return natstest.StartWith(t, func(o *server.Options) {
		o.JetStream = false
		configure(o)
	})
}

// contextFile writes a NATS CLI context with fields and returns its path.
func contextFile(t *testing.T, fields map[string]any) string {
	t.Helper()
	data, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, t.TempDir(), "ctx.json", string(data))
}

// connect resolves args and vars as the worker does and connects with
// the options natsconn gives: the whole path a --context or a flag takes.
// An error from natsconn itself is returned as is; a refused connection
// as nats.Connect's error.
func connect(t *testing.T, args []string, vars map[string]string) error {
	t.Helper()
	f, err := resolve(t, args, vars)
	if err != nil {
		return err
	}
	opts, err := f.Options()
	if err != nil {
		return err
	}
	opts = append(opts, nats.NoReconnect(), nats.Timeout(3*time.Second))
	nc, err := nats.Connect(f.URL, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	// A round trip, so that a server that took the connection but not
	// its credentials is seen here.
	return nc.Flush()
}

// check connects and compares the outcome with want: "" for a
// connection, else text the error must hold.
func check(t *testing.T, args []string, vars map[string]string, want ...string) {
	t.Helper()
	err := connect(t, args, vars)
	switch {
	case len(want) == 0 && err != nil:
		t.Errorf("connect %v: %v", args, err)
	case len(want) > 0 && err == nil:
		t.Errorf("connect %v: connected, want an error saying %q", args, want)
	case len(want) > 0:
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("connect %v: %v\nwant it to say %q", args, err, w)
			}
		}
	}
}

// TestUserPassword connects with a user and password from a context,
// from flags and from the CLI's variables, and not with a wrong one.
func TestUserPassword(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(o *server.Options) { o.Username, o.Password = "alice", "s3cret" })
	url := s.ClientURL()
	good := contextFile(t, map[string]any{"url": url, "user": "alice", "password": "s3cret"})
	wrong := contextFile(t, map[string]any{"url": url, "user": "alice", "password": "guess"})

	check(t, []string{"--context", good}, nil)
	check(t, []string{"--nats-url", url, "--user", "alice", "--password", "s3cret"}, nil)
	check(t, nil, map[string]string{"NATS_URL": url, "NATS_USER": "alice", "NATS_PASSWORD": "s3cret"})
	check(t, []string{"--context", wrong, "--password", "s3cret"}, nil) // a flag beats the context
	check(t, []string{"--context", wrong}, nil, "Authorization Violation")
	check(t, []string{"--nats-url", url}, nil, "Authorization Violation")
}

// TestToken connects with a token, given as such or, as the CLI reads
// it, as a user name with no password.
func TestToken(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(o *server.Options) { o.Authorization = "t0ken" })
	url := s.ClientURL()

	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "token": "t0ken"})}, nil)
	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "user": "t0ken"})}, nil)
	check(t, []string{"--nats-url", url, "--token", "t0ken"}, nil)
	check(t, nil, map[string]string{"NATS_URL": url, "NATS_USER": "t0ken"})
	check(t, nil, map[string]string{"NATS_URL": url, "WORKER_TOKEN": "t0ken", "NATS_TOKEN": "other"})
	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "token": "other"})}, nil, "Authorization Violation")
	check(t, nil, map[string]string{"NATS_URL": url, "NATS_TOKEN": "other"}, "Authorization Violation")
}

// TestNKey connects with an nkey seed file and refuses a seed file that
// is missing or holds no seed, naming --nkey and the file.
func TestNKey(t *testing.T) {
	t.Parallel()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	account, _ := nkeys.CreateAccount()
	accountSeed, _ := account.Seed()
	s := startServer(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	url := s.ClientURL()
	dir := t.TempDir()
	seedFile := writeFile(t, dir, "user.nk", string(seed)+"\n")
	otherFile := writeFile(t, dir, "other.nk", string(otherSeed))
	accountFile := writeFile(t, dir, "account.nk", string(accountSeed))
	notSeed := writeFile(t, dir, "public.nk", pub)
	missing := filepath.Join(dir, "missing.nk")

	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "nkey": seedFile})}, nil)
	check(t, []string{"--nats-url", url, "--nkey", seedFile}, nil)
	check(t, nil, map[string]string{"NATS_URL": url, "NATS_NKEY": seedFile})
	check(t, []string{"--nats-url", url, "--nkey", otherFile}, nil, "Authorization Violation")
	check(t, []string{"--nats-url", url, "--nkey", missing}, nil, "--nkey: ", missing, "no such file or directory")
	check(t, []string{"--nats-url", url, "--nkey", notSeed}, nil, "--nkey: ", "seed")
	check(t, []string{"--nats-url", url, "--nkey", accountFile}, nil, "--nkey: ", "Not a valid nkey user seed")
}

// TestCreds connects with a credentials file (a user JWT and its seed)
// to a server in operator mode, and not with the credentials of an
// account the server does not know.
func TestCreds(t *testing.T) {
	t.Parallel()
	operator, _ := nkeys.CreateOperator()
	opub, _ := operator.PublicKey()
	oclaims := jwt.NewOperatorClaims(opub)
	ojwt, err := oclaims.Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	if oclaims, err = jwt.DecodeOperatorClaims(ojwt); err != nil {
		t.Fatal(err)
	}
	account, apub, ajwt := newAccount(t, operator)
	unknown, _, _ := newAccount(t, operator) // signed by the operator but never given to the server
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{oclaims}
		o.AccountResolver = resolver
	})
	url := s.ClientURL()
	dir := t.TempDir()
	creds := writeFile(t, dir, "user.creds", userCreds(t, account))
	stranger := writeFile(t, dir, "stranger.creds", userCreds(t, unknown))
	missing := filepath.Join(dir, "missing.creds")

	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "creds": creds})}, nil)
	check(t, []string{"--nats-url", url, "--creds", creds}, nil)
	check(t, nil, map[string]string{"NATS_URL": url, "NATS_CREDS": creds})
	check(t, []string{"--nats-url", url, "--creds", stranger}, nil, "Authorization Violation")
	check(t, []string{"--nats-url", url}, nil, "Authorization Violation")
	check(t, []string{"--nats-url", url, "--creds", missing}, nil, missing, "no such file or directory")
}

// newAccount makes an account signed by operator: its key pair, public
// key and JWT.
func newAccount(t *testing.T, operator nkeys.KeyPair) (nkeys.KeyPair, string, string) {
	t.Helper()
	kp, _ := nkeys.CreateAccount()
	pub, _ := kp.PublicKey()
	token, err := jwt.NewAccountClaims(pub).Encode(operator)
	if err != nil {
		t.Fatal(err)
	}
	return kp, pub, token
}

// userCreds is a credentials file of a new user of account.
func userCreds(t *testing.T, account nkeys.KeyPair) string {
	t.Helper()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	token, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		t.Fatal(err)
	}
	return string(creds)
}

// pki is a CA and the certificates it signed, written as PEM files.
type pki struct {
	dir, ca, clientCert, clientKey   string
	otherCA, otherClient, otherClKey string
	serverCert                       tls.Certificate
	pool                             *x509.CertPool
}

// newPKI makes a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, and a second CA with a client certificate of
// its own, for the refusals.
func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	caKey, caTmpl, caDER := newCA(t, "test CA")
	p.ca = writePEM(t, p.dir, "ca.pem", "CERTIFICATE", caDER)
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)

	serverDER, serverKey := leaf(t, caTmpl, caKey, 2, x509.ExtKeyUsageServerAuth)
	p.serverCert = tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: serverKey}
	clientDER, clientKey := leaf(t, caTmpl, caKey, 3, x509.ExtKeyUsageClientAuth)
	p.clientCert = writePEM(t, p.dir, "client.pem", "CERTIFICATE", clientDER)
	p.clientKey = writePEM(t, p.dir, "client-key.pem", "PRIVATE KEY", pkcs8(t, clientKey))

	otherKey, otherTmpl, otherDER := newCA(t, "other CA")
	p.otherCA = writePEM(t, p.dir, "other-ca.pem", "CERTIFICATE", otherDER)
	otherClientDER, otherClientKey := leaf(t, otherTmpl, otherKey, 4, x509.ExtKeyUsageClientAuth)
	p.otherClient = writePEM(t, p.dir, "other-client.pem", "CERTIFICATE", otherClientDER)
	p.otherClKey = writePEM(t, p.dir, "other-client-key.pem", "PRIVATE KEY", pkcs8(t, otherClientKey))
	return p
}

// serverTLS is the server's TLS configuration: its certificate, and the
// CA's client certificates required when mutual.
func (p *pki) serverTLS(mutual bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.serverCert}, MinVersion: tls.VersionTLS12}
	if mutual {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.pool
	}
	return c
}

func newCA(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, tmpl, der
}

func leaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

func pkcs8(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	return writeFile(t, dir, name, string(pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})))
}

// TestTLS connects over mutual TLS with the CA, certificate and key of a
// context, flags or the CLI's variables, and refuses a connection with
// no client certificate, with another CA's, or trusting another CA.
func TestTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	s := startServer(t, func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = p.serverTLS(true), true, true, 5
	})
	url := s.ClientURL()
	missing := filepath.Join(p.dir, "missing.pem")

	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "ca": p.ca, "cert": p.clientCert, "key": p.clientKey})}, nil)
	check(t, []string{"--nats-url", url, "--tls-ca", p.ca, "--tls-cert", p.clientCert, "--tls-key", p.clientKey}, nil)
	check(t, nil, map[string]string{"NATS_URL": url, "NATS_CA": p.ca, "NATS_CERT": p.clientCert, "NATS_KEY": p.clientKey})

	// The server refuses a client certificate after the handshake (TLS
	// 1.3): the client sees its alert or the closed connection, whichever
	// comes first, so only the TLS error is certain.
	check(t, []string{"--nats-url", url, "--tls-ca", p.ca}, nil, "tls")
	check(t, []string{"--nats-url", url, "--tls-ca", p.ca, "--tls-cert", p.otherClient, "--tls-key", p.otherClKey}, nil, "tls")
	check(t, []string{"--nats-url", url, "--tls-ca", p.otherCA, "--tls-cert", p.clientCert, "--tls-key", p.clientKey}, nil,
		"certificate signed by unknown authority")
	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "ca": missing, "cert": p.clientCert, "key": p.clientKey})}, nil,
		"rootCA", missing, "no such file or directory")
	check(t, []string{"--nats-url", url, "--tls-ca", p.ca, "--tls-cert", missing, "--tls-key", p.clientKey}, nil,
		"client certificate", missing, "no such file or directory")
	check(t, []string{"--nats-url", url, "--tls-ca", p.ca, "--tls-cert", p.clientCert, "--tls-key", p.otherClKey}, nil,
		"client certificate", "private key does not match public key")
}

// TestTLSFilesUnderHome: a context's files under ~/ are the user's, as
// the CLI reads them.
func TestTLSFilesUnderHome(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = p.serverTLS(true), true, true, 5
	})
	home := t.TempDir()
	for _, f := range []string{p.ca, p.clientCert, p.clientKey} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, home, "nats/"+filepath.Base(f), string(data))
	}
	t.Setenv("HOME", home)
	check(t, []string{"--context", contextFile(t, map[string]any{"url": s.ClientURL(), "ca": "~/nats/ca.pem",
		"cert": "~/nats/client.pem", "key": "~/nats/client-key.pem"})}, nil)
}

// TestTLSFirst connects to a server that starts with the TLS handshake
// when the context says tls_first, which is the only way to ask for it.
func TestTLSFirst(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	s := startServer(t, func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSTimeout, o.TLSHandshakeFirst = p.serverTLS(false), true, 5, true
	})
	url := s.ClientURL()
	check(t, []string{"--context", contextFile(t, map[string]any{"url": url, "ca": p.ca, "tls_first": true})}, nil)

	// Without it the client waits for the server's INFO, which a
	// TLS-first server never sends in the clear.
	f, err := resolve(t, []string{"--context", contextFile(t, map[string]any{"url": url, "ca": p.ca})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := f.Options()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(f.URL, append(opts, nats.NoReconnect(), nats.Timeout(500*time.Millisecond))...)
	if err == nil {
		nc.Close()
		t.Fatal("connected to a TLS-first server without tls_first")
	}
}
