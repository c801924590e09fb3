package tokenvault

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// Keyring holds the keys that seal and open tokens: the first seals, all
// open. It never leaves the process.
type Keyring struct {
	sealID string
	aeads  map[string]cipher.AEAD
}

var validKeyID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ParseKeyring reads keys, one "<id>:<base64 of 32 bytes>" per line (or
// separated by spaces or commas); blank lines and lines starting with #
// are skipped. The first key seals. Errors never quote a key.
func ParseKeyring(data []byte) (*Keyring, error) {
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 1<<16)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
			n++
			id, b64, ok := strings.Cut(f, ":")
			if !ok || !validKeyID.MatchString(id) {
				return nil, fmt.Errorf("token key %d is not <id>:<base64 key> with an id of 1-32 characters of [A-Za-z0-9_-]", n)
			}
			key, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				key, err = base64.RawURLEncoding.DecodeString(b64)
			}
			if err != nil || len(key) != chacha20poly1305.KeySize {
				return nil, fmt.Errorf("token key %q is not the base64 of %d bytes", id, chacha20poly1305.KeySize)
			}
			if _, dup := k.aeads[id]; dup {
				return nil, fmt.Errorf("token key %q is given twice", id)
			}
			a, err := chacha20poly1305.NewX(key)
			if err != nil {
				return nil, err
			}
			k.aeads[id] = a
			if k.sealID == "" {
				k.sealID = id
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token keys: %w", err)
	}
	if k.sealID == "" {
		return nil, errors.New("no token key")
	}
	return k, nil
}

// LoadKeyring reads the keys from file when it is set, otherwise from the
// environment variable env.
func LoadKeyring(file, env string) (*Keyring, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("token key file: %w", err)
		}
		return ParseKeyring(data)
	}
	v := os.Getenv(env)
	if v == "" {
		return nil, fmt.Errorf("no token key: give a key file or set %s", env)
	}
	return ParseKeyring([]byte(v))
}

// SealID is the id of the key that seals.
func (k *Keyring) SealID() string { return k.sealID }
