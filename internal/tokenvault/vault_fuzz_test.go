package tokenvault

import (
	"encoding/base64"
	"testing"
)

// Stored records are untrusted bytes (anything with write access to the
// bucket could put one): decoding and opening never panic, and nothing
// opens that this keyring did not seal for the key.
func FuzzOpenRecord(f *testing.F) {
	k, err := ParseKeyring([]byte("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32))))
	if err != nil {
		f.Fatal(err)
	}
	v := &Vault{keys: k}
	good, err := v.seal("t.s.X", &Token{AccessToken: "a"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"v":1,"kid":"k1","n":"","c":""}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeRecord(data)
		if err != nil {
			return
		}
		if tok, err := k.open("t.s.Y", r); err == nil {
			t.Fatalf("a record opened under another key: %+v", tok)
		}
		_, _ = k.open("t.s.X", r)
	})
}

func FuzzParseKeyring(f *testing.F) {
	f.Add([]byte("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32))))
	f.Add([]byte("# c\nk1:AAAA, k2:BBBB"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKeyring(data)
		if err == nil && (k.sealID == "" || k.aeads[k.sealID] == nil) {
			t.Fatal("a keyring without a sealing key")
		}
	})
}
