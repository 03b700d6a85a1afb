package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// control.lua: each control is a field of the meta hash, set or removed;
// a queue that does not exist is made only when asked to, and then
// registered.
func TestControlScript(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		meta   hash // before, besides name and registered
		op     ControlOp
		n      int
		per    time.Duration
		create bool
		want   hash // after, besides name and registered
	}{
		{"pause", hash{}, Pause, 0, 0, false, hash{"paused": "1"}},
		{"resume", hash{"paused": "1", "limit": "2"}, Resume, 0, 0, false, hash{"limit": "2"}},
		{"limit", hash{"limit": "2"}, Limit, 5, 0, false, hash{"limit": "5"}},
		{"no limit", hash{"limit": "2", "paused": "1"}, Limit, 0, 0, false, hash{"paused": "1"}},
		{"rate", hash{}, Rate, 10, time.Second, false, hash{"rate": "10", "per": "1000"}},
		{"no rate", hash{"rate": "10", "per": "1000", "wx": "1"}, Rate, 0, 0, false, hash{"wx": "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newScriptEnv(t, "control.lua")
			meta := hash{"name": "q", "registered": "1"}
			for f, v := range tc.meta {
				meta[f] = v
			}
			e.seed(keyState{"meta": meta, "waiting": list{"1:x"}})
			require.NoError(t, e.s.Control(e.ctx, "q", tc.op, tc.n, tc.per, tc.create))
			want := hash{"name": "q", "registered": "1"}
			for f, v := range tc.want {
				want[f] = v
			}
			e.expect(keyState{"meta": want, "waiting": list{"1:x"}})
		})
	}
	t.Run("a queue that does not exist", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "control.lua")
		require.ErrorIs(t, e.s.Control(e.ctx, "q", Pause, 0, 0, false), ErrNoQueue)
		e.expect(keyState{})
		require.NoError(t, e.s.Control(e.ctx, "q", Pause, 0, 0, true))
		e.expect(keyState{"meta": hash{"name": "q", "registered": "1", "paused": "1"}, "queues": set{"q"}})
	})
	t.Run("a value the scripts cannot hold", func(t *testing.T) {
		t.Parallel()
		e := newScriptEnv(t, "control.lua")
		seeded := keyState{"meta": hash{"name": "q", "registered": "1", "limit": "2"}}
		e.seed(seeded)
		require.ErrorContains(t, e.s.Control(e.ctx, "q", Limit, -1, 0, false), "not a whole number")
		e.expect(seeded)
	})
}
