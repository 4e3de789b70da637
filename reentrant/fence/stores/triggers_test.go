package stores

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// documentedTrigger returns the statements of docs/fencing.md's SQL block
// marked "-- relock trigger: name", one per CREATE.
func documentedTrigger(t *testing.T, name string) []string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/fencing.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(doc), "```sql\n-- relock trigger: "+name+"\n")
	require.True(t, ok, "docs/fencing.md has no trigger block for %s", name)
	block, _, _ = strings.Cut(block, "```")
	var stmts []string
	for _, part := range strings.Split("\n"+block, "\nCREATE ")[1:] {
		stmts = append(stmts, "CREATE "+strings.TrimSpace(part))
	}
	return stmts
}

// The triggers docs/fencing.md gives, run as given on each store: a write
// that sets a smaller fence_token than the row's is refused, whoever sends
// it, and changes nothing; the same or a larger token writes; a write that
// does not set the token passes (the documented gap).
func TestDocumentedTriggers(t *testing.T) {
	each(t, func(t *testing.T, st store, db *sql.DB) {
		ctx := context.Background()
		for _, stmt := range documentedTrigger(t, st.name) {
			_, err := db.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
		p := func(n int) string {
			if st.name == "postgresql" {
				return "$" + string(rune('0'+n))
			}
			return "?"
		}
		update := "UPDATE accounts SET balance = " + p(1) + ", fence_token = " + p(2) + " WHERE id = 'a'"
		_, err := db.ExecContext(ctx, "INSERT INTO accounts (id, balance, fence_token) VALUES ('a', 10, 5)")
		require.NoError(t, err)
		_, err = db.ExecContext(ctx, update, 20, 7)
		require.NoError(t, err, "a larger token writes")
		_, err = db.ExecContext(ctx, update, 30, 7)
		require.NoError(t, err, "the same token writes again")
		_, err = db.ExecContext(ctx, update, 99, 6)
		require.Error(t, err, "a smaller token is refused")
		assert.Contains(t, err.Error(), "stale token")
		var balance, token int64
		require.NoError(t, db.QueryRowContext(ctx, "SELECT balance, fence_token FROM accounts WHERE id = 'a'").Scan(&balance, &token))
		assert.Equal(t, int64(30), balance, "the stale write changed nothing")
		assert.Equal(t, int64(7), token)
		_, err = db.ExecContext(ctx, "UPDATE accounts SET balance = 0 WHERE id = 'a'")
		assert.NoError(t, err, "a write that does not set the token is not checked: the documented gap")
	})
}
