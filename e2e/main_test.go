package e2e

import (
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters shared by every test of this package.
var env *testbed.Env

func TestMain(m *testing.M) {
	testbed.Main(m, testbed.DefaultEnvOptions(), &env)
}
