package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
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

// Two operators answer the same held step at once, one approving, one
// rejecting, eight times: every answer is in the audit under a key of
// its own, exactly one of each pair decided the step, the audit says
// which (and it is what ran), and the operator whose answer lost is told
// so on the page.
func TestRacingOperators(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ada, adaCSRF := r.loginAs(t, "Ada")
	bob, bobCSRF := r.loginAs(t, "Bob")
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	approved := 0
	for i := range 8 {
		turnID := fmt.Sprintf("race%d", i)
		run := r.hold(t, "a1", turnID)
		base := r.digests(t, ada, "a1", turnID, url.Values{"agent_id": {"a1"}, "turn_id": {turnID}, "step": {"0"}, "call.0": {"c1"}, "call.1": {"c2"}})
		forms := map[string]url.Values{}
		for who, d := range map[string]string{"Ada": "approve", "Bob": "reject"} {
			f := url.Values{}
			for k, v := range base {
				f[k] = v
			}
			f.Set("decision.0", d)
			f.Set("decision.1", d)
			forms[who] = f
		}
		forms["Ada"].Set("csrf", adaCSRF)
		forms["Bob"].Set("csrf", bobCSRF)
		var wg sync.WaitGroup
		flash := map[string]string{}
		var mu sync.Mutex
		for who, c := range map[string]*http.Client{"Ada": ada, "Bob": bob} {
			wg.Go(func() {
				resp, err := c.PostForm(r.url+"/approvals/decide", forms[who])
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				page := get(t, c, r.url+"/approvals", http.StatusOK)
				m := flashRe.FindStringSubmatch(page)
				mu.Lock()
				defer mu.Unlock()
				if m != nil {
					flash[who] = m[1]
				}
			})
		}
		wg.Wait()
		done, err := run.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		markRan := !strings.Contains(string(done.Items[0]), "refused")

		kv, err := js.KeyValue(ctx, "CONSOLE_AUDIT")
		if err != nil {
			t.Fatal(err)
		}
		keys, err := kv.ListKeysFiltered(ctx, "decision.a1."+turnID+".0.*")
		if err != nil {
			t.Fatal(err)
		}
		outcomes := map[string]string{}
		for k := range keys.Keys() {
			e, err := kv.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			var a struct {
				By, Outcome string
				Decisions   []struct{ Approved bool }
			}
			if err := json.Unmarshal(e.Value(), &a); err != nil {
				t.Fatal(err)
			}
			outcomes[a.By] = a.Outcome
		}
		if len(outcomes) != 2 {
			t.Fatalf("race %d: the audit keeps %d answers (%v), want both", i, len(outcomes), outcomes)
		}
		winner, loser := "Ada", "Bob"
		if !markRan {
			winner, loser = "Bob", "Ada"
		} else {
			approved++
		}
		if outcomes[winner] != "decided" || outcomes[loser] != "lost" {
			t.Errorf("race %d: %s's answer ran, the audit says %v", i, winner, outcomes)
		}
		if !strings.Contains(flash[winner], "Your decision decided") {
			t.Errorf("race %d: the winner %s was told %q", i, winner, flash[winner])
		}
		if !strings.Contains(flash[loser], "did NOT decide") || !strings.Contains(flash[loser], winner) {
			t.Errorf("race %d: the loser %s was told %q", i, loser, flash[loser])
		}
	}
	if m := marks(t, r.markDir); len(m) != approved {
		t.Errorf("mark ran %d times, the audit says Ada's approval decided %d times", len(m), approved)
	}
}
