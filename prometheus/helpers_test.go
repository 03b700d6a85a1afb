package worqrprom_test

import (
	"testing"

	"github.com/worqr/worqr/internal/testenv"
)

// The core package stays free of Prometheus and OpenTelemetry.
func TestCoreHasNoMetricsDependencies(t *testing.T) { testenv.RequireCoreWithoutMetrics(t) }

// Short names for the shared test helpers.
var (
	backend    = testenv.Backend
	redisOn    = testenv.RedisOn
	clientOn   = testenv.ClientOn
	newWorker  = testenv.NewWorker
	eventually = testenv.Eventually
)
