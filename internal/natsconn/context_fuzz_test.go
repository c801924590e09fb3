package natsconn

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseContext feeds parseContext the bytes of a context file, which
// another program writes: it never panics; it refuses what json.Unmarshal
// refuses and a context setting a field it cannot honour, naming the
// file; otherwise it returns what json.Unmarshal reads, with a leading ~/
// expanded in the file names.
func FuzzParseContext(f *testing.F) {
	for _, s := range []string{
		`{"url":"nats://a:4222","user":"u","password":"p"}`,
		`{"url":"tls://a:4222","creds":"~/u.creds","nkey":"~/u.nk","cert":"c.pem","key":"k.pem","ca":"~/ca.pem","tls_first":true}`,
		`{"url":"nats://a:4222","token":"t","description":"more fields","select_timeout":0}`,
		`{"url":"nats://a:4222","nsc":"nsc://o/a/u","jetstream_domain":"hub"}`,
		`{"url":"nats://a:4222","socks_proxy":"s","user_jwt":"j","inbox_prefix":"_I","jetstream_api_prefix":"$JS.x.API"}`,
		`{"url": 4222}`, `{"url":"nats://a:4222",`, `null`, `[]`, `"url"`, `{"URL":"nats://a","Tls_First":true}`,
		`{"url":"a","url":"b"}`, `{"creds":"~","nkey":"~user/x","ca":"~/"}`, "{\"url\":\"\\u0000\"}",
	} {
		f.Add([]byte(s))
	}
	const path = "/ctx/fuzz.json"
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseContext(path, data)
		var want Context
		jsonErr := json.Unmarshal(data, &want)
		unsupported := want.NSC != "" || want.UserJWT != "" || want.SocksProxy != "" || want.JSDomain != "" ||
			want.JSAPIPrefix != "" || want.InboxPrefix != ""
		if err != nil {
			if c != nil {
				t.Fatalf("parseContext returned %+v with the error %v", *c, err)
			}
			if !strings.HasPrefix(err.Error(), "NATS context "+path) {
				t.Fatalf("the error does not name the file: %v", err)
			}
			if jsonErr == nil && !unsupported {
				t.Fatalf("parseContext refused %q, which json.Unmarshal reads and which sets nothing unsupported: %v", data, err)
			}
			return
		}
		if jsonErr != nil {
			t.Fatalf("parseContext read %q, which json.Unmarshal refuses: %v", data, jsonErr)
		}
		if unsupported {
			t.Fatalf("parseContext read %q, which sets a field it cannot honour", data)
		}
		for _, p := range []*string{&want.Creds, &want.NKey, &want.Cert, &want.Key, &want.CA} {
			*p = expandHome(*p)
		}
		if *c != want {
			t.Fatalf("parseContext(%q) = %+v, want %+v", data, *c, want)
		}
	})
}
