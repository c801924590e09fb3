package engine

import (
	"fmt"
	"maps"
	"sync"
	"testing"
)

// TestBindingsShared checks that steps with equal bindings share one map,
// and that bindings that differ, in a name, a value or a name's quoting,
// do not.
func TestBindingsShared(t *testing.T) {
	var c bindingsCache
	a := c.share(map[string]bool{"web": true, "diagnostics": true})
	b := c.share(map[string]bool{"diagnostics": true, "web": true})
	if fmt.Sprintf("%p", a) != fmt.Sprintf("%p", b) {
		t.Errorf("equal bindings got two maps")
	}
	if !maps.Equal(b, map[string]bool{"web": true, "diagnostics": true}) {
		t.Errorf("shared bindings %v", b)
	}
	for _, other := range []map[string]bool{
		{"web": false, "diagnostics": true},
		{"web": true},
		{"web": true, "diagnostics": true, "brain": false},
		{`web"1`: true, "diagnostics": true},
		{"web1": true, "diagnostics": true},
	} {
		got := c.share(other)
		if fmt.Sprintf("%p", got) == fmt.Sprintf("%p", a) || !maps.Equal(got, other) {
			t.Errorf("bindings %v got %v (the shared map of %v: %t)", other, got, a, fmt.Sprintf("%p", got) == fmt.Sprintf("%p", a))
		}
	}
	if got := c.share(nil); got != nil {
		t.Errorf("nil bindings got %v", got)
	}
}

// TestBindingsBounded checks that the cache keeps at most
// maxSharedBindings sets, of at most maxSharedBindingKeys names, and names
// that fit its key.
func TestBindingsBounded(t *testing.T) {
	var c bindingsCache
	for i := range 2 * maxSharedBindings {
		c.share(map[string]bool{fmt.Sprint("b", i): true})
	}
	if len(c.maps) != maxSharedBindings {
		t.Errorf("%d sets kept, want %d", len(c.maps), maxSharedBindings)
	}
	var d bindingsCache
	many := map[string]bool{}
	for i := range maxSharedBindingKeys + 1 {
		many[fmt.Sprint("k", i)] = true
	}
	d.share(many)
	long := map[string]bool{string(make([]byte, 300)): true}
	d.share(long)
	if len(d.maps) != 0 {
		t.Errorf("%d sets kept of too many names or too long a name", len(d.maps))
	}
}

// TestBindingsConcurrent shares and reads bindings from many goroutines
// (run it with -race).
func TestBindingsConcurrent(t *testing.T) {
	var c bindingsCache
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				m := c.share(map[string]bool{"web": true, fmt.Sprint("b", (g+i)%5): i%2 == 0})
				if !m["web"] || len(m) != 2 {
					t.Errorf("bindings %v", m)
					return
				}
			}
		})
	}
	wg.Wait()
}
