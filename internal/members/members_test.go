package members

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSetAddsRemovesAndSaysTheLast(t *testing.T) {
	var s Set[string]
	assert.Equal(t, "", s.One(), "none")
	s.Add("a")
	s.Add("b")
	s.Add("a")
	assert.ElementsMatch(t, []string{"a", "b"}, s.List())
	assert.Equal(t, 2, s.Len())
	assert.Contains(t, []string{"a", "b"}, s.One())
	assert.False(t, s.Remove("a"), "b is left")
	assert.True(t, s.Remove("b"), "the last")
	assert.Empty(t, s.List())
	assert.Zero(t, s.Len())
}
