package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/worqr/worqr"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	_, err := c.Enqueue(ctx, "orders", []byte("x"))
	require.NoError(t, err)

	out := b.ok("check").stdout
	assert.Regexp(t, `^0 problems \(.*\) in 1 queues, 0 workflows, \d+ keys, 1 nodes\n$`, out)
	clean := jsonOf[checkJSON](b, "check")
	assert.Zero(t, clean.Problems)
	assert.Equal(t, []string{}, clean.UnregisteredQueues, "empty lists are [], not null")
	assert.Nil(t, clean.Repaired)

	// Lose the queue's registry entry, as a hand-made mistake would.
	rdb := b.redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Srem().Key(b.prefix+":{r}:queues").Member("orders").Build()).Error())
	queues, err := c.Queues(ctx)
	require.NoError(t, err)
	require.Empty(t, queues)

	r := b.fails(exitFailure, "1 problems found (worqr check --repair fixes what it can)", "check")
	assert.Equal(t, []string{"FINDING", "WHAT"}, rows(r.stdout)[0])
	assert.Equal(t, []string{"unregistered queue", "orders"}, row(t, r.stdout, "unregistered queue"))
	assert.Contains(t, r.stdout, "1 problems (")

	r = b.fails(exitFailure, "1 problems found (see the report for what was repaired)", "check", "--repair", "--json")
	var rep checkJSON
	require.NoError(t, jsonDecode(r.stdout, &rep))
	assert.Equal(t, 1, rep.Problems)
	assert.Equal(t, []string{"orders"}, rep.UnregisteredQueues)
	require.NotNil(t, rep.Repaired)
	assert.Equal(t, []string{"orders"}, rep.Repaired.RegisteredQueues)

	queues, err = c.Queues(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"orders"}, queues)
	b.ok("check")
	out = b.ok("check", "--repair").stdout
	assert.Regexp(t, `(?m)^queues registered: +0$`, out)
}

// check reports the keys a workflow left without its flow hash, and
// --repair deletes them.
func TestCheckReportsALeftoverWorkflow(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := ctxT(t)
	rdb := b.redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(b.prefix+":{wf:gone}:steps").FieldValue().FieldValue("a", "q").Build()).Error())

	r := b.fails(exitFailure, "1 problems found", "check")
	assert.Equal(t, []string{"leftover workflow", "gone"}, row(t, r.stdout, "leftover workflow"))
	r = b.fails(exitFailure, "1 problems found", "check", "--repair", "--json")
	var rep checkJSON
	require.NoError(t, jsonDecode(r.stdout, &rep))
	assert.Equal(t, []string{"gone"}, rep.LeftoverWorkflows)
	assert.Equal(t, []string{"gone"}, rep.Repaired.DeletedWorkflows)
	assert.Equal(t, []workflowStepJSON{}, rep.StalledSteps)
	b.ok("check")
}

// check reports a control whose stored value the scripts cannot read, and
// exits 1.
func TestCheckReportsAnUnreadableControl(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	c, ctx := b.client(), ctxT(t)
	_, err := c.Enqueue(ctx, "orders", []byte("x"))
	require.NoError(t, err)
	rdb := b.redis()
	require.NoError(t, rdb.Do(ctx, rdb.B().Hset().Key(b.prefix+":{q:orders}:meta").FieldValue().FieldValue("limit", "9.2233720368547758e+18").Build()).Error())

	r := b.fails(exitFailure, "1 problems found", "check")
	assert.Equal(t, []string{"unreadable control", `queue "orders" limit = "9.2233720368547758e+18"`}, row(t, r.stdout, "unreadable control"))
	r = b.fails(exitFailure, "1 problems found", "check", "--json")
	var rep checkJSON
	require.NoError(t, jsonDecode(r.stdout, &rep))
	assert.Equal(t, []controlJSON{{Queue: "orders", Control: "limit", Value: "9.2233720368547758e+18"}}, rep.UnreadableControls)
}

// fillReport sets every field of the struct v points to: a number to
// size(i), field i's, and a list to size(i) entries whose strings name
// the field. Nested structs (a list's entries) have their strings and
// numbers set the same way.
func fillReport(v reflect.Value, size func(int) int) {
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(size(i)))
		case reflect.Slice:
			n := size(i)
			f.Set(reflect.MakeSlice(f.Type(), n, n))
			for j := range n {
				fillEntry(f.Index(j), "m-"+name)
			}
		}
	}
}

func fillEntry(v reflect.Value, marker string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(marker)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fillEntry(v.Field(i), marker)
			}
		}
	}
}

// check shows every field of CheckReport and CheckRepairs, in its table
// and its JSON: a finding's rows name what it found (each list's entries
// here name their field), a repair's line counts it, and the JSON holds
// every field under its name. A field added to either and not shown
// fails here.
func TestCheckShowsEveryField(t *testing.T) {
	t.Parallel()
	var rep worqr.CheckReport
	// Numbers of the report 9000 + i, lists of it 1 + i entries; of the
	// repairs, 500 + i either way: each field's own.
	fillReport(reflect.ValueOf(&rep).Elem(), func(i int) int {
		if reflect.TypeOf(rep).Field(i).Type.Kind() == reflect.Slice {
			return 1 + i
		}
		return 9000 + i
	})
	fillReport(reflect.ValueOf(&rep.Repaired).Elem(), func(i int) int { return 500 + i })

	var out bytes.Buffer
	e := &env{stdout: &out}
	require.NoError(t, e.printCheck(rep, true))
	text := strings.TrimSuffix(out.String(), rep.String()+"\n")
	require.NotEqual(t, out.String(), text, "the summary ends the output")
	rt := reflect.TypeOf(rep)
	for i := range rt.NumField() {
		f := rt.Field(i)
		switch {
		case f.Name == "Repaired":
		case strings.HasSuffix(f.Name, "Scanned") || strings.HasSuffix(f.Name, "Checked"):
			// Told in the summary, not a finding.
		case f.Type.Kind() == reflect.Slice:
			n := 0
			for line := range strings.Lines(text) {
				if strings.Contains(line, "m-"+f.Name) {
					n++
				}
			}
			assert.Equal(t, 1+i, n, "a row per entry of %s", f.Name)
		default:
			assert.Contains(t, text, strconv.Itoa(9000+i), "a row for %s", f.Name)
		}
	}
	pt := reflect.TypeOf(rep.Repaired)
	for i := range pt.NumField() {
		assert.Regexp(t, fmt.Sprintf(`(?m)^[a-z ()]+: +%d$`, 500+i), text, "a line for %s", pt.Field(i).Name)
	}

	var doc map[string]any
	raw, err := json.Marshal(checkReportJSON(rep, true))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	repaired, _ := doc["repaired"].(map[string]any)
	require.NotNil(t, repaired)
	for _, tc := range []struct {
		doc  map[string]any
		t    reflect.Type
		size func(int) int
	}{
		{doc, rt, func(i int) int {
			if rt.Field(i).Type.Kind() == reflect.Slice {
				return 1 + i
			}
			return 9000 + i
		}},
		{repaired, pt, func(i int) int { return 500 + i }},
	} {
		for i := range tc.t.NumField() {
			f := tc.t.Field(i)
			if f.Name == "Repaired" {
				continue
			}
			key := strings.ToLower(f.Name[:1]) + f.Name[1:]
			got, ok := tc.doc[key]
			if !assert.True(t, ok, "JSON has %s", key) {
				continue
			}
			if l, isList := got.([]any); isList {
				assert.Len(t, l, tc.size(i), key)
				assert.Contains(t, fmt.Sprint(l), "m-"+f.Name, key)
			} else {
				assert.EqualValues(t, tc.size(i), got, key)
			}
		}
	}
}
