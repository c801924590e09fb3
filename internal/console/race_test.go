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

// Five operators answer the same held step at once, approvals and
// rejections mixed (two of them the same answer as another's), eight
// times over, each as a parallel HTTP request against a real worker:
// every answer is audited under a key of its own, exactly one decided,
// the audit names it and it is what ran, every other answer is "lost"
// naming the winner, and every operator is told what became of theirs.
func TestRacingOperatorsFive(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	type op struct {
		c      *http.Client
		csrf   string
		answer string
	}
	ops := map[string]*op{}
	for name, answer := range map[string]string{"Ada": "approve", "Bob": "reject", "Cy": "approve", "Dee": "reject", "Eve": "reject"} {
		c, csrf := r.loginAs(t, name)
		ops[name] = &op{c, csrf, answer}
	}
	js := r.srv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	approvedRuns := 0
	for i := range 8 {
		turnID := fmt.Sprintf("race5-%d", i)
		run := r.hold(t, "a1", turnID)
		base := r.digests(t, ops["Ada"].c, "a1", turnID, url.Values{"agent_id": {"a1"}, "turn_id": {turnID}, "step": {"0"}, "call.0": {"c1"}, "call.1": {"c2"}})
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		flash := map[string]string{}
		for name, o := range ops {
			f := url.Values{}
			for k, v := range base {
				f[k] = v
			}
			f.Set("csrf", o.csrf)
			f.Set("decision.0", o.answer)
			f.Set("decision.1", o.answer)
			wg.Go(func() {
				<-start
				resp, err := o.c.PostForm(r.url+"/approvals/decide", f)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				page := get(t, o.c, r.url+"/approvals", http.StatusOK)
				mu.Lock()
				defer mu.Unlock()
				if m := flashRe.FindStringSubmatch(page); m != nil {
					flash[name] = m[1]
				}
			})
		}
		close(start)
		wg.Wait()
		done, err := run.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ranApproved := !strings.Contains(string(done.Items[0]), "refused")
		if ranApproved {
			approvedRuns++
		}
		kv, err := js.KeyValue(ctx, "CONSOLE_AUDIT")
		if err != nil {
			t.Fatal(err)
		}
		keys, err := kv.ListKeysFiltered(ctx, "decision.a1."+turnID+".0.*")
		if err != nil {
			t.Fatal(err)
		}
		type entry struct {
			By, Outcome string
			DecidedBy   string `json:"decided_by"`
			Decisions   []struct{ Approved bool }
		}
		byName := map[string]entry{}
		n := 0
		for k := range keys.Keys() {
			e, err := kv.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			var a entry
			if err := json.Unmarshal(e.Value(), &a); err != nil {
				t.Fatal(err)
			}
			byName[a.By] = a
			n++
		}
		if n != len(ops) || len(byName) != len(ops) {
			t.Fatalf("race %d: the audit keeps %d answers of %d operators: %+v", i, n, len(ops), byName)
		}
		var winners []string
		for name, a := range byName {
			if a.Outcome == "decided" {
				winners = append(winners, name)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("race %d: %d answers decided: %+v", i, len(winners), byName)
		}
		w := winners[0]
		if (ops[w].answer == "approve") != ranApproved || byName[w].Decisions[0].Approved != ranApproved {
			t.Errorf("race %d: the audit says %s (%s) decided, but approved=%v ran", i, w, ops[w].answer, ranApproved)
		}
		if !strings.Contains(flash[w], "Your decision decided") {
			t.Errorf("race %d: the winner %s was told %q", i, w, flash[w])
		}
		for name, a := range byName {
			if name == w {
				continue
			}
			if a.Outcome != "lost" || a.DecidedBy == "" || !strings.Contains(a.DecidedBy, w) {
				t.Errorf("race %d: %s's answer: outcome %q, decided by %q; %s decided", i, name, a.Outcome, a.DecidedBy, w)
			}
			if !strings.Contains(flash[name], "did NOT decide") || !strings.Contains(flash[name], w) {
				t.Errorf("race %d: the loser %s was told %q", i, name, flash[name])
			}
		}
	}
	if m := marks(t, r.markDir); len(m) != approvedRuns {
		t.Errorf("mark ran %d times, the audit says an approval decided %d times", len(m), approvedRuns)
	}
}
