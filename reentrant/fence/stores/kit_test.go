package stores

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant/fence"
	"github.com/relock-go/relock/reentrant/fence/fencetest"
)

// TestConformance runs the conformance kit on the Guard over each real
// store.
func TestConformance(t *testing.T) {
	each(t, func(t *testing.T, s store, db *sql.DB) {
		g := guard(t, db, s.d, fence.Options{})
		_, err := db.ExecContext(context.Background(), fencetest.ValuesDDL(s.d, "kit_values"))
		require.NoError(t, err)
		fencetest.Run(t, "kit/", fencetest.NewGuardStore(g, s.d, "kit_values"))
	})
}
