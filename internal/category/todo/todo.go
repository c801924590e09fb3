package todo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Binding is the context binding that can switch the category off: a
// main turn has the todo tools unless its bindings say "todo": false.
const Binding = "todo"

// Bucket is the key-value bucket that holds the lists.
const Bucket = "TODOS"

// Names of the tools, in catalog order.
const (
	WriteName = "todo_write"
	ReadName  = "todo_read"
)

// Item statuses.
const (
	Pending    = "pending"
	InProgress = "in_progress"
	Completed  = "completed"
)

// Defaults of a zero Config.
const (
	DefaultTTL      = 24 * time.Hour
	DefaultMaxItems = 100
)

// Config configures the category. The zero value of each field works.
type Config struct {
	// Replicas and Storage of the TODOS bucket (1, file).
	Replicas int
	Storage  jetstream.StorageType
	// TTL is how long a list is kept after its last write (24 h).
	TTL time.Duration
	// MaxItems bounds one list (100).
	MaxItems int
}

// Category is the todo category: the tools, built once, over the TODOS
// bucket. It is safe for concurrent use.
type Category struct {
	cfg   Config
	kv    jetstream.KeyValue
	tools []*tool.Tool
}

// New creates or updates the TODOS bucket and builds the tools.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Category, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = DefaultMaxItems
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "Todo lists, one per turn", History: 1, TTL: cfg.TTL,
		Replicas: cfg.Replicas, Storage: cfg.Storage,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", Bucket, err)
	}
	// Every read and write has a short attempt timeout, not the call's,
	// and transient failures are tried again; a Put tried again writes
	// the same list.
	c := &Category{cfg: cfg, kv: bus.Retry{}.KV(js, kv)}
	c.tools = c.build()
	return c, nil
}

// Category returns the category: both tools in every main turn whose
// context does not bind "todo" to false.
func (c *Category) Category() tool.Category {
	return tool.Category{Name: Binding, Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		if on, named := t.Bindings[Binding]; named && !on {
			return nil, nil
		}
		return c.tools, nil
	}}
}

// Item is one entry of the list.
type Item struct {
	Content string `json:"content" jsonschema:"description=What to do\\, in a few words.,minLength=1,maxLength=500"`
	Status  string `json:"status" jsonschema:"description=pending\\, in_progress (being worked on now) or completed.,enum=pending,enum=in_progress,enum=completed"`
}

// WriteParams are todo_write's parameters.
type WriteParams struct {
	Items []Item `json:"items" jsonschema:"description=The whole list\\, in order. It replaces the stored list: include every item\\, not only the changed ones. An empty list clears it."`
}

// ReadParams are todo_read's parameters: none.
type ReadParams struct{}

// List is the stored value of a turn's list.
type List struct {
	AgentID   string    `json:"agent_id"`
	TurnID    string    `json:"turn_id"`
	Items     []Item    `json:"items"`
	Step      int64     `json:"step"`
	CallID    string    `json:"call_id"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Key is the TODOS key of a turn's list.
func Key(agentID, turnID string) string { return "todo." + agentID + "." + turnID }

func (c *Category) build() []*tool.Tool {
	return []*tool.Tool{
		tool.Must(tool.Def[WriteParams]{
			Spec: tool.Spec{Name: WriteName,
				Description: "Write your todo list for this turn: every item with its status. Use it to plan multi-step work and to keep track " +
					"of progress; update it as items start and finish (one item in_progress at a time is usual). The list replaces the stored one.",
				ExecutionMode: tool.Sequential},
			Activity:          func(p WriteParams) string { return "Updating todo list: " + Summary(p.Items) },
			CompletedActivity: func(p WriteParams, _ tool.Result) string { return "Todo: " + Summary(p.Items) },
			Execute:           c.write,
		}),
		tool.Must(tool.Def[ReadParams]{
			Spec:     tool.Spec{Name: ReadName, Description: "Read your todo list for this turn, as last written with todo_write.", ReadOnly: true},
			Activity: func(ReadParams) string { return "Reading todo list" },
			Execute:  c.read,
		}),
	}
}

func callOf(ctx context.Context) (tool.Call, error) {
	call, ok := tool.CallFrom(ctx)
	if !ok || !protocol.ValidID(call.AgentID) || !protocol.ValidID(call.TurnID) {
		return call, tool.Errorf(tool.Internal, "the call carries no agent and turn identity")
	}
	return call, nil
}

func (c *Category) write(ctx context.Context, p WriteParams) (tool.Result, error) {
	call, err := callOf(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	if len(p.Items) > c.cfg.MaxItems {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "A todo list holds at most %d items; %d were given. Merge or drop some.", c.cfg.MaxItems, len(p.Items))
	}
	items := make([]Item, 0, len(p.Items))
	var problems []string
	for i, it := range p.Items {
		it.Content = strings.TrimSpace(it.Content)
		if it.Content == "" {
			problems = append(problems, fmt.Sprintf("- /items/%d/content: empty", i))
		}
		items = append(items, it)
	}
	if len(problems) > 0 {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "Nothing was written. Fix these and call %s again:\n%s", WriteName, strings.Join(problems, "\n"))
	}
	list := List{AgentID: call.AgentID, TurnID: call.TurnID, Items: items, Step: call.Step, CallID: call.CallID, UpdatedAt: time.Now().UTC()}
	data, err := json.Marshal(list)
	if err != nil {
		return tool.Result{}, err
	}
	if _, err := c.kv.Put(ctx, Key(call.AgentID, call.TurnID), data); err != nil {
		return tool.Result{}, fmt.Errorf("the todo list could not be stored: %w", err)
	}
	return tool.Result{Content: "Todo list saved. " + Render(items), Details: list}, nil
}

func (c *Category) read(ctx context.Context, _ ReadParams) (tool.Result, error) {
	call, err := callOf(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	list, err := c.Load(ctx, call.AgentID, call.TurnID)
	if err != nil {
		return tool.Result{}, err
	}
	if list == nil {
		return tool.Result{Content: "The todo list of this turn is empty: nothing was written with " + WriteName + " yet."}, nil
	}
	return tool.Result{Content: Render(list.Items), Details: list}, nil
}

// Load reads a turn's list; nil when none was written (or it expired).
func (c *Category) Load(ctx context.Context, agentID, turnID string) (*List, error) {
	e, err := c.kv.Get(ctx, Key(agentID, turnID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the todo list: %w", err)
	}
	var list List
	if err := json.Unmarshal(e.Value(), &list); err != nil {
		return nil, fmt.Errorf("the stored todo list is unreadable: %w", err)
	}
	return &list, nil
}

// Summary is the progress label of a list: "2/5 done · <first item in
// progress>", "empty" for no items.
func Summary(items []Item) string {
	if len(items) == 0 {
		return "empty"
	}
	done, current := 0, ""
	for _, it := range items {
		switch it.Status {
		case Completed:
			done++
		case InProgress:
			if current == "" {
				current = it.Content
			}
		}
	}
	s := fmt.Sprintf("%d/%d done", done, len(items))
	if current != "" {
		s += " · " + textclip.Runes(strings.TrimSpace(current), 60)
	}
	return s
}

// Render is the list as the model reads it.
func Render(items []Item) string {
	if len(items) == 0 {
		return "The todo list is empty."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Todo list (%s):", Summary(items))
	for i, it := range items {
		mark := "[ ]"
		switch it.Status {
		case InProgress:
			mark = "[>]"
		case Completed:
			mark = "[x]"
		}
		fmt.Fprintf(&b, "\n%d. %s %s", i+1, mark, it.Content)
	}
	return b.String()
}
