package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/console"
	"github.com/nats-io/nats.go/jetstream"
)

// A worker slower than the decision's own wait (readBack; here none at
// all): both operators are told their answers were sent, not taken yet.
// The audit still comes to say which one decided (it is what ran) and
// that the other lost to it: no answer stays "sent" once its step is
// decided.
func TestAuditSettlesAfterTheWait(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	console.SetReadBackWait(r.console, 0)
	run := r.hold(t, "a1", "slow")
	ada, adaCSRF := r.loginAs(t, "Ada")
	bob, bobCSRF := r.loginAs(t, "Bob")
	base := r.digests(t, ada, "a1", "slow", url.Values{"agent_id": {"a1"}, "turn_id": {"slow"}, "step": {"0"}, "call.0": {"c1"}, "call.1": {"c2"}})
	var wg sync.WaitGroup
	for _, o := range []struct {
		c            *http.Client
		csrf, answer string
	}{{ada, adaCSRF, "approve"}, {bob, bobCSRF, "reject"}} {
		f := url.Values{}
		for k, v := range base {
			f[k] = v
		}
		f.Set("csrf", o.csrf)
		f.Set("decision.0", o.answer)
		f.Set("decision.1", o.answer)
		wg.Go(func() {
			resp, err := o.c.PostForm(r.url+"/approvals/decide", f)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ranApproved := !strings.Contains(string(done.Items[0]), "refused")
	kv, err := r.srv.JetStream(t).KeyValue(ctx, "CONSOLE_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	var got []auditRecord
	// The worker decided: the audit has a few seconds to say so.
	for deadline := time.Now().Add(15 * time.Second); ; {
		got = got[:0]
		settled := true
		for _, a := range auditRecords(ctx, t, kv, "decision.a1.slow.0.*") {
			got = append(got, a)
			settled = settled && a.Outcome != "sent" && a.Outcome != "sending"
		}
		if (settled && len(got) == 2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var winner, loser *auditRecord
	for i := range got {
		switch got[i].Outcome {
		case "decided":
			winner = &got[i]
		case "lost":
			loser = &got[i]
		}
	}
	if len(got) != 2 || winner == nil || loser == nil {
		t.Fatalf("the audit after the step was decided: %+v, want one answer decided and one lost", got)
	}
	if winner.Decisions[0].Approved != ranApproved {
		t.Errorf("the audit says %s's answer (approved=%v) decided; approved=%v ran", winner.By, winner.Decisions[0].Approved, ranApproved)
	}
	if !strings.Contains(loser.DecidedBy, winner.MsgID) {
		t.Errorf("%s's answer lost, decided by %q; %s's %s decided", loser.By, loser.DecidedBy, winner.By, winner.MsgID)
	}
}

// auditRecord is what the tests read of an answer's audit record.
type auditRecord struct {
	By, Outcome string
	MsgID       string `json:"msg_id"`
	DecidedBy   string `json:"decided_by"`
	Decisions   []struct{ Approved bool }
}

// auditRecords reads the audit records whose keys match filter.
func auditRecords(ctx context.Context, t *testing.T, kv jetstream.KeyValue, filter string) []auditRecord {
	t.Helper()
	keys, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		t.Fatal(err)
	}
	var out []auditRecord
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var a auditRecord
		if err := json.Unmarshal(e.Value(), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}
