package worqr

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// CheckReport.String shows every finding and every repair: each field of
// the report (but the counts of what was scanned) and of its repairs, set
// alone to 7 (a number, or a list of 7 entries), shows as a 7 in the
// summary's breakdown, and counts in Problems. Walking the fields by
// reflection, the test covers a field added later without being told.
func TestCheckReportStringShowsEveryField(t *testing.T) {
	t.Parallel()
	seven := regexp.MustCompile(`\b7\b`)
	set := func(v reflect.Value) {
		if v.Kind() == reflect.Slice {
			v.Set(reflect.MakeSlice(v.Type(), 7, 7))
		} else {
			v.SetInt(7)
		}
	}
	rt := reflect.TypeOf(CheckReport{})
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Name == "Repaired" || strings.HasSuffix(f.Name, "Scanned") || strings.HasSuffix(f.Name, "Checked") {
			continue
		}
		var rep CheckReport
		set(reflect.ValueOf(&rep).Elem().Field(i))
		s := rep.String()
		assert.Equal(t, 7, rep.Problems(), "%s counts as problems", f.Name)
		_, breakdown, ok := strings.Cut(s, "problems (")
		if assert.True(t, ok, s) {
			assert.Regexp(t, seven, breakdown, "%s shows in the breakdown: %s", f.Name, s)
		}
	}
	pt := reflect.TypeOf(CheckRepairs{})
	for i := range pt.NumField() {
		var rep CheckReport
		set(reflect.ValueOf(&rep.Repaired).Elem().Field(i))
		s := rep.String()
		_, repaired, ok := strings.Cut(s, "; repaired: ")
		if assert.True(t, ok, "%s shows a repair: %s", pt.Field(i).Name, s) {
			assert.Regexp(t, seven, repaired, "%s shows in the repairs: %s", pt.Field(i).Name, s)
		}
	}
}
