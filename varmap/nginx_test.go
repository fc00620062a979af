package varmap

import (
	"testing"

	"github.com/numaproxy/numaproxy/internal/nginxtest"
)

func startNginx(t *testing.T, http string, files map[string]string) *nginxtest.Server {
	return nginxtest.Start(t, http, files)
}

func checkNginx(t *testing.T, http string) (string, bool) {
	return nginxtest.StartError(t, http, nil)
}
