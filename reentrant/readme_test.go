package reentrant_test

import (
	"context"
	"errors"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// The snippets of docs/guide.md (the README's lock calls in full),
// compiled and run here; TestDocSnippets checks that the guide still shows
// this very code, and that the README's first lock is
// examples/firstlock's, which CI runs.

// readmeOption is the guide's rueidis option. TestACLUsers connects
// with it (to its own server, as its own user), so the documented
// least-privilege user and the README's client cannot drift apart.
func readmeOption() rueidis.ClientOption {
	opt := rueidis.ClientOption{
		InitAddress:  []string{"127.0.0.1:6379"},
		DisableCache: true, // relock reads nothing through the cache, and a least-privilege ACL user may not turn it on
	}
	return opt
}

var errBusy = errors.New("busy")

func chargeOrder(ctx context.Context, rdb rueidis.Client, charge func(context.Context) error) error {
	locks, err := reentrant.New(rdb, reentrant.Options{}) // one per rueidis client, shared
	if err != nil {
		return err
	}
	defer locks.Close()

	mu := locks.Lock("order:42") // a cheap handle
	held, err := mu.Lock(ctx)    // waits while someone else holds it
	if err != nil {
		return err // ctx ended, or Redis could not be reached
	}
	defer mu.Unlock(held) // the context Lock returned, not ctx

	// Work under the lock with held: it is cancelled if the lock is lost.
	return charge(held)
}

func tryCharge(ctx context.Context, mu *reentrant.Lock, charge func(context.Context) error) error {
	held, ok, err := mu.TryLock(ctx, reentrant.WaitAtMost(5*time.Second), reentrant.LeaseFor(10*time.Second))
	if err != nil {
		return err // Redis could not be reached, or refused
	}
	if !ok {
		return errBusy // held by someone else for all of 5s
	}
	defer mu.Unlock(held)
	return charge(held)
}

func nightly(ctx context.Context, locks *reentrant.Client, report func(context.Context) error) error {
	return locks.Do(ctx, "nightly-report", func(ctx context.Context) error {
		return report(ctx) // ctx is cancelled if the lock is lost
	})
}

func fanOut(held context.Context, mu *reentrant.Lock, followUp func(context.Context)) {
	go func() {
		// A new owner: it waits its turn, as a new Java thread would, and
		// is not cancelled when the caller's hold ends.
		ctx, err := mu.Lock(reentrant.WithoutOwner(held))
		if err != nil {
			log.Printf("follow-up not run: %v", err)
			return
		}
		defer mu.Unlock(ctx)
		followUp(ctx)
	}()
}

// The snippets run, on miniredis.
func TestReadmeSnippetsRun(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := bg()
	var sawHeld bool
	require.NoError(t, chargeOrder(ctx, rdb, func(held context.Context) error {
		_, sawHeld = reentrant.OwnerFrom(held)
		return nil
	}))
	assert.True(t, sawHeld)

	locks, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	defer locks.Close()
	mu := locks.Lock("order:7")
	ran := false
	require.NoError(t, tryCharge(ctx, mu, func(context.Context) error { ran = true; return nil }))
	assert.True(t, ran)
	require.NoError(t, nightly(ctx, locks, func(context.Context) error { return nil }))

	// The goroutine's Lock, whether it starts before or after the caller's
	// Unlock, takes the lock as another owner and runs the follow-up.
	held, err := mu.Lock(ctx)
	require.NoError(t, err)
	caller, _ := reentrant.OwnerFrom(held)
	followed := make(chan reentrant.Owner, 1)
	fanOut(held, mu, func(ctx context.Context) {
		o, _ := reentrant.OwnerFrom(ctx)
		followed <- o
	})
	require.NoError(t, mu.Unlock(held))
	select {
	case o := <-followed:
		assert.NotEqual(t, caller, o, "the follow-up runs as a new owner")
	case <-time.After(20 * time.Second):
		t.Fatal("the follow-up never ran")
	}
}

var fence = regexp.MustCompile("(?s)```go\n(.*?)```")

// Every Go snippet in the README, the guide, the testing guide, the
// synchronizers guide and the package overviews is code that this
// package's tests compile (or CI runs): the guide's here, the README's in
// examples/firstlock, the synchronizers' in their examples (which run),
// the testing guide's in reentranttest, the overview's in overview_test.go.
func TestDocSnippets(t *testing.T) {
	sources := ""
	for _, f := range []string{"readme_test.go", "overview_test.go", "example_synchronizers_test.go", "reentranttest/example_test.go", "reentranttest/synctest_test.go", "reentranttest/settings_test.go", "../examples/firstlock/main.go"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		sources += string(b)
	}
	code := squash(sources)
	for _, doc := range []string{"../README.md", "../docs/guide.md", "../docs/testing.md", "../docs/synchronizers.md"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		blocks := fence.FindAllStringSubmatch(string(b), -1)
		require.NotEmpty(t, blocks, doc)
		for _, m := range blocks {
			assert.True(t, strings.Contains(code, squash(m[1])), "%s shows code no test compiles:\n%s", doc, m[1])
		}
	}
	for _, doc := range []string{"doc.go", "reentranttest/reentranttest.go"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, block := range commentCode(string(b)) {
			assert.True(t, strings.Contains(code, squash(block)), "%s's doc shows code no test compiles:\n%s", doc, block)
		}
	}
}

// commentCode returns the code blocks of a file's doc comments: runs of
// lines indented with a tab after "//".
func commentCode(src string) []string {
	var blocks []string
	var cur []string
	for _, line := range strings.Split(src, "\n") {
		switch {
		case strings.HasPrefix(line, "//\t"):
			cur = append(cur, strings.TrimPrefix(line, "//\t"))
		case line == "//" && len(cur) > 0:
			cur = append(cur, "")
		default:
			if len(cur) > 0 {
				blocks = append(blocks, strings.Join(cur, "\n"))
			}
			cur = nil
		}
	}
	return blocks
}

// squash drops indentation and blank lines, so a snippet matches the code
// it was cut from.
func squash(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
