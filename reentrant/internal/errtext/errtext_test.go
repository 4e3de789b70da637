package errtext

import (
	"errors"
	"fmt"
	"testing"
)

func TestWrapSaysRelockOnce(t *testing.T) {
	sentinel := errors.New("no progress")
	cause := fmt.Errorf("relock: %q held by o: %w", "job", sentinel)
	err := Wrap(fmt.Sprintf("relock: unlock %q", "job"), cause)
	if got, want := err.Error(), `relock: unlock "job": "job" held by o: no progress`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, sentinel) || !errors.Is(err, cause) {
		t.Fatal("Wrap hides what it wraps")
	}
	if got := Wrap("relock: x", errors.New("plain")).Error(); got != "relock: x: plain" {
		t.Fatalf("got %q", got)
	}
}
