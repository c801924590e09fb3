package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// One operator decides the same held step from two tabs of one session
// at once, approve in one and reject in the other, and the two redirects
// load only after both answers are sent (a slow tab). Each tab is told
// what became of its own answer: one that it decided, the other that it
// did not and which answer did; neither is shown the other's message.
func TestTwoTabsEachToldTheirOwn(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	run := r.hold(t, "a1", "t1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, csrf := r.login(t)
	base := r.digests(t, c, "a1", "t1", url.Values{"csrf": {csrf}, "agent_id": {"a1"}, "turn_id": {"t1"}, "step": {"0"},
		"call.0": {"c1"}, "call.1": {"c2"}})
	tabs := map[string]url.Values{}
	for _, d := range []string{"approve", "reject"} {
		f := url.Values{}
		for k, v := range base {
			f[k] = v
		}
		f.Set("decision.0", d)
		f.Set("decision.1", d)
		tabs[d] = f
	}
	where := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for d, f := range tabs {
		wg.Go(func() {
			resp, err := c.PostForm(r.url+"/approvals/decide", f)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			where[d] = resp.Header.Get("Location")
			mu.Unlock()
		})
	}
	wg.Wait()
	told := map[string]string{}
	for d, loc := range where {
		page := get(t, c, r.url+loc, http.StatusOK)
		if m := flashRe.FindStringSubmatch(page); m != nil {
			told[d] = m[1]
		}
	}
	decided := 0
	for d, msg := range told {
		switch {
		case strings.Contains(msg, "Your decision decided"):
			decided++
		case strings.Contains(msg, "did NOT decide"):
		default:
			t.Errorf("the %s tab was told %q", d, msg)
		}
	}
	if len(told) != 2 || decided != 1 || told["approve"] == told["reject"] {
		t.Errorf("the two tabs were told %q", told)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
