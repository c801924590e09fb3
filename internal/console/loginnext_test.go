package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// browserResolve is where a browser goes for a Location header on a
// page of base: the URL parser drops every ASCII tab and newline
// before it reads the URL, and reads a backslash as a slash in an http
// URL.
func browserResolve(t *testing.T, base, loc string) *url.URL {
	t.Helper()
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(loc)
	b, _ := url.Parse(base)
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatalf("Location %q: %v", loc, err)
	}
	return b.ResolveReference(u)
}

// The login page's next (where a person goes once logged in) comes
// from the link that brought them: a link to the console's login with
// a next that a browser reads as another site's URL sends the person,
// logged in, to a page that can pose as the console (asking for the
// token again). Each next below is kept on the console, as a browser
// reads the redirect: tabs and newlines inside it (which a browser
// drops, so that "/\t/evil.example" is "//evil.example"), backslashes,
// schemes.
func TestLoginRedirectStaysOnTheConsole(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	host := strings.TrimPrefix(r.url, "http://")
	for _, next := range []string{"/\t/evil.example", "/\t\t/evil.example/x", "\t//evil.example", "/\n/evil.example", "/\r/evil.example",
		"//evil.example", "/\\evil.example", "https://evil.example", "/%09/evil.example", " //evil.example", "/approvals?x=//evil.example"} {
		// The transport alone: a client refuses to read a Location
		// with a control character, a browser reads it.
		req, _ := http.NewRequest(http.MethodPost, r.url+"/login",
			strings.NewReader(url.Values{"token": {testToken}, "name": {"Ada"}, "next": {next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("next %q: login answered %s", next, resp.Status)
		}
		if u := browserResolve(t, r.url+"/login", loc); u.Host != host || u.Scheme != "http" {
			t.Errorf("next %q: redirected to %q, which a browser reads as %s", next, loc, u)
		}
	}
}
