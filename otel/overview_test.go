package relockotel_test

import (
	"os"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	relockotel "github.com/relock-go/relock/otel"
	"github.com/relock-go/relock/reentrant"
)

// newLocks is the package overview's snippet (doc.go), compiled here;
// TestOverviewSnippet checks that the overview still shows this very code.
func newLocks(rdb rueidis.Client, mp metric.MeterProvider, tp trace.TracerProvider) (*reentrant.Client, error) {
	hooks, err := relockotel.NewHooks(relockotel.WithMeterProvider(mp), relockotel.WithTracerProvider(tp))
	if err != nil {
		return nil, err
	}
	return reentrant.New(rdb, reentrant.Options{Hooks: hooks})
}

var _ = newLocks

func TestOverviewSnippet(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("overview_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	for _, line := range strings.Split(string(doc), "\n") {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			block = append(block, "\t"+code)
		}
	}
	if len(block) == 0 {
		t.Fatal("the overview shows no code")
	}
	// The overview's code is this file's, indented one tab more.
	want := strings.TrimPrefix(strings.Join(block, "\n"), "\t")
	want = strings.ReplaceAll(want, "\n\t", "\n")
	if !strings.Contains(string(src), want) {
		t.Fatalf("the overview shows code this test does not compile:\n%s", want)
	}
}
