package stores

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant/fence"
)

// costEnv runs TestGuardCost: RELOCK_FENCE_COST=ROUNDS (docs/fencing.md).
const costEnv = "RELOCK_FENCE_COST"

// TestGuardCost measures what the guard adds to a write: on each store, a
// single-row UPDATE in a transaction of its own, bare and inside Do, in
// alternating rounds of 1,000 writes each; it prints each way's p50 and
// p99, the median of the rounds with their range. One goroutine, one
// connection, loopback. Run only when asked (it is a measurement, not a
// test): RELOCK_FENCE_COST=10 go test -run TestGuardCost -v.
func TestGuardCost(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv(costEnv))
	if rounds == 0 {
		t.Skipf("a measurement: %s=ROUNDS runs it", costEnv)
	}
	const writes = 1000
	each(t, func(t *testing.T, st store, db *sql.DB) {
		ctx := context.Background()
		db.SetMaxOpenConns(1)
		g := guard(t, db, st.d, fence.Options{})
		_, err := db.Exec("CREATE TABLE counters (id VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL)")
		require.NoError(t, err)
		_, err = db.Exec("INSERT INTO counters (id, n) VALUES ('c', 0)")
		require.NoError(t, err)
		update := "UPDATE counters SET n = n + 1 WHERE id = 'c'"
		bare := func(context.Context) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, update); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}
		guarded := func(ctx context.Context) error {
			return g.Do(ctx, "counter:c", 1796641106028101, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, update)
				return err
			})
		}
		type stat struct{ p50, p99 []time.Duration }
		var stats [2]stat
		for round := range 2 * rounds {
			way := round % 2
			if round/2%2 == 1 { // alternate which goes first
				way = 1 - way
			}
			f := []func(context.Context) error{bare, guarded}[way]
			took := make([]time.Duration, writes)
			for i := range took {
				start := time.Now()
				require.NoError(t, f(ctx))
				took[i] = time.Since(start)
			}
			slices.Sort(took)
			stats[way].p50 = append(stats[way].p50, took[writes/2])
			stats[way].p99 = append(stats[way].p99, took[writes*99/100])
		}
		med := func(ds []time.Duration) string {
			slices.Sort(ds)
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
			return fmt.Sprintf("%.0f µs [%.0f-%.0f]", us(ds[len(ds)/2]), us(ds[0]), us(ds[len(ds)-1]))
		}
		t.Logf("| %s | %s | %s | %s | %s |", st.name, med(stats[0].p50), med(stats[1].p50), med(stats[0].p99), med(stats[1].p99))
	})
}
