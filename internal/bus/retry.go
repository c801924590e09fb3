package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Retry is how the tools make their own JetStream requests (bucket reads
// and writes, stream reads, their publishes): each attempt is bounded by
// AttemptTimeout, never by the call's deadline alone (a request whose
// answer is lost in a leader change or a reconnect would otherwise wait
// out the minutes a call may have left), and an attempt that fails for a
// transient reason (no leader, no responders, a timeout, a reconnect, as
// Publisher classifies them) is tried again with exponential backoff for
// up to MaxElapsed, as Publisher does. An error that is the caller's own
// logic (a compare-and-set conflict, a missing key) is returned at once.
// The zero value works.
type Retry struct {
	// AttemptTimeout bounds one attempt (5 s).
	AttemptTimeout time.Duration
	// MaxElapsed bounds the retries of one request (30 s).
	MaxElapsed time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Do calls op, with a context bounded by the attempt timeout, until it
// returns nil or an error that is not transient, ctx ends or MaxElapsed
// has passed. what names the request in the log. An op whose earlier
// attempt failed may find that attempt's effect: writes must be
// idempotent or recognise their own earlier success (KV does both).
func (r Retry) Do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	attempt := func() error {
		actx, cancel := context.WithTimeout(ctx, r.attemptTimeout())
		defer cancel()
		return op(actx)
	}
	err := attempt()
	if err == nil || !r.transient(ctx, err) {
		return err
	}
	// As Publisher does: only a request that must be tried again sets up
	// the backoff; the failed attempt above is its first.
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = r.MaxElapsed
	if b.MaxElapsedTime <= 0 {
		b.MaxElapsedTime = 30 * time.Second
	}
	last, first := err, err
	err = backoff.RetryNotify(func() error {
		if first != nil {
			e := first
			first = nil
			return e
		}
		err := attempt()
		if err != nil {
			last = err
			if !r.transient(ctx, err) {
				return backoff.Permanent(err)
			}
		}
		return err
	}, backoff.WithContext(b, ctx), func(err error, d time.Duration) {
		r.logger().Warn("request failed; retrying", "what", what, "retry_in", d, "err", err)
	})
	if err != nil && ctx.Err() != nil && last != nil && !errors.Is(last, ctx.Err()) {
		// backoff reports only the context's end: keep why the last
		// attempt failed, which is what a reader wants to know.
		return fmt.Errorf("%w (last attempt: %w)", context.Cause(ctx), last)
	}
	return err
}

// transient reports whether err, from an attempt under ctx, may pass if
// the request is tried again: what Publisher retries, and a cluster that
// cannot handle the request yet (a leader change of a bucket's stream).
// An attempt that ran out of time is transient; ctx ending is not.
func (r Retry) transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, errWatchStalled) || errors.Is(err, errWatchEnded) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeClusterNotLeader {
		return true
	}
	return transient(err)
}

// errCodeClusterNotLeader is the server's JSClusterNotLeaderErr ("JetStream
// cluster can not handle request"), answered while a stream's leader is
// being elected.
const errCodeClusterNotLeader jetstream.ErrorCode = 10009

func (r Retry) attemptTimeout() time.Duration {
	if r.AttemptTimeout > 0 {
		return r.AttemptTimeout
	}
	return 5 * time.Second
}

func (r Retry) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// KV returns kv, a bucket of js's own JetStream domain, with every read
// and write made under r.
//
// A read that finds no key asks the leader of the bucket's stream again:
// reads are direct gets, which any replica answers, and a replica that is
// behind (catching up after a restart, in a leader change) misses a
// record that was written and acknowledged moments ago, by this worker or
// another. The leader has every write it acknowledged.
//
// A create, update or delete whose earlier attempt failed in a way that
// may have hidden its success (its answer lost) and that then conflicts,
// checks whether the key holds what it wrote (or, for a delete, nothing):
// if so, that earlier attempt succeeded and the write reports success.
// The values written must therefore tell one write from another (the
// records of the tools carry times and ids). Watches, listings and the
// rest are kv's own; Watch reads one to its end under r.
func (r Retry) KV(js jetstream.JetStream, kv jetstream.KeyValue) jetstream.KeyValue {
	if k, ok := kv.(retryKV); ok {
		kv = k.KeyValue
	}
	return retryKV{KeyValue: kv, nc: js.Conn(), r: r}
}

type retryKV struct {
	jetstream.KeyValue
	nc *nats.Conn
	r  Retry
}

func (k retryKV) Get(ctx context.Context, key string) (e jetstream.KeyValueEntry, err error) {
	err = k.r.Do(ctx, "reading "+key, func(ctx context.Context) (err error) {
		e, err = k.KeyValue.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			e, err = k.leaderGet(ctx, key)
		}
		return err
	})
	return e, err
}

// leaderGet reads the last value of key from the stream's leader (the
// stream message API, which only the leader answers), as KV.Get would
// without direct gets.
func (k retryKV) leaderGet(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{"$KV." + k.Bucket() + "." + key})
	if err != nil {
		return nil, err
	}
	m, err := k.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+k.Bucket(), req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Seq    uint64    `json:"seq"`
			Header []byte    `json:"hdrs"`
			Data   []byte    `json:"data"`
			Time   time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("%w: %v", jetstream.ErrInvalidJSAck, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrKeyNotFound
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, jetstream.ErrKeyNotFound
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, err
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return nil, jetstream.ErrKeyNotFound
		}
	}
	return leaderEntry{bucket: k.Bucket(), key: key, value: resp.Message.Data, rev: resp.Message.Seq, created: resp.Message.Time}, nil
}

// leaderEntry is a value read by leaderGet.
type leaderEntry struct {
	bucket, key string
	value       []byte
	rev         uint64
	created     time.Time
}

func (e leaderEntry) Bucket() string                  { return e.bucket }
func (e leaderEntry) Key() string                     { return e.key }
func (e leaderEntry) Value() []byte                   { return e.value }
func (e leaderEntry) Revision() uint64                { return e.rev }
func (e leaderEntry) Created() time.Time              { return e.created }
func (e leaderEntry) Delta() uint64                   { return 0 }
func (e leaderEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

func (k retryKV) GetRevision(ctx context.Context, key string, revision uint64) (e jetstream.KeyValueEntry, err error) {
	err = k.r.Do(ctx, "reading "+key, func(ctx context.Context) (err error) {
		e, err = k.KeyValue.GetRevision(ctx, key, revision)
		return err
	})
	return e, err
}

// Put writes the same value again when retried, which is the same.
func (k retryKV) Put(ctx context.Context, key string, value []byte) (rev uint64, err error) {
	err = k.r.Do(ctx, "writing "+key, func(ctx context.Context) (err error) {
		rev, err = k.KeyValue.Put(ctx, key, value)
		return err
	})
	return rev, err
}

func (k retryKV) PutString(ctx context.Context, key string, value string) (uint64, error) {
	return k.Put(ctx, key, []byte(value))
}

func (k retryKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (rev uint64, err error) {
	retried := false
	err = k.r.Do(ctx, "creating "+key, func(ctx context.Context) (err error) {
		rev, err = k.KeyValue.Create(ctx, key, value, opts...)
		if retried && errors.Is(err, jetstream.ErrKeyExists) {
			if own, ok := k.holds(ctx, key, value); ok {
				rev = own
				return nil
			}
		}
		retried = true
		return err
	})
	return rev, err
}

func (k retryKV) Update(ctx context.Context, key string, value []byte, revision uint64) (rev uint64, err error) {
	retried := false
	err = k.r.Do(ctx, "updating "+key, func(ctx context.Context) (err error) {
		rev, err = k.KeyValue.Update(ctx, key, value, revision)
		if retried && errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if own, ok := k.holds(ctx, key, value); ok {
				rev = own
				return nil
			}
		}
		retried = true
		return err
	})
	return rev, err
}

func (k retryKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	retried := false
	return k.r.Do(ctx, "deleting "+key, func(ctx context.Context) error {
		err := k.KeyValue.Delete(ctx, key, opts...)
		if retried && errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// Only a delete with an expected revision conflicts: the
			// earlier attempt deleted the key when it holds nothing now.
			if _, gerr := k.leaderGet(ctx, key); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				return nil
			}
		}
		retried = true
		return err
	})
}

func (k retryKV) Purge(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	return k.r.Do(ctx, "purging "+key, func(ctx context.Context) error {
		return k.KeyValue.Purge(ctx, key, opts...)
	})
}

// holds reports whether key's value is value, and at which revision. The
// leader is asked: a replica that is behind would answer with an older
// value, or none, and a write that landed would be taken for a conflict.
func (k retryKV) holds(ctx context.Context, key string, value []byte) (uint64, bool) {
	e, err := k.leaderGet(ctx, key)
	if err != nil || !bytes.Equal(e.Value(), value) {
		return 0, false
	}
	return e.Revision(), true
}

// Watch's attempts fail with these: errWatchStalled when the watch
// stopped delivering (an ordered consumer whose server went away can be
// silent rather than fail) and errWatchEnded when it was closed, both
// transient; errStop when fn failed, which is not.
var (
	errWatchStalled = errors.New("the watch delivered nothing for the attempt timeout")
	errWatchEnded   = errors.New("the watch ended early")
	errStop         = errors.New("stopped by the reader")
)

// Watch reads one watch to the end of the values it starts with (the
// nil entry), handing each entry to fn. start opens the watch, with
// whatever filter and options it likes, under a context that ends with
// the attempt. An attempt fails, and is tried again under r, when the
// watch cannot be opened for a transient reason, ends early, or
// delivers nothing for the attempt timeout: start is then called again,
// to resume where fn got to or to start over (fn sees entries again).
// An error from fn ends the read.
func (r Retry) Watch(ctx context.Context, what string, start func(ctx context.Context) (jetstream.KeyWatcher, error), fn func(jetstream.KeyValueEntry) error) error {
	// The attempt's own deadline is not Do's: a long listing may take
	// longer than an attempt, as long as it keeps delivering.
	long := r
	long.AttemptTimeout = 24 * time.Hour
	var fnErr error
	err := long.Do(ctx, what, func(actx context.Context) error {
		wctx, cancel := context.WithCancelCause(actx)
		defer cancel(nil)
		w, err := start(wctx)
		if err != nil {
			return err
		}
		defer func() { _ = w.Stop() }()
		idle := time.NewTimer(r.attemptTimeout())
		defer idle.Stop()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return errWatchEnded
				}
				if e == nil {
					return nil
				}
				if err := fn(e); err != nil {
					fnErr = err
					return errStop
				}
				idle.Reset(r.attemptTimeout())
			case <-idle.C:
				return errWatchStalled
			case <-actx.Done():
				return context.Cause(actx)
			}
		}
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// Retry is p's policy as a Retry, for the requests that go with its
// publishes (a claim's create and read, in package turnstate).
func (p *Publisher) Retry() Retry {
	return Retry{AttemptTimeout: p.AttemptTimeout, MaxElapsed: p.MaxElapsed, Logger: p.Logger}
}

// PublishMsg publishes m to a stream as the events are published:
// confirmed by the server, and tried again while the failure is
// transient. It is for writes whose bytes and headers the caller makes
// (a call key of TURN_STATE, written as a message of its bucket's
// stream); m's headers say what makes a retry that did land harmless.
func (p *Publisher) PublishMsg(ctx context.Context, m *nats.Msg) error {
	return p.publish(ctx, m)
}
