package repull

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrEnded is wrapped by Keeper.Run when a pull ended by itself (the
// consumer deleted, the connection closed) before ctx did.
var ErrEnded = errors.New("the consumer's pull ended")

// Pull is one running pull: jetstream.ConsumeContext is one.
type Pull interface {
	// Drain stops asking for messages; those already delivered are still
	// handed over, then Closed is closed.
	Drain()
	Closed() <-chan struct{}
}

// Consumer is what Keeper asks of the consumer it keeps pulled
// (jetstream.Consumer has it).
type Consumer interface {
	Info(ctx context.Context) (*jetstream.ConsumerInfo, error)
}

// Keeper keeps one durable consumer pulled. The goroutine that takes the
// pull's messages calls Taking before it takes one and Took after; the
// zero value with Consumer set is ready.
type Keeper struct {
	Consumer Consumer
	// Name says which consumer, in errors and the log ("stream > durable").
	Name   string
	Logger *slog.Logger
	// Every is how often the pull's progress is looked at (250 ms): a
	// stranded pull is pulled again within about two of it.
	Every time.Duration
	// Linger bounds how long a stop waits for the drained pull to close,
	// that is for the message being taken to be done with; 0 waits until
	// it is. A taker that may not heed the stop (a handler that ignores
	// its context) gets a bound, past which it is left to finish alone.
	Linger time.Duration

	taken  atomic.Uint64
	taking atomic.Bool
}

// Taking says a message is being taken: while it is, the pull is not
// looked at (a taker that waits for room, as bus.Consumer's does for a
// free handler, leaves steps stored with no request waiting by design).
func (k *Keeper) Taking() { k.taking.Store(true) }

// Took says the message is taken.
func (k *Keeper) Took() {
	k.taken.Add(1)
	k.taking.Store(false)
}

// Run starts a pull with start and keeps one running until ctx ends:
// then it drains the pull, waits until it is closed (at most Linger, when
// set), and returns nil. A
// stranded pull is drained (what it had delivered is still handed over),
// and another is started, with a warning. An error of start is returned
// as it is; a pull that ends by itself before ctx does is ErrEnded.
func (k *Keeper) Run(ctx context.Context, start func() (Pull, error)) error {
	for {
		p, err := start()
		if err != nil {
			return err
		}
		stranded, err := k.watch(ctx, p)
		if err != nil {
			return err
		}
		select {
		case <-p.Closed():
		default:
			p.Drain()
			if !stranded && k.Linger > 0 {
				select {
				case <-p.Closed():
				case <-time.After(k.Linger):
					k.log().Warn("stopped; the message being taken is left to finish alone", "consumer", k.Name, "waited", k.Linger)
				}
				return nil
			}
			<-p.Closed()
		}
		if !stranded {
			return nil
		}
		k.log().Warn("the pull had stopped with steps stored; pulling again", "consumer", k.Name)
	}
}

// Messages is a pull of nats.go's Messages iterator: a goroutine takes
// its messages with take, one at a time, until it is closed (drained,
// stopped, or the connection closed).
func (k *Keeper) Messages(it jetstream.MessagesContext, take func(jetstream.Msg)) Pull {
	p := &iterator{it: it, closed: make(chan struct{})}
	go func() {
		defer close(p.closed)
		for {
			msg, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				k.log().Warn("pulling", "consumer", k.Name, "err", err)
				continue
			}
			k.Taking()
			take(msg)
			k.Took()
		}
	}()
	return p
}

type iterator struct {
	it     jetstream.MessagesContext
	closed chan struct{}
}

func (p *iterator) Drain()                  { p.it.Drain() }
func (p *iterator) Closed() <-chan struct{} { return p.closed }

// watch waits until ctx ends (false), p ends by itself (ErrEnded) or p
// is stranded (true).
func (k *Keeper) watch(ctx context.Context, p Pull) (bool, error) {
	check := time.NewTicker(cmp.Or(k.Every, 250*time.Millisecond))
	defer check.Stop()
	seen, moved := k.taken.Load(), false
	closed := p.Closed()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-closed:
			if ctx.Err() != nil {
				return false, nil
			}
			return false, fmt.Errorf("pulling from %s: %w", k.Name, ErrEnded)
		case <-check.C:
			// Asked once per burst, when the messages stop coming: an idle
			// consumer costs the server nothing.
			if n := k.taken.Load(); n != seen || k.taking.Load() {
				seen, moved = n, true
				continue
			}
			if !moved {
				continue
			}
			moved = false
			if k.stranded(ctx) {
				return true, nil
			}
		}
	}
}

// stranded tells whether the server holds messages for the consumer and
// no pull request to deliver them on, while nothing is being taken. The
// state lasts (nothing arrives to change it), so one look after the last
// message suffices; a request that waits on another worker's pull
// counts too, and then that worker takes the messages.
func (k *Keeper) stranded(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := k.Consumer.Info(ictx)
	if err != nil {
		return false
	}
	return info.NumPending > 0 && info.NumWaiting == 0
}

func (k *Keeper) log() *slog.Logger {
	if k.Logger != nil {
		return k.Logger
	}
	return slog.Default()
}
