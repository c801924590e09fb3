package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var answerIDRe = regexp.MustCompile(`\(answer ([^)]+)\)|Your answer \(([^)]+)\) was ignored`)

// Two operators with two tabs each answer several held steps at once
// (of each one's tabs, one approves and the other rejects every step:
// sixteen answers in flight together against a real worker).
func TestOperatorsAndTabsOnSeveralSteps(t *testing.T) {
	t.Parallel()
	raceOnSteps(t, 4, []tabSpec{{"Ada", "approve"}, {"Ada", "reject"}, {"Bob", "approve"}, {"Bob", "reject"}})
}

// Five operators (one of them in two tabs) answer the same held steps at
// once, approvals and rejections mixed (some the same answer as
// another's), four steps at once: twenty-four answers in flight.
func TestRacingOperatorsFive(t *testing.T) {
	t.Parallel()
	raceOnSteps(t, 4, []tabSpec{{"Ada", "approve"}, {"Bob", "reject"}, {"Cy", "approve"}, {"Dee", "reject"}, {"Eve", "reject"}, {"Ada", "reject"}})
}

// tabSpec is one browser tab: whose session, and what it answers.
type tabSpec struct{ who, answer string }

// raceOnSteps holds steps steps and has every tab answer every one of
// them at once. For every step the audit keeps each tab's answer under
// a key of its own, exactly one decided and it is what ran, every other
// one is "lost" naming the winner, and each tab is told what became of
// its own answer (by its message id), not of another tab's or another
// step's; mark ran once per approval that decided.
func raceOnSteps(t *testing.T, steps int, specs []tabSpec) {
	r := newRig(t)
	type tab struct {
		who    string
		c      *http.Client
		csrf   string
		answer string
	}
	type session struct {
		c    *http.Client
		csrf string
	}
	sessions := map[string]session{}
	var tabs []tab
	var ada *http.Client
	for _, sp := range specs {
		se, ok := sessions[sp.who]
		if !ok {
			se.c, se.csrf = r.loginAs(t, sp.who)
			sessions[sp.who] = se
		}
		if ada == nil {
			ada = se.c
		}
		tabs = append(tabs, tab{sp.who, se.c, se.csrf, sp.answer})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	type held struct {
		turn string
		base url.Values
		done chan []json.RawMessage
	}
	var hs []held
	for i := range steps {
		turnID := fmt.Sprintf("many-%d", i)
		run := r.hold(t, "a1", turnID)
		h := held{turn: turnID, done: make(chan []json.RawMessage, 1)}
		go func() {
			d, err := run.Wait(ctx)
			if err != nil {
				t.Error(err)
				close(h.done)
				return
			}
			h.done <- d.Items
		}()
		hs = append(hs, h)
	}
	for i := range hs {
		hs[i].base = r.digests(t, ada, "a1", hs[i].turn, url.Values{"agent_id": {"a1"}, "turn_id": {hs[i].turn}, "step": {"0"}, "call.0": {"c1"}, "call.1": {"c2"}})
	}
	// told[turn][k] is what tab k was told about its answer to turn.
	told := map[string][]string{}
	for _, h := range hs {
		told[h.turn] = make([]string, len(tabs))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, h := range hs {
		for k, tb := range tabs {
			f := url.Values{}
			for key, v := range h.base {
				f[key] = v
			}
			f.Set("csrf", tb.csrf)
			f.Set("decision.0", tb.answer)
			f.Set("decision.1", tb.answer)
			wg.Go(func() {
				<-start
				resp, err := tb.c.PostForm(r.url+"/approvals/decide", f)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				loc := resp.Header.Get("Location")
				if resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "flash=") {
					t.Errorf("%s's tab %d on %s: %s, Location %q", tb.who, k, h.turn, resp.Status, loc)
					return
				}
				page := get(t, tb.c, r.url+loc, http.StatusOK)
				m := flashRe.FindStringSubmatch(page)
				mu.Lock()
				defer mu.Unlock()
				if m != nil {
					told[h.turn][k] = m[1]
				}
			})
		}
	}
	close(start)
	wg.Wait()
	js := r.srv.JetStream(t)
	kv, err := js.KeyValue(ctx, "CONSOLE_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	approvedRuns := 0
	for _, h := range hs {
		items, ok := <-h.done
		if !ok {
			t.Fatalf("%s did not end", h.turn)
		}
		ranApproved := !strings.Contains(string(items[0]), "refused")
		if ranApproved {
			approvedRuns++
		}
		byID := map[string]auditRecord{}
		var winner auditRecord
		for _, a := range auditRecords(ctx, t, kv, "decision.a1."+h.turn+".0.*") {
			byID[a.MsgID] = a
			if a.Outcome == "decided" {
				if winner.MsgID != "" {
					t.Errorf("%s: two answers decided: %+v and %+v", h.turn, winner, a)
				}
				winner = a
			}
		}
		if len(byID) != len(tabs) {
			t.Errorf("%s: the audit keeps %d answers of %d tabs: %+v", h.turn, len(byID), len(tabs), byID)
			continue
		}
		if winner.MsgID == "" {
			t.Errorf("%s: no answer decided: %+v", h.turn, byID)
			continue
		}
		if winner.Decisions[0].Approved != ranApproved {
			t.Errorf("%s: the audit says %s's %s decided (approved=%v), but approved=%v ran", h.turn, winner.By, winner.MsgID, winner.Decisions[0].Approved, ranApproved)
		}
		seen := map[string]bool{}
		for k, tb := range tabs {
			msg := told[h.turn][k]
			m := answerIDRe.FindStringSubmatch(msg)
			if m == nil {
				t.Errorf("%s: %s's tab %d was told %q: no answer of its own named", h.turn, tb.who, k, msg)
				continue
			}
			id := m[1] + m[2]
			a, ok := byID[id]
			switch {
			case !ok:
				t.Errorf("%s: %s's tab %d was told of answer %s, not one of this step's", h.turn, tb.who, k, id)
			case seen[id]:
				t.Errorf("%s: two tabs were told of answer %s", h.turn, id)
			case a.By != tb.who || a.Decisions[0].Approved != (tb.answer == "approve"):
				t.Errorf("%s: %s's tab %d (%s) was told of answer %s, %s's (approved=%v)", h.turn, tb.who, k, tb.answer, id, a.By, a.Decisions[0].Approved)
			case a.Outcome == "decided" && !strings.Contains(msg, "Your decision decided"):
				t.Errorf("%s: %s's tab %d decided, and was told %q", h.turn, tb.who, k, msg)
			case a.Outcome == "lost" && (!strings.Contains(msg, "did NOT decide") || !strings.Contains(msg, winner.MsgID) || !strings.Contains(a.DecidedBy, winner.MsgID)):
				t.Errorf("%s: %s's tab %d lost to %s, was told %q, the audit says decided by %q", h.turn, tb.who, k, winner.MsgID, msg, a.DecidedBy)
			case a.Outcome != "decided" && a.Outcome != "lost":
				t.Errorf("%s: %s's tab %d: outcome %q", h.turn, tb.who, k, a.Outcome)
			}
			seen[id] = true
		}
	}
	if m := marks(t, r.markDir); len(m) != approvedRuns {
		t.Errorf("mark ran %d times, the audit says an approval decided %d times", len(m), approvedRuns)
	}
}
