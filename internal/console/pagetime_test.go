package console_test

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// pageLoad is one page of one console, loaded by a logged-in client.
type pageLoad struct {
	c   *http.Client
	url string
	// before, when set, runs before each load, untimed (a flood that
	// goes on between loads).
	before func()
}

// medianTimes loads each page once a round, in turn (A, B, A, B, …), for
// rounds rounds, and returns each page's median time: pages measured
// interleaved share whatever else the machine does meanwhile, so that
// the ratio of two medians says how much slower one page is than the
// other, where a wall time would say how busy the machine was.
func medianTimes(t *testing.T, rounds int, pages ...pageLoad) []time.Duration {
	t.Helper()
	took := make([][]time.Duration, len(pages))
	for range rounds {
		for i, p := range pages {
			if p.before != nil {
				p.before()
			}
			t0 := time.Now()
			get(t, p.c, p.url, http.StatusOK)
			took[i] = append(took[i], time.Since(t0))
		}
	}
	out := make([]time.Duration, len(pages))
	for i, d := range took {
		slices.Sort(d)
		out[i] = d[len(d)/2]
	}
	return out
}

// slowdownBound is the most a page beside a flood may take, as a
// multiple of the same page of a console without it, median against
// median: generous (a loaded machine, the race detector), and still far
// below the slowdowns these tests guard against (20 times and more).
const slowdownBound = 6
