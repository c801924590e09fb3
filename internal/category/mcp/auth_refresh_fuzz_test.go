package mcp

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// FuzzTokenAnswer feeds a token endpoint's answer to a refresh: never a
// panic; a 400 or 401 is a refusal; a token comes only from a 2xx answer
// with an access token, its expiry within the answer's bound.
func FuzzTokenAnswer(f *testing.F) {
	f.Add(200, []byte(`{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":"r","scope":"read write"}`))
	f.Add(200, []byte(`{"access_token":"a","expires_in":"60"}`))
	f.Add(200, []byte(`{"access_token":"a","expires_in":1e308}`))
	f.Add(200, []byte(`{"token_type":"Bearer"}`))
	f.Add(400, []byte(`{"error":"invalid_grant","error_description":"<script>"}`))
	f.Add(401, []byte(`not json`))
	f.Add(503, []byte(``))
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		resp := &http.Response{StatusCode: status, Status: http.StatusText(status)}
		tok, err := tokenAnswer(resp, body, now)
		var refused *oauth2.RetrieveError
		switch {
		case status == 400 || status == 401:
			if !errors.As(err, &refused) || tok != nil {
				t.Fatalf("status %d: %v, %v; want a refusal", status, tok, err)
			}
		case err == nil:
			if status/100 != 2 || tok == nil || tok.AccessToken == "" {
				t.Fatalf("status %d gave %+v", status, tok)
			}
			if !tok.Expiry.IsZero() && (tok.Expiry.Before(now) || tok.Expiry.After(now.Add(1<<31*time.Second))) {
				t.Fatalf("expiry %v out of bounds", tok.Expiry)
			}
		case tok != nil:
			t.Fatalf("a token beside an error: %v", err)
		}
	})
}
