package console_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
)

// loginAs is login under another name: a second operator.
func (r *rig) loginAs(t *testing.T, name string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: noRedirect}
	resp, err := c.PostForm(r.url+"/login", url.Values{"token": {testToken}, "name": {name}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	body := get(t, c, r.url+"/approvals", http.StatusOK)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token")
	}
	return c, m[1]
}

var flashRe = regexp.MustCompile(`(?s)<p class="flash" id="flash">(.*?)</p>`)
