package mcpdoor

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SealKeyBytes is the length of a seal key (AES-256-GCM).
const SealKeyBytes = 32

// sealer seals what the door hands a client to bring back
// (requestState): AES-256-GCM, so a client can neither read nor forge
// it, under a key every replica shares.
type sealer struct {
	aead cipher.AEAD
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != SealKeyBytes {
		return nil, fmt.Errorf("mcpdoor: the seal key is %d bytes, want %d", len(key), SealKeyBytes)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: a}, nil
}

// approvalState is a held call's requestState: whose call it is, which
// step, and until when it may be answered.
type approvalState struct {
	V         int    `json:"v"`
	Principal string `json:"p"`
	Agent     string `json:"a"`
	Turn      string `json:"t"`
	Step      int64  `json:"s"`
	CallID    string `json:"c"`
	Tool      string `json:"n"`
	// Args is the SHA-256 of the call's arguments: the retry must send
	// the same call.
	Args    []byte `json:"h"`
	Expires int64  `json:"e"` // unix seconds
}

// sealPurpose is additional data bound into every seal: a sealed value
// of another purpose (or another program on the same key) never opens
// as a requestState.
var sealPurpose = []byte("toolruntime mcp door requestState v1")

func (s *sealer) seal(st approvalState) string {
	b, _ := json.Marshal(st)
	return s.sealBytes(b, sealPurpose)
}

func (s *sealer) sealBytes(b, purpose []byte) string {
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, b, purpose))
}

// openBytes opens what sealBytes sealed for purpose, or fails.
func (s *sealer) openBytes(text string, purpose []byte) ([]byte, bool) {
	if len(text) > MaxRequestState {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(text)
	n := s.aead.NonceSize()
	if err != nil || len(b) < n+s.aead.Overhead() {
		return nil, false
	}
	plain, err := s.aead.Open(nil, b[:n], b[n:], purpose)
	return plain, err == nil
}

var errBadState = errors.New("invalid requestState")

// MaxRequestState bounds the requestState the door opens.
const MaxRequestState = 4 << 10

// open reads a requestState back; anything forged, cut or expired is
// errBadState.
func (s *sealer) open(text string, now time.Time) (approvalState, error) {
	var st approvalState
	plain, ok := s.openBytes(text, sealPurpose)
	if !ok || json.Unmarshal(plain, &st) != nil || st.V != 1 {
		return st, errBadState
	}
	if now.Unix() >= st.Expires {
		return st, fmt.Errorf("%w: expired", errBadState)
	}
	return st, nil
}
