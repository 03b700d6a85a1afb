package enqueue

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

type valueKind struct{}

func (valueKind) Kind() string { return "by.value" }

type pointerKind struct{ name string }

// Kind reads its receiver: TypeKind must call it on a value, never on nil.
func (p *pointerKind) Kind() string { return "by.pointer" + p.name }

type noKind struct{}

// A type's kind is read on a zero value, or a new one for a pointer type
// whose Kind reads its receiver; a type without Kind has none.
func TestTypeKind(t *testing.T) {
	k, ok := TypeKind[valueKind]()
	assert.True(t, ok)
	assert.Equal(t, "by.value", k)
	k, ok = TypeKind[*pointerKind]()
	assert.True(t, ok)
	assert.Equal(t, "by.pointer", k)
	_, ok = TypeKind[noKind]()
	assert.False(t, ok)
	_, ok = TypeKind[pointerKind]()
	assert.False(t, ok, "Kind is the pointer's: the value type is no Kinded")
	assert.Equal(t, "enqueue.noKind", TypeName[noKind]())
	assert.Equal(t, "*enqueue.pointerKind", TypeName[*pointerKind]())
}
