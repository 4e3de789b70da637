package chaos

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// traceEnv names a folder where each worker writes a line per Redis
// command it sent (with its reply), per message it heard and per hook the
// library called, on CLOCK_MONOTONIC: what oracle E's reports are read
// against when a wait is unexplained. Off by default; a 250,000-acquisition
// run writes about 100 MB.
const traceEnv = "RELOCK_CHAOS_TRACE"

// tracer writes one worker's trace.
type tracer struct {
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File
}

func newTracer(dir string, id int) (*tracer, error) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.trace", id)))
	if err != nil {
		return nil, err
	}
	return &tracer{w: bufio.NewWriterSize(f, 1<<16), f: f}, nil
}

// line writes "start end what" (end may be 0 for an instant).
func (t *tracer) line(start, end int64, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "%d %d %s\n", start, end, fmt.Sprintf(format, args...))
}

func (t *tracer) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.w.Flush()
	t.f.Close()
}

// hooks reports the library's view of waits and holds.
func (t *tracer) hooks() reentrant.Hooks {
	return reentrant.Hooks{
		AcquireStarted: func(_ context.Context, a reentrant.Acquire) { t.line(mono(), 0, "acquire-start %s", a.Kind) },
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) {
			t.line(mono(), 0, "acquire-end %s attempts=%d held=%v err=%v", a.Kind, a.Attempts, a.Held, a.Err)
		},
		HoldEnded: func(_ context.Context, e reentrant.HoldEnd) { t.line(mono(), 0, "hold-end %+v", e) },
		Woken:     func(_ context.Context, kind reentrant.Kind, _ string) { t.line(mono(), 0, "woken %s", kind) },
		Renewed: func(r reentrant.Renewal) {
			if r.Failed > 0 {
				t.line(mono(), 0, "renewal failed=%d err=%v", r.Failed, r.Err)
			}
		},
	}
}

// tracedClient is a rueidis client that traces what goes through it.
type tracedClient struct {
	rueidis.Client
	t *tracer
}

func (c tracedClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	what := short(cmd.Commands())
	start := mono()
	res := c.Client.Do(ctx, cmd)
	c.t.line(start, mono(), "%s -> %s", what, reply(res))
	return res
}

func (c tracedClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	whats := make([]string, len(cmds))
	for i, cmd := range cmds {
		whats[i] = short(cmd.Commands())
	}
	start := mono()
	res := c.Client.DoMulti(ctx, cmds...)
	end := mono()
	for i := range res {
		c.t.line(start, end, "%s -> %s", whats[i], reply(res[i]))
	}
	return res
}

func (c tracedClient) Dedicate() (rueidis.DedicatedClient, func()) {
	d, release := c.Client.Dedicate()
	return tracedDedicated{DedicatedClient: d, t: c.t}, release
}

// tracedDedicated traces the messages a subscription hears.
type tracedDedicated struct {
	rueidis.DedicatedClient
	t *tracer
}

func (d tracedDedicated) SetPubSubHooks(h rueidis.PubSubHooks) <-chan error {
	// Either hook may be nil (a connection that follows a key's messages
	// and has no use for its subscriptions' counts): trace, then pass on.
	onMessage, onSubscription := h.OnMessage, h.OnSubscription
	h.OnMessage = func(m rueidis.PubSubMessage) {
		d.t.line(mono(), 0, "message %s %s", m.Channel, m.Message)
		if onMessage != nil {
			onMessage(m)
		}
	}
	h.OnSubscription = func(s rueidis.PubSubSubscription) {
		d.t.line(mono(), 0, "%s %s %d", s.Kind, s.Channel, s.Count)
		if onSubscription != nil {
			onSubscription(s)
		}
	}
	return d.DedicatedClient.SetPubSubHooks(h)
}

// short is a command with its script body or SHA left out.
func short(args []string) string {
	if len(args) > 2 && (strings.EqualFold(args[0], "EVALSHA") || strings.EqualFold(args[0], "EVAL")) {
		args = append([]string{args[0][:4]}, args[2:]...)
	}
	return strings.Join(args, " ")
}

func reply(res rueidis.RedisResult) string {
	if err := res.Error(); err != nil {
		return "error: " + err.Error()
	}
	v, err := res.ToAny()
	if err != nil {
		return "?" + err.Error()
	}
	return fmt.Sprint(v)
}
