package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groups_list.lua: each group with processes or ready, once, with its
// tasks waiting, slots running, own limit and readiness, the key
// unescaped; a group not ready with tasks waiting is held back. Only
// reads.
func TestGroupsReadScript(t *testing.T) {
	t.Parallel()
	e := newScriptEnv(t, "groups_list.lua")
	seeded := keyState{
		"meta": hash{"name": "q", "glimit": "5"},
		"gwait": zset{member("a", "61,ga:1"): 0, member("a", "62,ga:2"): 0, member("b%2C", "63,gb%2C:3"): 0,
			member("c", "64,gc:4"): 0, member("c", "65,gc:5"): 0, member("c", "66,gc:6"): 0},
		"gready":   zset{"a": 2, "b%2C": 1},
		"grunning": hash{"a": "1", "c": "1", "d": "2"},
		"glimits":  hash{"c": "1", "z": "3"},
	}
	e.seed(seeded)
	got, err := e.s.GroupsRead(e.ctx, "q", 10)
	require.NoError(t, err)
	assert.ElementsMatch(t, []GroupState{
		{Key: "a", Waiting: 2, Running: 1, Ready: true},
		{Key: "b,", Waiting: 1, Ready: true},
		{Key: "c", Waiting: 3, Running: 1, Limit: 1},
		{Key: "d", Running: 2},
	}, got.Groups)
	got.Groups = nil
	assert.Equal(t, GroupsState{Ready: 2, Running: 3, DefaultLimit: 5}, got)

	// Bounded: one group of each set, the next ready first.
	got, err = e.s.GroupsRead(e.ctx, "q", 1)
	require.NoError(t, err)
	assert.True(t, got.Partial)
	require.Len(t, got.Groups, 2, "one running, one ready: %v", got.Groups)
	assert.Equal(t, "b,", got.Groups[1].Key, "the ready group served next")
	e.expect(seeded)
}
