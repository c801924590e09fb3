package tool

import (
	"context"
	"fmt"
	"regexp"
)

// Turn is what a category sees of the turn it offers tools to, from the
// turn's context as the gateway sent it.
type Turn struct {
	AgentID string
	TurnID  string
	// Kind is the turn's kind, "text" (a main turn). A workflow task
	// turn ("workflow_task") never reaches a category: its catalog is
	// fixed (the web tools, read-only brain tools and submit_result).
	Kind string
	// Bindings are the categories the turn's context binds ("web": true);
	// the worker's copy: what one category changes in it no other sees.
	Bindings map[string]bool
}

// Bound reports whether the turn's context binds name.
func (t Turn) Bound(name string) bool { return t.Bindings[name] }

// Category is a named group of tools a worker offers to turns: give it to
// worker.New, or to worker.Main, where it takes its place in the catalog
// beside the built-in categories.
type Category struct {
	// Name names the category in the worker's metadata ("categories") and
	// logs; for a category made with NewCategory it is also the binding
	// the turn's context must set. It matches ^[a-z0-9_]{1,64}$.
	Name string
	// Tools returns the category's tools for one turn, in catalog order,
	// or none when the category offers nothing to it. It runs for every
	// step and every catalog request, from many goroutines at once: build
	// the tools once and choose among them here. An error, or a panic,
	// fails the step (it is delivered again, and dead-lettered after
	// --max-deliver attempts) or the catalog request (an error reply); the
	// worker goes on. So do two tools of one name (and namespace) in one
	// turn, from this category or any other.
	Tools func(ctx context.Context, t Turn) ([]*Tool, error)
}

// NewCategory returns a category named name that offers ts, in that order,
// to every turn whose context binds name (as the built-in categories do:
// a gateway sends "bindings": {"<name>": true}).
func NewCategory(name string, ts ...*Tool) Category {
	return Category{Name: name, Tools: func(_ context.Context, t Turn) ([]*Tool, error) {
		if !t.Bound(name) {
			return nil, nil
		}
		return ts, nil
	}}
}

var validCategory = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// Validate reports what is wrong with c, if anything.
func (c Category) Validate() error {
	switch {
	case !validCategory.MatchString(c.Name):
		return fmt.Errorf("category %q: the name must match %s", c.Name, validCategory)
	case c.Tools == nil:
		return fmt.Errorf("category %q: Tools is nil", c.Name)
	}
	return nil
}
