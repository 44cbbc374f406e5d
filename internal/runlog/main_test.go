package runlog

import (
	"testing"

	"github.com/landform-dev/landform/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
