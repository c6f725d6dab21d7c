package monitoring

import (
	"testing"

	"github.com/sidemirror/sidemirror/e2e/testbed"
)

// env holds the clusters and sidecars of the package's test.
var env *testbed.Env

func TestMain(m *testing.M) {
	opts := testbed.DefaultEnvOptions()
	opts.Sidecars = true
	opts.SidecarConfig = map[string]string{"readonly.allow.everyone.if.no.acl.found": "true"}
	testbed.Main(m, opts, &env)
}
