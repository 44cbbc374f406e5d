package runs

import (
	"testing"

	"github.com/landform-dev/landform/internal/testenv"
)

// env is a real API server: runs keep their logs in Secrets.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
